//! What a VM driver is given and what it reports.

use vmaas_model::{MachineSpec, Observation, PowerState};

use crate::driver::{Driver, Target};

/// Requests that are acted on once each, by generation: a request whose
/// generation is above the one the driver has acted on is pending.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Requests {
    /// Restart generation: each restart request raises it by one.
    #[serde(default)]
    pub restart: u64,
    /// Migration generation: each live-migration request raises it by one.
    #[serde(default)]
    pub migrate: u64,
    /// Restore generation: each restore from a snapshot raises it by one.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub restore: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The desired state of one VM.
#[derive(Debug, Clone, PartialEq)]
pub struct VmSpec {
    /// Run or stay off.
    pub power: PowerState,
    /// The machine to build.
    pub machine: MachineSpec,
    /// One-off requests, by generation.
    pub requests: Requests,
    /// The node the last migration request named, if any.
    pub migrate_to: Option<String>,
    /// The snapshot (its id) the last restore request named, if any: when
    /// `requests.restore` is above what the driver acted on, the VM is
    /// stopped, its disks return to the snapshot's, and it runs again if
    /// `power` says so.
    pub restore_from: Option<String>,
    /// What its disks are copied from at its first start, if it is a clone.
    pub clone_from: Option<CloneFrom>,
    /// NICs on subnets, in order.
    pub attachments: Vec<Attachment>,
    /// External IPs attached to it: its exposed ports answer on each.
    pub external_ips: Vec<std::net::Ipv4Addr>,
    /// TCP ports load balancers reach on it (besides its exposed ports).
    pub balanced_ports: Vec<u16>,
    /// Volumes on it, in the order they were attached.
    pub volumes: Vec<crate::volume::VolumeDisk>,
    /// The imported image (its id) its root disk is made from, when the
    /// machine's image names one rather than one of the catalog's.
    pub imported_image: Option<String>,
    /// Where it may run (a backend driving several clusters places it once).
    pub placement: vmaas_model::Placement,
    /// The cluster it was placed on, as its status names it.
    pub cluster: Option<String>,
    /// The tenant's labels of the VM (a backend with Kubernetes objects
    /// carries them under the tenant's domain).
    pub labels: std::collections::BTreeMap<String, String>,
    /// The tenant's annotations of the VM, likewise.
    pub annotations: std::collections::BTreeMap<String, String>,
}

/// What a clone's disks are copied from, by id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloneFrom {
    /// A snapshot: its disks as taken.
    Snapshot(String),
    /// A VM (running or stopped): its disks as they are then.
    Vm(String),
}

/// One VM as a driver sees it.
pub type VmTarget = Target<VmSpec>;

/// What a VM driver reports.
#[derive(Debug, Clone, PartialEq)]
pub struct VmObservation {
    /// Where the VM is.
    pub observation: Observation,
    /// The request generations acted on so far.
    pub acted: Requests,
    /// Where each volume it has (or had, or was asked to have) is.
    pub volumes: crate::volume::VolumePresence,
}

/// The driver of virtual machines.
pub type VmDriver = dyn Driver<VmSpec, VmObservation>;

/// One NIC of a VM on a subnet, resolved by the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// The subnet's id.
    pub subnet: String,
    /// The id of the subnet's virtual network.
    pub network: String,
    /// The NIC's address (the server's IPAM, kept for the VM's life).
    pub ip: std::net::Ipv4Addr,
    /// The NIC's MAC, stable for the VM's life (`52:54:…`).
    pub mac: String,
    /// The rules of its security groups, merged; none: everything passes.
    pub firewall: Option<Firewall>,
}

/// What a NIC's security groups allow, merged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Firewall {
    /// What may come in.
    pub ingress: Vec<vmaas_model::security_group::CheckedRule>,
    /// What may go out.
    pub egress: Vec<vmaas_model::security_group::CheckedRule>,
}

impl Attachment {
    /// The MAC of NIC `index` of VM `vm`: locally administered, the same
    /// for the VM's whole life and on every server.
    pub fn mac_for(vm: &str, index: usize) -> String {
        let seed = format!("{vm}/{index}");
        let h = seed.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
        let b = h.to_be_bytes();
        format!("52:54:{:02x}:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2], b[3])
    }
}
