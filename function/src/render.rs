//! How an XR becomes Kubernetes objects, through the shared model's
//! renderer. The XRs are cluster-scoped (teams use them through claims in
//! their namespaces), so they compose what the seed design asks: a
//! namespace per VM or per private network, labelled with its tenant, a
//! primary layer-2 UDN in it, and the cluster-wide localnet CUDN of a
//! physical network. Namespace names come from the tenant and the claim's
//! name plus a hash ([`unique`]), so two teams never meet; every other name
//! is [`derived`] and always fits.

use k8s_openapi::api::core::v1::{Namespace, Service};
use serde::Serialize;
use vmaas_model::k8s::crd::{ClusterUserDefinedNetwork, UserDefinedNetwork, VirtualMachine};
use vmaas_model::k8s::names::unique;
use vmaas_model::k8s::render::{
    self, Attachment, Localnet, PodNetwork, VmOptions, check_bridge_mapping, check_vlan, localnet_cudn, namespace, subnet_cudn, udn,
};
use vmaas_model::network::Cidr;
use vmaas_model::validation::check_dns_label;
use vmaas_model::{ExposedPort, Protocol, Template, ValidationErrors};

use crate::xr::{FunctionInput, NetworkXrSpec, Owner, PhysicalNetworkXrSpec, Topology, VmXrSpec};

/// The VM's NIC on its physical network `network`: named after it, as
/// seed 002 writes it (`vlan2003`), but `physical` for a network named
/// `default`, the first NIC's name.
pub fn physical_nic(network: &str) -> &str {
    if network == "default" { "physical" } else { network }
}

/// What a VM's `spec.network` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkRef<'a> {
    /// A network of the VM's own, with this CIDR.
    Inline(&'a str),
    /// A `VirtualPrivateSubnet` claim of the VM claim's namespace.
    Named(&'a str),
}

impl VmXrSpec {
    /// What `spec.network` names, if anything: a CIDR (it has a `/`) or a
    /// network's name.
    pub fn network_ref(&self) -> Option<NetworkRef<'_>> {
        self.network.as_deref().map(|n| if n.contains('/') { NetworkRef::Inline(n) } else { NetworkRef::Named(n) })
    }
}

/// The namespace of a VM of its own (no network, or an inline one).
pub fn vm_namespace(owner: &Owner) -> String {
    unique(&["vmaas", &owner.tenant, &owner.name])
}

/// The namespace of the private network `network` of `tenant`, where the
/// VMs on it live.
pub fn network_namespace(tenant: &str, network: &str) -> String {
    unique(&["vmaas-net", tenant, network])
}

/// The name of the secondary network `network` of `tenant`: its CUDN's,
/// and the NetworkAttachmentDefinition's OVN-K makes of it in each of the
/// tenant's namespaces, which a VM's NIC on it names.
pub fn subnet_network_name(tenant: &str, network: &str) -> String {
    unique(&["vmaas-sub", tenant, network])
}

/// Most secondary networks one VM may list (`spec.subnets`).
pub const MAX_SUBNETS: usize = 8;

/// The namespace the VM of `owner` lives in: its named network's, or its
/// own (no network, or an inline one).
pub fn vm_home(owner: &Owner, xr: &VmXrSpec) -> String {
    match xr.network_ref() {
        Some(NetworkRef::Named(n)) => network_namespace(&owner.tenant, n),
        Some(NetworkRef::Inline(_)) | None => vm_namespace(owner),
    }
}

/// Everything rendered for one VM XR.
#[derive(Debug, Clone, Serialize)]
pub struct RenderedVm {
    /// The namespace the VM lives in.
    pub namespace_name: String,
    /// That namespace, when the VM owns it (no named network).
    pub namespace: Option<Namespace>,
    /// The VM's own private network, when `spec.network` is a CIDR.
    pub udn: Option<UserDefinedNetwork>,
    /// The KubeVirt VM (named as the claim).
    pub vm: VirtualMachine,
    /// The floating IP, when ports are exposed and the VM runs.
    pub service: Option<Service>,
    /// The VM's own `VirtualMachineInstancetype` (a claim naming an
    /// instance type) and `VirtualMachinePreference` (a platform beyond
    /// KubeVirt's defaults), which it references.
    pub shapes: Vec<serde_json::Value>,
    /// The instance type it is of, if any.
    pub instance_type: Option<String>,
}

/// Everything rendered for one private network XR.
#[derive(Debug, Clone, Serialize)]
pub struct RenderedNetwork {
    /// Its namespace, labelled for a primary UDN.
    pub namespace: Namespace,
    /// The network.
    pub udn: UserDefinedNetwork,
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
            if let Err(e) = check_dns_label(n) {
                errs.push("spec.network", format!("{n:?} is neither a CIDR nor a network's name: {e}"));
            }
        }
        None => {}
    }
    if let Some(Err(e)) = xr.physical_network.as_deref().map(check_dns_label) {
        errs.push("spec.physicalNetwork", e);
    }
    check_subnets(xr, &mut errs);
    if xr.state == vmaas_model::PowerState::Paused {
        errs.push("spec.state", "a claim's VM is \"started\" or \"stopped\": pausing is the vmaas API's (KubeVirt's pause is imperative)");
    }
    if errs.0.is_empty() { Ok(()) } else { Err(errs) }
}

/// The secondary networks a VM lists: names, each once, not its own
/// network, at most [`MAX_SUBNETS`].
fn check_subnets(xr: &VmXrSpec, errs: &mut ValidationErrors) {
    if xr.subnets.len() > MAX_SUBNETS {
        errs.push("spec.subnets", format!("lists {} networks: a VM has at most {MAX_SUBNETS} beside its first", xr.subnets.len()));
    }
    let own = match xr.network_ref() {
        Some(NetworkRef::Named(n)) => Some(n),
        _ => None,
    };
    for (i, n) in xr.subnets.iter().enumerate() {
        let at = format!("spec.subnets[{i}]");
        if let Err(e) = check_dns_label(n) {
            errs.push(at, format!("{n:?} is not a network's name: {e}"));
        } else if xr.subnets[..i].contains(n) {
            errs.push(at, format!("{n:?} is listed twice: a VM has one NIC on a network"));
        } else if own == Some(n.as_str()) {
            errs.push(at, format!("{n:?} is the VM's own network (spec.network): a network is a primary or a secondary one"));
        }
    }
}

/// The machine the XR asks for: the template resolved with its
/// parameters, sized by its instance type (`kept`: the one the VM has
/// already), plus what the XR adds (ports, keys, user data).
fn machine(
    xr: &VmXrSpec,
    template: &Template,
    input: &FunctionInput,
    kept: Option<&str>,
) -> Result<vmaas_model::MachineSpec, ValidationErrors> {
    let (params, instance_type) = crate::shape::named(xr, template)?;
    let resolved = template.resolve(&params, "spec.templateParameters");
    let mut spec = match (resolved, check_xr(xr)) {
        (Ok(t), Ok(())) => t.spec,
        (Err(mut a), Err(b)) => {
            a.0.extend(b.0);
            return Err(a);
        }
        (Err(e), _) | (_, Err(e)) => return Err(e),
    };
    if let Some(name) = instance_type {
        crate::shape::apply(&name, template, input, &params, kept, &mut spec)?;
    }
    if !xr.expose.is_empty() {
        spec.exposed_ports = xr.expose.iter().map(|p| ExposedPort { port: *p, protocol: Protocol::Tcp, name: None }).collect();
    }
    spec.cloud_init.ssh_keys.extend(xr.ssh_keys.iter().cloned());
    if let Some(u) = &xr.user_data {
        spec.cloud_init.user_data = Some(u.clone());
    }
    disks(xr, &mut spec)?;
    Ok(spec)
}

/// The claim's boot disk and additional disks, each problem named as the
/// claim writes it (`spec.bootDisk.sizeGib`).
fn disks(xr: &VmXrSpec, spec: &mut vmaas_model::MachineSpec) -> Result<(), ValidationErrors> {
    let boot = xr.boot_disk.as_ref().map(vmaas_model::VmDisk::from);
    let additional: Vec<vmaas_model::VmDisk> = xr.additional_disks.iter().map(Into::into).collect();
    let mut errs = ValidationErrors::default();
    vmaas_model::vm::disks::apply_disks(boot.as_ref(), &additional, spec, "spec", &mut errs);
    for e in &mut errs.0 {
        for (snake, camel) in
            [("boot_disk", "bootDisk"), ("additional_disks", "additionalDisks"), ("size_gib", "sizeGib"), ("storage_tier", "storageTier")]
        {
            e.field = e.field.replace(snake, camel);
        }
    }
    errs.into_result(())
}

/// Renders the VM of `owner`: validates its parameters and instance type
/// against `template` and the input (every problem, with the same messages
/// as the server; `kept` is the instance type the VM has already), then
/// renders through the shared model into its namespace: its own, or its
/// named network's.
pub fn render_vm(
    owner: &Owner,
    xr: &VmXrSpec,
    template: &Template,
    input: &FunctionInput,
    kept: Option<&str>,
) -> Result<RenderedVm, ValidationErrors> {
    let spec = machine(xr, template, input, kept)?;
    let ns = vm_home(owner, xr);
    let (own, inline) = match xr.network_ref() {
        Some(NetworkRef::Named(_)) => (false, None),
        Some(NetworkRef::Inline(cidr)) => (true, Some(cidr)),
        None => (true, None),
    };
    let options = VmOptions {
        name: owner.name.clone(),
        namespace: ns.clone(),
        power: xr.state,
        network: if xr.network.is_some() { PodNetwork::PrimaryUdn } else { PodNetwork::Masquerade },
        address: None,
        attachments: attachments(owner, xr),
        pod_mac: None,
        data_source_namespace: input.data_source_namespace.clone(),
        storage_class: input.storage_class.clone(),
        floating_ip: input.floating_ip.clone(),
        shapes: render::Shapes::Namespaced,
        claims: Default::default(),
        arrived: Default::default(),
        tenant_labels: Default::default(),
        tenant_annotations: Default::default(),
    };
    let r = render::render_vm(&spec, &options);
    Ok(RenderedVm {
        namespace: own.then(|| namespace(&ns, inline.is_some(), &owner.tenant)),
        udn: inline.map(|cidr| udn(&owner.name, &ns, cidr)),
        namespace_name: ns,
        vm: r.vm,
        service: r.service,
        shapes: r.shape_objects.into_iter().map(|o| labelled(o, spec.instance_type.as_deref())).collect(),
        instance_type: spec.instance_type,
    })
}

/// The VM's NICs beside its first: on its physical network, then one on
/// each secondary network it lists (`sub0`, `sub1`, …: OVN-K gives their
/// addresses and keeps them for the VM's life).
fn attachments(owner: &Owner, xr: &VmXrSpec) -> Vec<Attachment> {
    let physical =
        xr.physical_network.iter().map(|p| Attachment { name: physical_nic(p).into(), network_name: p.clone(), mac: None, address: None });
    let subnets = xr.subnets.iter().enumerate().map(|(i, n)| Attachment {
        name: format!("sub{i}"),
        network_name: subnet_network_name(&owner.tenant, n),
        mac: None,
        address: None,
    });
    physical.chain(subnets).collect()
}

/// A composed instance type labelled with the vmaas type it is.
fn labelled(mut obj: serde_json::Value, instance_type: Option<&str>) -> serde_json::Value {
    if let (Some(name), true) = (instance_type, obj["kind"] == "VirtualMachineInstancetype") {
        obj["metadata"]["labels"] = serde_json::json!({crate::shape::INSTANCE_TYPE_LABEL: name});
    }
    obj
}

/// Renders the private network of `owner`: its namespace, labelled for a
/// primary UDN, and a layer-2 UDN of the claim's name in it.
pub fn render_network(owner: &Owner, spec: &NetworkXrSpec) -> Result<RenderedNetwork, ValidationErrors> {
    check_network(spec)?;
    let ns = network_namespace(&owner.tenant, &owner.name);
    Ok(RenderedNetwork { namespace: namespace(&ns, true, &owner.tenant), udn: udn(&owner.name, &ns, &spec.ipv4_cidr) })
}

/// Why a VM cannot be on a Layer3 network: the reason `spec.topology:
/// Layer3` is refused with.
pub const LAYER3_REFUSED: &str = "Layer3 is refused: KubeVirt runs VMs on OVN-K's Layer2 (and Localnet) topologies only. A Layer3 network gives each node a slice of its range (hostSubnet), so a VM's address would be its node's and change when it moves, and live migration could not keep it; use Layer2";

/// Checks a private network's range and topology.
fn check_network(spec: &NetworkXrSpec) -> Result<(), ValidationErrors> {
    let mut errs = ValidationErrors::default();
    if let Err(e) = Cidr::parse(&spec.ipv4_cidr, 4) {
        errs.push("spec.ipv4Cidr", e.to_string());
    }
    if spec.topology == Topology::Layer3 {
        errs.push("spec.topology", LAYER3_REFUSED);
    }
    errs.into_result(())
}

/// Renders the secondary network of `owner`: a layer-2 CUDN with OVN-K's
/// persistent IPAM on its range, over the namespaces of its tenant
/// (`vmaas.io/tenant`: each VM's and each primary network's namespace is
/// labelled with the claims' namespace).
pub fn render_secondary(owner: &Owner, spec: &NetworkXrSpec) -> Result<ClusterUserDefinedNetwork, ValidationErrors> {
    check_network(spec)?;
    let tenants = [owner.tenant.clone()];
    Ok(subnet_cudn(&subnet_network_name(&owner.tenant, &owner.name), Some(&spec.ipv4_cidr), &tenants))
}

/// Renders the `PhysicalNetwork` XR `name`: a localnet CUDN of the same
/// name, offered to the vmaas namespaces of the tenants it lists.
pub fn render_physical(name: &str, spec: &PhysicalNetworkXrSpec) -> Result<ClusterUserDefinedNetwork, ValidationErrors> {
    let mut errs = ValidationErrors::default();
    if let Some(Err(e)) = spec.ipv4_cidr.as_deref().map(|c| Cidr::parse(c, 4)) {
        errs.push("spec.ipv4Cidr", e.to_string());
    }
    if spec.namespaces.is_empty() {
        errs.push("spec.namespaces", "name at least one namespace whose VMs may attach");
    }
    for (i, ns) in spec.namespaces.iter().enumerate() {
        if let Err(e) = check_dns_label(ns) {
            errs.push(format!("spec.namespaces[{i}]"), e);
        }
    }
    if let Err(e) = check_bridge_mapping(&spec.physical_network_name) {
        errs.push("spec.physicalNetworkName", e.to_string());
    }
    if let Some(Err(e)) = spec.vlan.map(check_vlan) {
        errs.push("spec.vlan", e.to_string());
    }
    if !errs.0.is_empty() {
        return Err(errs);
    }
    let net = Localnet {
        physical_network: &spec.physical_network_name,
        cidr: spec.ipv4_cidr.as_deref(),
        vlan: spec.vlan,
        tenants: &spec.namespaces,
    };
    Ok(localnet_cudn(name, &net))
}
