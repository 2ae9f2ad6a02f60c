//! What decides how a VM renders besides its machine ([`VmOptions`]: its
//! names, power, networks, storage, floating IP and shapes), and what comes
//! out ([`RenderedVm`]).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::crd::VirtualMachine;
use super::platform::Shapes;
use crate::PowerState;

/// How floating IPs are implemented.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FloatingIp {
    /// `metallb` (default) or `esi`.
    #[serde(default = "metallb")]
    pub provider: String,
    /// MetalLB address pool (or ESI network) to take the IP from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address_pool: Option<String>,
}

fn metallb() -> String {
    "metallb".into()
}

impl FloatingIp {
    /// The annotations that ask the cluster's load balancer for an address
    /// of this kind, on a Service of type `LoadBalancer`.
    pub fn annotations(&self) -> BTreeMap<String, String> {
        let mut a = BTreeMap::from([("vmaas.io/floating-ip-provider".to_owned(), self.provider.clone())]);
        if let Some(pool) = &self.address_pool {
            let key = if self.provider == "esi" { "vmaas.io/esi-network" } else { "metallb.io/address-pool" };
            a.insert(key.into(), pool.clone());
        }
        a
    }
}

/// How a VM's first NIC is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodNetwork {
    /// The cluster's pod network, masqueraded.
    Masquerade,
    /// The namespace's primary user-defined network, bridged at layer 2.
    PrimaryUdn,
}

/// A secondary NIC: bridged onto a Multus network, the attachment
/// definition OVN-K creates for a user-defined network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// The interface's (and network's) name in the VM.
    pub name: String,
    /// The network attachment definition, `[namespace/]name`.
    pub network_name: String,
    /// Its MAC; none: KubeVirt picks one.
    pub mac: Option<String>,
    /// The address the guest sets on it (`10.0.1.5/24`, told by
    /// cloud-init's network configuration); none: the network's own (DHCP).
    pub address: Option<String>,
}

/// Everything besides the machine that decides how a VM renders.
#[derive(Debug, Clone)]
pub struct VmOptions {
    /// Name of the KubeVirt VM (and prefix of its other objects).
    pub name: String,
    /// Namespace of the VM and its Service.
    pub namespace: String,
    /// Run or stay off.
    pub power: PowerState,
    /// How the first NIC (`default`, which carries the floating IP and the
    /// readiness probe) is attached.
    pub network: PodNetwork,
    /// The first NIC's fixed address on a primary UDN, in CIDR form
    /// (`10.0.0.5/24`): the guest gets exactly it from OVN-K's IPAM.
    pub address: Option<String>,
    /// NICs beside the first one (a physical network).
    pub attachments: Vec<Attachment>,
    /// The MAC of the pod network's NIC: given when some attachment has a
    /// fixed address, so the network configuration can name each NIC.
    pub pod_mac: Option<String>,
    /// Namespace of the CDI DataSources that images name.
    pub data_source_namespace: String,
    /// Storage class of the disks (the cluster default when absent).
    pub storage_class: Option<String>,
    /// How the floating IP is implemented.
    pub floating_ip: FloatingIp,
    /// Whether the VM carries its instance type and guest profile in its
    /// domain or references KubeVirt objects for them, cluster-wide or its own.
    pub shapes: Shapes,
    /// Claims the VM's disks already are, by disk (volume) name: a clone's,
    /// made by KubeVirt's clone from its source (`rootdisk` → `restore-…`).
    /// A disk named here keeps its DataVolume template under that name.
    pub claims: BTreeMap<String, String>,
    /// Disks whose DataVolume exists already, made from no template (a
    /// moved VM's boot disk, filled through CDI's upload proxy): the VM
    /// names it, and renders no DataVolume template for it.
    pub arrived: std::collections::BTreeSet<String>,
    /// The tenant's labels of the VM, as the tenant wrote them: they travel
    /// to the VM and its pod under the tenant's domain
    /// ([`crate::kube_metadata::tenant_key`]).
    pub tenant_labels: BTreeMap<String, String>,
    /// The tenant's annotations of the VM: they travel to the VM likewise.
    pub tenant_annotations: BTreeMap<String, String>,
}

/// Everything rendered for one VM.
#[derive(Debug, Clone, Serialize)]
pub struct RenderedVm {
    /// The KubeVirt VM.
    pub vm: VirtualMachine,
    /// The floating IP, when ports are exposed.
    pub service: Option<Service>,
    /// The instance type and preference the VM references (unless
    /// [`VmOptions::shapes`] is inline), to apply before it.
    pub shape_objects: Vec<Value>,
}
