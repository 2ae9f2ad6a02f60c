//! The Crossplane side of the function: its input, and the specs of the
//! XRs it reads (decoded strictly, Crossplane's own fields aside).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use vmaas_model::k8s::render::FloatingIp;
use vmaas_model::load_balancer::{LbProtocol, PortMapping};
use vmaas_model::{ParameterValue, PowerState, VirtualMachineTemplate};

/// API version of the XRs this package defines.
pub const XR_API: &str = "vmaas.io/v1alpha1";

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
    /// The instance types claims may name, as the server's API has them.
    #[serde(default)]
    pub instance_types: Vec<NamedInstanceType>,
}

/// An instance type of the function's input: its name and its spec, as
/// `POST /api/fulfillment/v1/instance_types` takes them (`cores`,
/// `memory_gib`, `gpu`, `state`, `deprecation`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamedInstanceType {
    /// Its name, e.g. `general.large`.
    pub name: String,
    /// Its shape and lifecycle.
    pub spec: vmaas_model::InstanceTypeSpec,
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
    /// An instance type of the function's input, by name: the VM's cores,
    /// memory and GPUs (seed 001 also writes it as
    /// `templateParameters.instanceType`).
    #[serde(default)]
    pub instance_type: Option<String>,
    /// Parameters: `{name: value}` or `{name: {value: ...}}`.
    #[serde(default)]
    pub template_parameters: BTreeMap<String, Value>,
    /// `started` (default) or `stopped`.
    #[serde(default)]
    pub state: PowerState,
    /// A `VirtualPrivateSubnet` claim's name in the VM claim's namespace,
    /// or an inline CIDR such as `10.200.0.0/16` (a network of the VM's own).
    #[serde(default)]
    pub network: Option<String>,
    /// A `PhysicalNetwork`'s name: a NIC on that physical L2 network (it
    /// must admit the VM claim's namespace).
    #[serde(default)]
    pub physical_network: Option<String>,
    /// `VirtualPrivateSubnet` claims of role `Secondary` in the VM claim's
    /// namespace, by name: a NIC on each, in order, after the first NIC
    /// and the physical network's.
    #[serde(default)]
    pub subnets: Vec<String>,
    /// Ports exposed on the floating IP (the template's when empty).
    #[serde(default)]
    pub expose: Vec<u16>,
    /// SSH public keys.
    #[serde(default)]
    pub ssh_keys: Vec<String>,
    /// Cloud-init user data.
    #[serde(default)]
    pub user_data: Option<String>,
    /// `Volume` claims of the same namespace, by name, on the VM's named
    /// network: hotplugged while it runs.
    #[serde(default)]
    pub volumes: Vec<String>,
    /// Its boot disk, when not as the template makes it (OSAC's `boot_disk`).
    #[serde(default)]
    pub boot_disk: Option<XrDisk>,
    /// Empty disks beside the template's (OSAC's `additional_disks`).
    #[serde(default)]
    pub additional_disks: Vec<XrDisk>,
}

/// A disk of a VM claim, as the API's `VmDisk` in the claim's camel case.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct XrDisk {
    /// Its size in GiB.
    pub size_gib: u32,
    /// The storage class its DataVolume is made in.
    #[serde(default)]
    pub storage_tier: Option<String>,
}

impl From<&XrDisk> for vmaas_model::VmDisk {
    fn from(d: &XrDisk) -> Self {
        Self { size_gib: d.size_gib, storage_tier: d.storage_tier.clone() }
    }
}

/// The `spec` of a `Volume` (claim or XR): block storage that outlives VMs,
/// in a private network's namespace, where the VMs that use it live.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VolumeXrSpec {
    /// Its size, e.g. `10Gi`; only grows.
    pub size: vmaas_model::Quantity,
    /// The image it starts as: a DataSource's name, or an `http(s)` URL; absent: blank.
    #[serde(default)]
    pub source_image: Option<String>,
    /// The `VirtualPrivateSubnet` claim (same namespace) whose VMs may use it.
    pub network: String,
}

impl VolumeXrSpec {
    /// Decodes a volume XR's `spec`, as [`VmXrSpec::from_xr`] does.
    pub fn from_xr(spec: &Value) -> Result<Self, serde_json::Error> {
        serde_json::from_value(without_crossplane(spec))
    }
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

/// The `spec` of a `VirtualPrivateSubnet` (claim or XR): a tenant's
/// private layer-2 network.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NetworkXrSpec {
    /// The subnet, e.g. `192.168.100.0/24`.
    pub ipv4_cidr: String,
    /// `Primary` (the default): a namespace whose VMs it is the network
    /// of; `Secondary`: a second NIC's network for any of the tenant's VMs
    /// that list it (`VmXrSpec::subnets`). Fixed at create.
    #[serde(default)]
    pub role: NetworkRole,
    /// OVN-K's topology: `Layer2` (the default), the one KubeVirt's VMs
    /// run on. `Layer3` (seed 001's `hostSubnet`: a slice of the range per
    /// node) is taken only to be refused with the reason.
    #[serde(default)]
    pub topology: Topology,
}

/// An OVN-K network topology a claim may name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Topology {
    /// One segment across the nodes: a VM keeps its address wherever it runs.
    #[default]
    Layer2,
    /// A segment per node, routed: an address belongs to its node's slice.
    Layer3,
}

/// What a private network is to the VMs on it, in OVN-K's words.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum NetworkRole {
    /// Its own namespace's primary UDN: the VMs that name it
    /// (`spec.network`) live there, and it is their first NIC.
    #[default]
    Primary,
    /// A secondary layer-2 CUDN over the tenant's namespaces: a NIC of
    /// each VM that lists it (`spec.subnets`), beside its first.
    Secondary,
}

/// The `spec` of a (cluster-scoped) `PhysicalNetwork` XR: a physical L2
/// network (an OVN-K localnet) offered to some namespaces.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PhysicalNetworkXrSpec {
    /// The nodes' bridge mapping for the network (`localnet` in OVN-K).
    pub physical_network_name: String,
    /// The subnet OVN-K assigns guest addresses from; none when the
    /// network brings its own addressing.
    #[serde(default)]
    pub ipv4_cidr: Option<String>,
    /// The access VLAN on the physical network.
    #[serde(default)]
    pub vlan: Option<u16>,
    /// The tenants (the namespaces of the claims) whose VMs may attach.
    pub namespaces: Vec<String>,
}

impl PhysicalNetworkXrSpec {
    /// Decodes a physical network XR's `spec`, as [`VmXrSpec::from_xr`] does.
    pub fn from_xr(spec: &Value) -> Result<Self, serde_json::Error> {
        serde_json::from_value(without_crossplane(spec))
    }
}

/// The `spec` of a `LoadBalancer` (claim or XR), seed 001's shape.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LoadBalancerXrSpec {
    /// The VMs behind it, by their claims' names (XRs' for XRs made directly).
    pub host_refs: Vec<HostRef>,
    /// Its ports.
    pub port_mapping: Vec<XrPortMapping>,
}

/// One VM behind a load balancer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HostRef {
    /// `VirtualMachine` (or the seed's `VirtualMachineHost`).
    #[serde(default)]
    pub kind: Option<String>,
    /// The VM's claim name.
    pub name: String,
}

/// One port of a load balancer (the seed's `portMapping` item).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct XrPortMapping {
    /// `TCP` (default) or `UDP`.
    #[serde(default)]
    pub protocol: LbProtocol,
    /// The port on the load balancer's address.
    pub external_port: i32,
    /// The port on each VM.
    pub internal_port: i32,
}

impl LoadBalancerXrSpec {
    /// Decodes a load balancer XR's `spec`, as [`VmXrSpec::from_xr`] does.
    pub fn from_xr(spec: &Value) -> Result<Self, serde_json::Error> {
        serde_json::from_value(without_crossplane(spec))
    }

    /// The port mappings in the shared model's terms.
    pub fn mappings(&self) -> Vec<PortMapping> {
        self.port_mapping
            .iter()
            .map(|m| PortMapping { protocol: m.protocol, external_port: m.external_port, internal_port: m.internal_port })
            .collect()
    }
}

/// Crossplane's label on an XR made for a claim: the claim's namespace.
pub const CLAIM_NAMESPACE_LABEL: &str = "crossplane.io/claim-namespace";
/// Crossplane's label on an XR made for a claim: the claim's name.
pub const CLAIM_NAME_LABEL: &str = "crossplane.io/claim-name";

/// Whose an XR is, and what it is called there: a claim's namespace (the
/// tenant) and name, or for an XR made directly (by the platform team) no
/// tenant and the XR's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// The claim's namespace, or empty.
    pub tenant: String,
    /// The claim's name, or the XR's.
    pub name: String,
}

impl Owner {
    /// The owner of the XR `xr`, from the labels Crossplane puts on it.
    pub fn of(xr: &Value) -> Self {
        let labels = &xr["metadata"]["labels"];
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        match (labels[CLAIM_NAMESPACE_LABEL].as_str(), labels[CLAIM_NAME_LABEL].as_str()) {
            (Some(ns), Some(name)) if !ns.is_empty() && !name.is_empty() => Self { tenant: ns.into(), name: name.into() },
            _ => Self { tenant: String::new(), name: text(&xr["metadata"]["name"]) },
        }
    }

    /// Who it is, in words (`claim team-a/myvm`, `XR myvm`).
    pub fn describe(&self) -> String {
        if self.tenant.is_empty() { format!("XR {}", self.name) } else { format!("claim {}/{}", self.tenant, self.name) }
    }
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
