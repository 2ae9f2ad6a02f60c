//! # vmaas-fleet
//!
//! Several backends behind one: each a cluster (a KubeVirt cluster, or this
//! host's qemu backend) with a name and labels. A VM is placed once, on the
//! cluster its `spec.placement` admits with the most room for it (CPU,
//! memory, GPUs), and stays there: its status names the cluster, and every
//! later call for it goes there, until a new placement no longer admits
//! that cluster while it is stopped: then it moves. What a VM needs follows it: its subnets
//! are made on the clusters its VMs run on, a volume on the cluster of the
//! first VM it is attached to, a load balancer on every cluster running one
//! of its targets. Images are imported (or uploaded) on every cluster, so any VM can boot
//! them wherever it lands. A cluster that stops answering keeps its VMs
//! (DEGRADED, as its own backend reports them); nothing is moved for that, or made twice.
//!
//! - [`place`]: choosing a cluster.
//! - [`vm`]: VMs, routed to their cluster; their consoles.
//! - [`subnet`]: subnets made where their VMs run.
//! - [`follow`]: volumes and load balancers made where their VMs run.
//! - [`fanout`]: networks and images, on every cluster;
//!   [`upload`]: uploaded images, sent to every cluster.
//! - [`export`]: exports, made by the cluster that holds the disk;
//!   `moving`: a stopped VM moved to another cluster when its placement changes.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod export;
pub mod fanout;
pub mod follow;
mod made;
mod moving;
pub mod place;
pub mod subnet;
pub mod upload;
pub mod vm;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::json;
use vmaas_backend::{
    Backend, BalancerDriver, Capabilities, CatalogImage, ClusterInfo, ImageDriver, NetworkDriver, SubnetDriver, VmDriver, VolumeDriver,
    Wake,
};
use vmaas_model::ObjectKind;

/// One cluster of the fleet.
pub struct Member {
    /// Its name (`status.cluster`, `spec.placement.cluster`).
    pub name: String,
    /// Its labels (`spec.placement.labels`).
    pub labels: BTreeMap<String, String>,
    /// What runs its objects.
    pub backend: Arc<dyn Backend>,
}

/// Why a fleet cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// No cluster given.
    #[error("a fleet needs at least one cluster")]
    Empty,
    /// A name given twice, or not a name.
    #[error("cluster {name:?}: {reason}")]
    BadName {
        /// The name.
        name: String,
        /// Why.
        reason: String,
    },
}

/// What the fleet's drivers share.
pub(crate) struct Inner {
    members: Vec<Member>,
    vms: Vec<Arc<VmDriver>>,
    /// Each cluster's exports, if it makes them.
    exports: Vec<Option<Arc<dyn vmaas_backend::Exports>>>,
    /// Each cluster's arrivals, if it takes moved VMs' disks.
    arrivals: Vec<Option<Arc<dyn vmaas_backend::Arrivals>>>,
    /// The VMs whose move was reported and is to be made, by id.
    moving: Mutex<HashMap<String, moving::Tries>>,
    /// The cluster of each VM placed (or found), by VM id.
    homes: Mutex<HashMap<String, usize>>,
    /// Placements made in the last moments, counted against their
    /// cluster's room until its own view has them.
    recent: Mutex<Vec<vm::Recent>>,
    /// What each VM asks, and of which cluster, by VM id (the room of a
    /// cluster that does not count its VMs itself: this host).
    demands: Mutex<HashMap<String, (usize, vmaas_backend::Demand)>>,
    subnets: subnet::Spread,
    wake: OnceLock<Wake>,
}

impl Inner {
    /// The index of cluster `name`.
    fn index(&self, name: &str) -> Option<usize> {
        self.members.iter().position(|m| m.name == name)
    }

    /// The cluster VM `id` is on, if known.
    fn home(&self, id: &str) -> Option<usize> {
        self.homes.lock().ok().and_then(|h| h.get(id).copied())
    }

    /// The clusters that hold object `id` of `kind`, as their caches say.
    fn holders<'a>(&'a self, kind: ObjectKind, id: &'a str) -> impl Iterator<Item = usize> + 'a {
        (0..self.members.len()).filter(move |&i| self.members[i].backend.holds(kind, id))
    }

    /// Wakes object `id` of `kind`.
    fn wake(&self, kind: ObjectKind, id: &str) {
        if let Some(w) = self.wake.get() {
            w.wake(kind, id);
        }
    }
}

/// The backend of several clusters.
pub struct Fleet {
    inner: Arc<Inner>,
    /// Where uploads are kept while they are sent to each cluster; none:
    /// uploads are refused.
    spool: Option<std::path::PathBuf>,
}

impl Fleet {
    /// A fleet of `members`, finding which of them holds each VM already
    /// (so that a restart places nothing twice).
    pub fn new(members: Vec<Member>) -> Result<Self, FleetError> {
        if members.is_empty() {
            return Err(FleetError::Empty);
        }
        for (i, m) in members.iter().enumerate() {
            vmaas_model::vm::placement::check_cluster_name(&m.name)
                .map_err(|reason| FleetError::BadName { name: m.name.clone(), reason: reason.to_string() })?;
            if members[..i].iter().any(|o| o.name == m.name) {
                return Err(FleetError::BadName { name: m.name.clone(), reason: "given twice".into() });
            }
        }
        let mut homes = HashMap::new();
        for (i, m) in members.iter().enumerate() {
            for id in m.backend.inventory() {
                homes.entry(id).or_insert(i);
            }
        }
        let vms = members.iter().map(|m| m.backend.vms()).collect();
        let exports = members.iter().map(|m| m.backend.exports()).collect();
        let arrivals = members.iter().map(|m| m.backend.arrivals()).collect();
        let inner = Arc::new(Inner {
            members,
            vms,
            exports,
            arrivals,
            moving: Mutex::default(),
            homes: Mutex::new(homes),
            recent: Mutex::default(),
            demands: Mutex::default(),
            subnets: subnet::Spread::default(),
            wake: OnceLock::new(),
        });
        Ok(Self { inner, spool: None })
    }

    /// Takes uploaded images (when every cluster does), keeping each under
    /// `dir` while it is sent to every cluster.
    pub fn with_upload_spool(mut self, dir: std::path::PathBuf) -> Self {
        self.spool = Some(dir);
        self
    }

    fn every<T>(&self, f: impl Fn(&dyn Backend) -> Option<T>) -> Option<Vec<T>> {
        self.inner.members.iter().map(|m| f(m.backend.as_ref())).collect()
    }
}

impl Backend for Fleet {
    fn name(&self) -> &'static str {
        "fleet"
    }

    /// What every cluster can do.
    fn capabilities(&self) -> Capabilities {
        let all: Vec<Capabilities> = self.inner.members.iter().map(|m| m.backend.capabilities()).collect();
        let mut kinds = all[0].kinds.clone();
        kinds.retain(|k| all.iter().all(|c| c.kinds.contains(k)));
        Capabilities {
            kinds,
            live_migration: all.iter().all(|c| c.live_migration),
            gpus: all.iter().any(|c| c.gpus),
            console: all.iter().all(|c| c.console),
            restores: all.iter().all(|c| c.restores),
            clones: all.iter().all(|c| c.clones),
            pause: all.iter().all(|c| c.pause),
            network_classes: all[0].network_classes.iter().filter(|n| all.iter().all(|c| c.network_classes.contains(n))).cloned().collect(),
        }
    }

    fn attach(&self, wake: Wake) {
        for m in &self.inner.members {
            m.backend.attach(wake.clone());
        }
        let _ = self.inner.wake.set(wake);
    }

    /// The most frequent of its clusters'.
    fn resync(&self) -> Option<std::time::Duration> {
        self.inner.members.iter().filter_map(|m| m.backend.resync()).min()
    }

    /// Each cluster's API server answers its own: the members' workers together.
    fn workers(&self) -> usize {
        self.inner.members.iter().map(|m| m.backend.workers()).sum::<usize>().max(1)
    }

    fn health(&self) -> serde_json::Value {
        let clusters: serde_json::Map<String, serde_json::Value> = self
            .inner
            .members
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let b = &m.backend;
                let about =
                    json!({"backend": b.name(), "labels": m.labels, "reachable": b.reachable(), "room": self.inner.room_of(i), "details": b.health()});
                (m.name.clone(), about)
            })
            .collect();
        json!({ "clusters": clusters })
    }

    fn clusters(&self) -> Vec<ClusterInfo> {
        self.inner.members.iter().map(|m| ClusterInfo { name: m.name.clone(), labels: m.labels.clone() }).collect()
    }

    fn vms(&self) -> Arc<VmDriver> {
        Arc::new(vm::Vms(self.inner.clone()))
    }

    fn networks(&self) -> Option<Arc<NetworkDriver>> {
        let names = self.inner.members.iter().map(|m| m.name.clone()).collect();
        self.every(|b| b.networks()).map(|d| Arc::new(fanout::Networks::networks(names, d)) as Arc<NetworkDriver>)
    }

    fn subnets(&self) -> Option<Arc<SubnetDriver>> {
        self.every(|b| b.subnets()).map(|d| Arc::new(subnet::Subnets::new(self.inner.clone(), d)) as Arc<SubnetDriver>)
    }

    fn load_balancers(&self) -> Option<Arc<BalancerDriver>> {
        self.every(|b| b.load_balancers()).map(|d| Arc::new(follow::Balancers::new(self.inner.clone(), d)) as Arc<BalancerDriver>)
    }

    fn volumes(&self) -> Option<Arc<VolumeDriver>> {
        self.every(|b| b.volumes()).map(|d| Arc::new(follow::Volumes::new(self.inner.clone(), d)) as Arc<VolumeDriver>)
    }

    fn snapshots(&self) -> Option<Arc<vmaas_backend::SnapshotDriver>> {
        self.every(|b| b.snapshots()).map(|d| Arc::new(follow::Snapshots::new(self.inner.clone(), d)) as Arc<vmaas_backend::SnapshotDriver>)
    }

    fn image_imports(&self) -> Option<Arc<ImageDriver>> {
        let names = self.inner.members.iter().map(|m| m.name.clone()).collect();
        self.every(|b| b.image_imports()).map(|d| Arc::new(fanout::Images::images(names, d)) as Arc<ImageDriver>)
    }

    fn image_uploads(&self) -> Option<Arc<dyn vmaas_backend::ImageUploads>> {
        let spool = self.spool.clone()?;
        let names = self.inner.members.iter().map(|m| m.name.clone()).collect();
        let each = self.every(|b| b.image_uploads())?;
        Some(Arc::new(upload::Uploads::new(names, each, spool)))
    }

    fn exports(&self) -> Option<Arc<dyn vmaas_backend::Exports>> {
        self.inner
            .exports
            .iter()
            .any(Option::is_some)
            .then(|| Arc::new(export::Exports(self.inner.clone())) as Arc<dyn vmaas_backend::Exports>)
    }

    fn consoles(&self) -> Option<Arc<dyn vmaas_backend::Consoles>> {
        let each: Vec<_> = self.inner.members.iter().map(|m| m.backend.consoles()).collect();
        Some(Arc::new(vm::Consoles(self.inner.clone(), each)))
    }

    fn inventory(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.inner.members.iter().flat_map(|m| m.backend.inventory()).collect();
        ids.sort();
        ids.dedup();
        ids
    }

    fn quarantine(&self) -> Vec<vmaas_backend::Quarantined> {
        self.inner.members.iter().flat_map(|m| m.backend.quarantine()).collect()
    }

    fn holds(&self, kind: ObjectKind, id: &str) -> bool {
        self.inner.holders(kind, id).next().is_some()
    }

    fn reachable(&self) -> bool {
        self.inner.members.iter().all(|m| m.backend.reachable())
    }

    /// One cluster answering is enough to place VMs on.
    fn serving(&self) -> bool {
        self.inner.members.iter().any(|m| m.backend.reachable())
    }

    /// The images of the clusters listed since start; one some listed
    /// cluster lacks is listed with the problem (a VM placed there could
    /// not boot it). A cluster not listed yet says nothing either way.
    fn images(&self) -> Option<Vec<CatalogImage>> {
        let each = self.every(|b| b.images())?;
        let listed: Vec<usize> = (0..each.len()).filter(|&i| self.inner.members[i].backend.listed()).collect();
        let mut out: Vec<CatalogImage> = Vec::new();
        for img in listed.iter().flat_map(|&i| &each[i]) {
            if !out.iter().any(|o| o.name == img.name) {
                out.push(img.clone());
            }
        }
        for img in &mut out {
            let lacking: Vec<&str> = listed
                .iter()
                .filter(|&&i| !each[i].iter().any(|o| o.name == img.name && o.problem.is_none()))
                .map(|&i| self.inner.members[i].name.as_str())
                .collect();
            if !lacking.is_empty() && img.problem.is_none() {
                img.problem = Some(format!("not on cluster(s) {}", lacking.join(", ")));
            }
        }
        Some(out)
    }

    /// Known once some cluster is listed: the catalog is the listed ones'.
    fn images_known(&self) -> bool {
        self.inner.members.iter().any(|m| m.backend.images_known())
    }

    /// The addresses held on this host, if one of the clusters is this host.
    fn held_addresses(&self) -> Option<std::collections::HashSet<std::net::Ipv4Addr>> {
        self.inner.members.iter().find_map(|m| m.backend.held_addresses())
    }

    fn memory(&self) -> Vec<vmaas_backend::VmMemory> {
        self.inner.members.iter().flat_map(|m| m.backend.memory()).collect()
    }
}
