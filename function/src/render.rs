//! How an XR becomes Kubernetes objects, through the shared model's
//! renderer. The scope rule of Crossplane v2 holds by construction: a
//! namespaced XR (`VirtualMachine`, `VirtualPrivateNetwork`) renders only
//! namespaced objects in its own namespace; the cluster-scoped
//! `PhysicalNetwork` renders the one cluster-scoped network. Every name is
//! a valid Kubernetes name, whatever the XR's name ([`derived`]).

use k8s_openapi::api::core::v1::Service;
use serde::Serialize;
use vmaas_model::k8s::crd::{ClusterUserDefinedNetwork, UserDefinedNetwork, VirtualMachine};
use vmaas_model::k8s::names::derived;
use vmaas_model::k8s::render::{self, Attachment, Localnet, VmOptions, localnet_cudn, udn};
use vmaas_model::network::Cidr;
use vmaas_model::{ExposedPort, Protocol, Template, ValidationErrors};

use crate::xr::{FunctionInput, NetworkXrSpec, PhysicalNetworkXrSpec, VmXrSpec, wrap_parameters};

/// The VM's NIC on its private network.
pub const PRIVATE_NIC: &str = "private";
/// The VM's NIC on its physical network.
pub const PHYSICAL_NIC: &str = "physical";

/// What a VM XR's `spec.network` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkRef<'a> {
    /// A network of the VM's own, with this CIDR.
    Inline(&'a str),
    /// A `VirtualPrivateNetwork` XR in the VM's namespace.
    Named(&'a str),
}

impl VmXrSpec {
    /// What `spec.network` names, if anything: a CIDR (it has a `/`) or a
    /// network's name.
    pub fn network_ref(&self) -> Option<NetworkRef<'_>> {
        self.network.as_deref().map(|n| if n.contains('/') { NetworkRef::Inline(n) } else { NetworkRef::Named(n) })
    }
}

/// Everything rendered for one VM XR, all in the XR's namespace.
#[derive(Debug, Clone, Serialize)]
pub struct RenderedVm {
    /// The KubeVirt VM (named as the XR).
    pub vm: VirtualMachine,
    /// The floating IP, when ports are exposed and the VM runs.
    pub service: Option<Service>,
    /// The VM's own private network, when `spec.network` is a CIDR.
    pub udn: Option<UserDefinedNetwork>,
}

/// The UDN (and attachment definition) name of the inline network of VM `vm`.
pub fn inline_network_name(vm: &str) -> String {
    derived(vm, "net")
}

/// Checks what the XR adds to the template: the inline CIDR and the
/// networks' names.
fn check_xr(xr: &VmXrSpec) -> Result<(), ValidationErrors> {
    let mut errs = ValidationErrors::default();
    match xr.network_ref() {
        Some(NetworkRef::Inline(c)) => {
            if let Err(e) = Cidr::parse(c, 4) {
                errs.push("spec.network", e.to_string());
            }
        }
        Some(NetworkRef::Named(n)) => {
            if let Err(e) = vmaas_model::validation::check_dns_label(n) {
                errs.push("spec.network", format!("{n:?} is neither a CIDR nor a network's name: {e}"));
            }
        }
        None => {}
    }
    if let Some(Err(e)) = xr.physical_network.as_deref().map(vmaas_model::validation::check_dns_label) {
        errs.push("spec.physicalNetwork", e);
    }
    if errs.0.is_empty() { Ok(()) } else { Err(errs) }
}

/// The secondary NICs of a VM XR: its private network, then its physical one.
fn attachments(name: &str, xr: &VmXrSpec) -> Vec<Attachment> {
    let mut a = Vec::new();
    match xr.network_ref() {
        Some(NetworkRef::Inline(_)) => a.push(Attachment { name: PRIVATE_NIC.into(), network_name: inline_network_name(name) }),
        Some(NetworkRef::Named(n)) => a.push(Attachment { name: PRIVATE_NIC.into(), network_name: n.to_owned() }),
        None => {}
    }
    if let Some(p) = &xr.physical_network {
        a.push(Attachment { name: PHYSICAL_NIC.into(), network_name: p.clone() });
    }
    a
}

/// Renders the VM of XR `name` in `namespace`: validates its parameters
/// against `template` (every problem, with the same messages as the
/// server), applies what the XR adds to the machine, then renders through
/// the shared model.
pub fn render_vm(
    name: &str,
    namespace: &str,
    xr: &VmXrSpec,
    template: &Template,
    input: &FunctionInput,
) -> Result<RenderedVm, ValidationErrors> {
    let resolved = template.resolve(&wrap_parameters(&xr.template_parameters), "spec.templateParameters");
    let checked = check_xr(xr);
    let mut spec = match (resolved, checked) {
        (Ok(t), Ok(())) => t.spec,
        (Err(mut a), Err(b)) => {
            a.0.extend(b.0);
            return Err(a);
        }
        (Err(e), _) | (_, Err(e)) => return Err(e),
    };
    if !xr.expose.is_empty() {
        spec.exposed_ports = xr.expose.iter().map(|p| ExposedPort { port: *p, protocol: Protocol::Tcp, name: None }).collect();
    }
    spec.cloud_init.ssh_keys.extend(xr.ssh_keys.iter().cloned());
    if let Some(u) = &xr.user_data {
        spec.cloud_init.user_data = Some(u.clone());
    }
    let options = VmOptions {
        name: name.to_owned(),
        namespace: namespace.to_owned(),
        power: xr.state,
        attachments: attachments(name, xr),
        data_source_namespace: input.data_source_namespace.clone(),
        storage_class: input.storage_class.clone(),
        floating_ip: input.floating_ip.clone(),
    };
    let r = render::render_vm(&spec, &options);
    let udn = match xr.network_ref() {
        Some(NetworkRef::Inline(cidr)) => Some(udn(&inline_network_name(name), namespace, cidr)),
        _ => None,
    };
    Ok(RenderedVm { vm: r.vm, service: r.service, udn })
}

/// Renders the `VirtualPrivateNetwork` XR `name` of `namespace`: a
/// secondary layer-2 UDN of the same name there.
pub fn render_network(name: &str, namespace: &str, spec: &NetworkXrSpec) -> Result<UserDefinedNetwork, ValidationErrors> {
    if let Err(e) = Cidr::parse(&spec.ipv4_cidr, 4) {
        return Err(ValidationErrors(vec![vmaas_model::validation::FieldError::new("spec.ipv4Cidr", e.to_string())]));
    }
    Ok(udn(name, namespace, &spec.ipv4_cidr))
}

/// Renders the `PhysicalNetwork` XR `name`: a localnet CUDN of the same
/// name, offered to the namespaces it lists.
pub fn render_physical(name: &str, spec: &PhysicalNetworkXrSpec) -> Result<ClusterUserDefinedNetwork, ValidationErrors> {
    let mut errs = ValidationErrors::default();
    if let Some(Err(e)) = spec.ipv4_cidr.as_deref().map(|c| Cidr::parse(c, 4)) {
        errs.push("spec.ipv4Cidr", e.to_string());
    }
    if spec.namespaces.is_empty() {
        errs.push("spec.namespaces", "name at least one namespace whose VMs may attach");
    }
    for (i, ns) in spec.namespaces.iter().enumerate() {
        if let Err(e) = vmaas_model::validation::check_dns_label(ns) {
            errs.push(format!("spec.namespaces[{i}]"), e);
        }
    }
    if spec.physical_network_name.is_empty() || spec.physical_network_name.contains([',', ':']) {
        errs.push("spec.physicalNetworkName", "must be a bridge mapping's name, without ',' or ':'");
    }
    if spec.vlan.is_some_and(|v| !(1..=4094).contains(&v)) {
        errs.push("spec.vlan", "must be between 1 and 4094");
    }
    if !errs.0.is_empty() {
        return Err(errs);
    }
    let net = Localnet {
        physical_network: &spec.physical_network_name,
        cidr: spec.ipv4_cidr.as_deref(),
        vlan: spec.vlan,
        namespaces: &spec.namespaces,
    };
    Ok(localnet_cudn(name, &net))
}
