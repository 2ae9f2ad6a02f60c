//! # vmaas-backend
//!
//! The seam between the reconciler and whatever runs the objects.
//!
//! A backend has one [`Driver`] per kind it runs, each level-triggered and
//! idempotent: [`Driver::ensure`] is called again and again with the whole
//! desired state of one object and makes one cheap step towards it,
//! reporting what it sees and when to look again ([`Requeue`]). Slow work
//! (booting, probing) happens in the backend's own tasks between calls, which
//! wake the reconciler for that one object ([`Wake`]). Drivers never read the
//! store: the reconciler resolves references before calling them.
//!
//! - [`driver`]: the per-kind driver trait, its target and requeue hint.
//! - [`vm`]: what a VM driver is given and reports.
//! - [`network`]: what a virtual network driver is given and reports.
//! - [`balancer`]: what a load balancer driver is given and reports.
//! - [`nat`]: what a NAT gateway driver is given and reports.
//! - [`console`]: serial consoles, and graphical ones (RFB), for backends that have them.
//! - [`error`]: failures, with a kind that tells the reconciler what to do.
//! - [`host`]: what is on the host without a stored object, and what the host can give.
//! - [`image`]: the images a backend can boot VMs from: its catalog, and
//!   images imported from a URL or uploaded.
//! - [`volume`]: what a volume driver is given and reports, and volumes on VMs.
//! - [`snapshot`]: what a snapshot driver is given and reports.
//! - [`export`]: disks taken away as self-contained qcow2 files.
//! - [`qcow2`]: a qcow2 image composed from a chain of disk files as it is read.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod balancer;
pub mod console;
pub mod driver;
pub mod error;
pub mod export;
pub mod host;
pub mod image;
pub mod nat;
pub mod network;
pub mod qcow2;
pub mod snapshot;
pub mod vm;
pub mod volume;

use std::sync::Arc;

pub use balancer::{BalancerDriver, BalancerObservation, BalancerProblem, BalancerSpec, BalancerTarget, Mapping};
pub use console::{Console, Consoles, Display, DisplayStream};
pub use driver::{Cleanup, Driver, Requeue, Target, Wake};
pub use error::{BackendError, ErrorKind};
pub use export::{Arrivals, ExportFile, ExportSource, ExportStream, Exports};
pub use host::{Demand, HostCapacity, Quarantined, Room, Usage, VmMemory};
pub use image::{CatalogImage, Credentials, ImageDriver, ImageFile, ImageImport, ImageObservation, ImageTarget, ImageUploads, Upload};
pub use nat::{NatDriver, NatObservation, NatSpec, NatTarget};
pub use network::{NetworkDriver, NetworkObservation, NetworkSpec, NetworkTarget, SubnetDriver, SubnetSpec, SubnetTarget};
pub use snapshot::{SnapshotDriver, SnapshotObservation, SnapshotSpec, SnapshotTarget, Taken};
pub use vm::{Attachment, CloneFrom, Firewall, Requests, VmDriver, VmObservation, VmSpec, VmTarget};
use vmaas_model::ObjectKind;
pub use volume::{DiskPresence, VolumeDisk, VolumeDriver, VolumeObservation, VolumePresence, VolumeSpec, VolumeTarget};

/// What a backend can do, for `/healthz` and for refusing what it cannot.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Capabilities {
    /// The kinds it runs.
    pub kinds: Vec<ObjectKind>,
    /// Whether a running VM can move to another host.
    pub live_migration: bool,
    /// Whether GPUs can be passed through.
    pub gpus: bool,
    /// Whether VMs have a serial console.
    pub console: bool,
    /// Whether a VM's disks go back to one of its snapshots in place.
    pub restores: bool,
    /// Whether a new VM can start as a copy of a VM or a snapshot.
    pub clones: bool,
    /// Whether a running VM can be paused and resumed.
    pub pause: bool,
    /// The network classes a virtual network may name, besides the
    /// default (empty): on kubevirt, the physical networks declared.
    pub network_classes: Vec<String>,
}

/// One cluster of several, as a placement names it (what it has for VMs
/// is the fleet's to weigh, when it places them).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ClusterInfo {
    /// Its name, as `spec.placement.cluster` and `status.cluster` give it.
    pub name: String,
    /// Its labels, matched by `spec.placement.labels`.
    pub labels: std::collections::BTreeMap<String, String>,
}

/// Why a VM on cluster `on` (its `status.cluster`) is moving, when it is:
/// `on` is one of `clusters`, and `placement` no longer admits it.
pub fn moving_from(clusters: &[ClusterInfo], on: Option<&str>, placement: Option<&vmaas_model::Placement>) -> Option<vmaas_model::Reason> {
    let (on, placement) = (on?, placement?);
    let here = clusters.iter().find(|c| c.name == on)?;
    (!placement.admits(&here.name, &here.labels)).then(|| {
        let to = placement.describe();
        vmaas_model::Reason::new("Moving", format!("moving off cluster {on}: its placement asks for {to}"))
    })
}

/// How often a backend whose objects can change unseen has every object
/// looked at again ([`Backend::resync`]).
pub const RESYNC: std::time::Duration = std::time::Duration::from_secs(10);

/// Runs objects: one driver per kind, plus what the backend as a whole offers.
pub trait Backend: Send + Sync + 'static {
    /// Short name, e.g. `qemu`.
    fn name(&self) -> &'static str;

    /// What it can do.
    fn capabilities(&self) -> Capabilities;

    /// What of `machine`'s virtual hardware it cannot express: each field
    /// as a template names it (`disk_storage_class`) and why. A VM asking
    /// for any of it is refused at the API, never built without it.
    fn unsupported(&self, _machine: &vmaas_model::MachineSpec) -> Vec<(String, String)> {
        Vec::new()
    }

    /// Gives the backend a way to wake the reconciler for one object when
    /// something changes (a guest becomes ready, a process exits).
    fn attach(&self, _wake: Wake) {}

    /// How often the reconciler looks at every object again, because what
    /// the backend runs can change without a wake-up; none: never (only
    /// changes, wake-ups and the drivers' own requeues bring an object
    /// back). By default every [`RESYNC`].
    fn resync(&self) -> Option<std::time::Duration> {
        Some(RESYNC)
    }

    /// How many objects the reconciler works on at once unless told
    /// (`--reconcile-workers`): what suits the work the backend waits on.
    fn workers(&self) -> usize {
        8
    }

    /// Details for `/healthz`, e.g. the accelerator in use.
    fn health(&self) -> serde_json::Value {
        serde_json::Value::Object(Default::default())
    }

    /// The driver of virtual machines.
    fn vms(&self) -> Arc<VmDriver>;

    /// The driver of virtual networks, if the backend runs them.
    fn networks(&self) -> Option<Arc<NetworkDriver>> {
        None
    }

    /// The driver of subnets, if the backend runs them.
    fn subnets(&self) -> Option<Arc<SubnetDriver>> {
        None
    }

    /// The driver of load balancers, if the backend runs them.
    fn load_balancers(&self) -> Option<Arc<BalancerDriver>> {
        None
    }

    /// The driver of NAT gateways, if the backend runs them.
    fn nat_gateways(&self) -> Option<Arc<NatDriver>> {
        None
    }

    /// The driver of imported images, if the backend imports them.
    fn image_imports(&self) -> Option<Arc<ImageDriver>> {
        None
    }

    /// Where uploaded images go, if the backend imports them.
    fn image_uploads(&self) -> Option<Arc<dyn ImageUploads>> {
        None
    }

    /// The driver of volumes, if the backend runs them.
    fn volumes(&self) -> Option<Arc<VolumeDriver>> {
        None
    }

    /// The driver of snapshots of VMs' disks, if the backend takes them.
    fn snapshots(&self) -> Option<Arc<SnapshotDriver>> {
        None
    }

    /// Exports of disks, if the backend makes them.
    fn exports(&self) -> Option<Arc<dyn Exports>> {
        None
    }

    /// Boot disks of VMs moved here from another cluster, if the backend takes them.
    fn arrivals(&self) -> Option<Arc<dyn Arrivals>> {
        None
    }

    /// Serial consoles, if VMs have them.
    fn consoles(&self) -> Option<Arc<dyn Consoles>> {
        None
    }

    /// Ids of the VMs this backend holds on its host, whether or not the
    /// store knows them (checked at start against an empty store).
    fn inventory(&self) -> Vec<String> {
        Vec::new()
    }

    /// Resources on the host that belong to no stored object, as of the
    /// last [`Driver::retain`].
    fn quarantine(&self) -> Vec<Quarantined> {
        Vec::new()
    }

    /// What the host can give VMs, if the backend runs them here.
    fn capacity(&self) -> Option<HostCapacity> {
        None
    }

    /// The addresses other processes of this host hold (sockets bound to
    /// them exactly), for external IP pools whose addresses are this
    /// host's: an external IP is never given one of them. None: the
    /// backend's addresses are not this host's (a cluster's load
    /// balancer's). Blocking (it reads `/proc`).
    fn held_addresses(&self) -> Option<std::collections::HashSet<std::net::Ipv4Addr>> {
        None
    }

    /// The images VMs can boot from (the administrator's catalog), if the
    /// backend keeps one; it may read files, so callers run it off the
    /// async runtime.
    fn images(&self) -> Option<Vec<CatalogImage>> {
        None
    }

    /// Whether [`Backend::images`] is the catalog as it stands: false while
    /// no cluster's image sources have been listed since the server
    /// started (an empty catalog then says nothing of what exists).
    fn images_known(&self) -> bool {
        self.listed()
    }

    /// What the cluster (or host) has for VMs, for placing them among
    /// several; none: not known. Cheap (from what is already watched).
    fn room(&self) -> Option<Room> {
        None
    }

    /// Whether the backend has made something for object `id` of `kind`
    /// (as last seen, without asking anyone): how a backend of several
    /// finds which one holds an object after a restart.
    fn holds(&self, _kind: ObjectKind, _id: &str) -> bool {
        false
    }

    /// Whether the cluster answers now (a backend that cannot tell says yes).
    fn reachable(&self) -> bool {
        true
    }

    /// Whether the backend can act at all now, for readiness: [`Backend::reachable`],
    /// or of several clusters, any one.
    fn serving(&self) -> bool {
        self.reachable()
    }

    /// Whether what the backend holds is known: false for a cluster not
    /// listed since the server started, which may hold any object
    /// ([`Backend::holds`] cannot tell), so nothing is taken to be gone from it.
    fn listed(&self) -> bool {
        true
    }

    /// The clusters VMs are placed among, when the backend drives several;
    /// empty: one (itself), and `spec.placement` means nothing.
    fn clusters(&self) -> Vec<ClusterInfo> {
        Vec::new()
    }

    /// What each VM running on this host costs it in memory; blocking (it
    /// reads `/proc`), so callers run it off the async runtime.
    fn memory(&self) -> Vec<VmMemory> {
        Vec::new()
    }
}
