//! The Crossplane side of the function: its input, the XR specs it reads,
//! and how an XR becomes a machine spec plus rendering options for the
//! shared model's renderer (namespaces, inline networks, exposed ports,
//! extra SSH keys and user data).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Namespace, Service};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use vmaas_model::k8s::crd::{ClusterUserDefinedNetwork, UserDefinedNetwork, VirtualMachine};
use vmaas_model::k8s::render::{self, FloatingIp, PodNetwork, VmOptions, localnet_cudn, namespace, udn};
use vmaas_model::{ExposedPort, ParameterValue, PowerState, Protocol, Template, ValidationErrors, VirtualMachineTemplate};

/// The function's input (`vmaas.fn.io/v1alpha1` `Input`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FunctionInput {
    /// Always `vmaas.fn.io/v1alpha1`.
    #[serde(default)]
    pub api_version: String,
    /// Always `Input`.
    #[serde(default)]
    pub kind: String,
    /// Template catalog, inline.
    #[serde(default)]
    pub templates: Vec<VirtualMachineTemplate>,
    /// Also read cluster-scoped `VirtualMachineTemplate` objects (`vmaas.io/v1alpha1`).
    #[serde(default)]
    pub templates_from_cluster: bool,
    /// Floating IP implementation.
    #[serde(default)]
    pub floating_ip: FloatingIp,
    /// Namespace of the CDI DataSources that images name.
    #[serde(default = "default_ds_namespace")]
    pub data_source_namespace: String,
    /// Storage class of boot disks (the cluster default when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class: Option<String>,
}

fn default_ds_namespace() -> String {
    "openshift-virtualization-os-images".into()
}

/// The `spec` of a `VirtualMachine` XR.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VmXrSpec {
    /// Template id.
    pub template: String,
    /// Parameters: `{name: value}` or `{name: {value: ...}}`.
    #[serde(default)]
    pub template_parameters: BTreeMap<String, Value>,
    /// `started` (default) or `stopped`.
    #[serde(default)]
    pub state: PowerState,
    /// A `VirtualPrivateNetwork` XR's name, or an inline CIDR such as `10.200.0.0/16`.
    #[serde(default)]
    pub network: Option<String>,
    /// Ports exposed on the floating IP (the template's when empty).
    #[serde(default)]
    pub expose: Vec<u16>,
    /// SSH public keys.
    #[serde(default)]
    pub ssh_keys: Vec<String>,
    /// Cloud-init user data.
    #[serde(default)]
    pub user_data: Option<String>,
}

/// The fields Crossplane itself writes into an XR's `spec`: `crossplane`
/// (v2) and the v1 names. They are Crossplane's: ignored here.
pub const CROSSPLANE_FIELDS: [&str; 11] = [
    "crossplane",
    "compositionRef",
    "compositionSelector",
    "compositionRevisionRef",
    "compositionRevisionSelector",
    "compositionUpdatePolicy",
    "claimRef",
    "resourceRefs",
    "writeConnectionSecretToRef",
    "publishConnectionDetailsTo",
    "environmentConfigRefs",
];

/// An XR's `spec` without Crossplane's own fields, for decoding strictly.
fn without_crossplane(spec: &Value) -> Value {
    let mut s = spec.clone();
    if let Some(o) = s.as_object_mut() {
        for f in CROSSPLANE_FIELDS {
            o.remove(f);
        }
    }
    s
}

impl VmXrSpec {
    /// Decodes a VM XR's `spec`: Crossplane's own fields are ignored, any
    /// other unknown field is an error naming it.
    pub fn from_xr(spec: &Value) -> Result<Self, serde_json::Error> {
        serde_json::from_value(without_crossplane(spec))
    }
}

impl NetworkXrSpec {
    /// Decodes a network XR's `spec`, as [`VmXrSpec::from_xr`] does.
    pub fn from_xr(spec: &Value) -> Result<Self, serde_json::Error> {
        serde_json::from_value(without_crossplane(spec))
    }
}

/// The `spec` of a `VirtualPrivateNetwork` XR.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NetworkXrSpec {
    /// The subnet, e.g. `192.168.100.0/24`.
    pub ipv4_cidr: String,
    /// Attach to this physical network (localnet) instead of an overlay.
    #[serde(default)]
    pub localnet: Option<String>,
}

/// Everything rendered for one VM XR.
#[derive(Debug, Clone, Serialize)]
pub struct RenderedVm {
    /// The namespace the VM lives in.
    pub namespace_name: String,
    /// The namespace, when the VM owns it.
    pub namespace: Option<Namespace>,
    /// Its private network, when given inline.
    pub udn: Option<UserDefinedNetwork>,
    /// The KubeVirt VM.
    pub vm: VirtualMachine,
    /// The floating IP, when ports are exposed.
    pub service: Option<Service>,
}

/// What a private network XR renders to.
#[derive(Debug, Clone, Serialize)]
pub struct RenderedNetwork {
    /// Its namespace (labelled for a primary UDN).
    pub namespace: Namespace,
    /// The overlay network.
    pub udn: Option<UserDefinedNetwork>,
    /// The localnet variant.
    pub cudn: Option<ClusterUserDefinedNetwork>,
}

/// Namespace of a VM's own objects.
pub fn vm_namespace(xr_name: &str) -> String {
    format!("vmaas-{xr_name}")
}

/// Namespace of a private network (and the VMs on it).
pub fn network_namespace(network: &str) -> String {
    format!("vmaas-net-{network}")
}

/// The template a cluster `VirtualMachineTemplate` object holds: its `spec`,
/// with `spec.id` defaulting to the object's name.
pub fn template_from_object(obj: &Value) -> Result<VirtualMachineTemplate, serde_json::Error> {
    let mut spec = obj["spec"].clone();
    if spec.get("id").is_none() {
        spec["id"] = obj["metadata"]["name"].clone();
    }
    serde_json::from_value(spec)
}

/// Longest name of a Kubernetes object the function composes (a DNS label).
pub const MAX_NAME: usize = 63;

impl RenderedVm {
    /// The names of every object rendered.
    pub fn names(&self) -> Vec<String> {
        let mut names = vec![self.namespace_name.clone()];
        names.extend(self.vm.metadata.name.clone());
        names.extend(self.vm.spec.data_volume_templates.iter().filter_map(|d| d.metadata.name.clone()));
        names.extend(self.udn.iter().filter_map(|u| u.metadata.name.clone()));
        names.extend(self.service.iter().filter_map(|s| s.metadata.name.clone()));
        names
    }

    /// A name of a rendered object that is too long for Kubernetes, if any:
    /// the XR's name (or its network's) must be shorter.
    pub fn too_long(&self) -> Option<String> {
        self.names().into_iter().find(|n| n.len() > MAX_NAME)
    }
}

/// Wraps bare parameter values as `{"value": ...}`.
pub fn wrap_parameters(p: &BTreeMap<String, Value>) -> BTreeMap<String, ParameterValue> {
    p.iter()
        .map(|(k, v)| {
            let value = match v {
                Value::Object(o) if o.len() == 1 && o.contains_key("value") => o["value"].clone(),
                other => other.clone(),
            };
            (k.clone(), ParameterValue::new(value))
        })
        .collect()
}

/// Renders the VM of XR `name`: validates its parameters against `template`
/// (every problem, with the same messages as the server), applies what the
/// XR adds to the machine, then renders through the shared model.
pub fn render_vm(name: &str, xr: &VmXrSpec, template: &Template, input: &FunctionInput) -> Result<RenderedVm, ValidationErrors> {
    let mut spec = template.resolve(&wrap_parameters(&xr.template_parameters), "spec.templateParameters")?.spec;
    if !xr.expose.is_empty() {
        spec.exposed_ports = xr.expose.iter().map(|p| ExposedPort { port: *p, protocol: Protocol::Tcp, name: None }).collect();
    }
    spec.cloud_init.ssh_keys.extend(xr.ssh_keys.iter().cloned());
    if let Some(u) = &xr.user_data {
        spec.cloud_init.user_data = Some(u.clone());
    }
    let (ns, own_ns, inline_cidr) = match xr.network.as_deref() {
        Some(cidr) if cidr.contains('/') => (vm_namespace(name), true, Some(cidr)),
        Some(net) => (network_namespace(net), false, None),
        None => (vm_namespace(name), true, None),
    };
    let options = VmOptions {
        name: name.to_owned(),
        namespace: ns.clone(),
        power: xr.state,
        network: if xr.network.is_some() { PodNetwork::PrimaryUdn } else { PodNetwork::Masquerade },
        data_source_namespace: input.data_source_namespace.clone(),
        storage_class: input.storage_class.clone(),
        floating_ip: input.floating_ip.clone(),
    };
    let r = render::render_vm(&spec, &options);
    Ok(RenderedVm {
        namespace: own_ns.then(|| namespace(&ns, inline_cidr.is_some())),
        udn: inline_cidr.map(|c| udn(name, &ns, c)),
        namespace_name: ns,
        vm: r.vm,
        service: r.service,
    })
}

/// Renders the `VirtualPrivateNetwork` XR `name`.
pub fn render_network(name: &str, spec: &NetworkXrSpec) -> RenderedNetwork {
    let ns = network_namespace(name);
    match &spec.localnet {
        None => RenderedNetwork { namespace: namespace(&ns, true), udn: Some(udn(name, &ns, &spec.ipv4_cidr)), cudn: None },
        Some(physical) => {
            RenderedNetwork { namespace: namespace(&ns, false), udn: None, cudn: Some(localnet_cudn(name, &ns, physical, &spec.ipv4_cidr)) }
        }
    }
}
