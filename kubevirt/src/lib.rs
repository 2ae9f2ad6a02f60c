//! # vmaas-kubevirt
//!
//! The `kubevirt` backend: the vmaas model run on a Kubernetes cluster.
//! Each tenant's objects live in a namespace of their own; each VM is a
//! KubeVirt `VirtualMachine` rendered by `vmaas_model::k8s` (the rendering
//! the Crossplane function uses too), applied server-side as field manager
//! `vmaas`; status comes from watches of what KubeVirt, CDI and the
//! cluster's load balancer report, through the model's `derive_status`.
//! The backend never connects to a VM's addresses: they are data.
//!
//! - `config`: how the backend reaches its cluster ([`KubevirtConfig`]);
//!   `shared`: what every driver takes (the client, the watches, what was applied);
//!   `fingerprint`: what is kept of the last VM applied, to skip the same again.
//! - [`names`]: namespaces, labels, the finalizer.
//! - [`cluster`]: the client and its verbs (apply, delete, release);
//!   [`conflict`]: the fields other managers hold, left to them and reported.
//! - [`watch`]: one reflector per kind (without `managedFields`), waking the reconciler;
//!   [`health`]: whether the cluster answers (its VMs DEGRADED while not),
//!   kept by `monitor`'s loops.
//! - [`room`]: what its nodes have for VMs, for placing them among clusters.
//! - [`console`]: serial consoles through virt-api's `console` subresource;
//!   `display`: graphical consoles through its `vnc` subresource; both
//!   open their WebSocket in `subresource`.
//! - [`vm`]: the VM driver.
//! - [`image`]: the catalog of DataSources.
//! - [`import`]: images imported from a URL by CDI into the images namespace;
//!   [`upload`]: images uploaded through CDI's upload proxy.
//! - [`migration`]: live migrations as VirtualMachineInstanceMigrations;
//!   `pause`: pausing and resuming through virt-api's `pause` and `unpause`.
//! - [`nat`]: NAT gateways as OVN-K EgressIPs (subnets as secondary networks).
//! - [`subnet`]: subnets as namespaces with a primary layer-2 UDN, or as
//!   secondary layer-2 CUDNs over their tenant's namespace ([`SubnetMode`]).
//! - [`balancer`]: load balancers as selectorless Services and EndpointSlices;
//!   [`allocation`]: why MetalLB has not given a Service its address.
//! - [`volume`]: volumes as DataVolumes, hotplugged into VMs.
//! - [`snapshot`]: snapshots as VirtualMachineSnapshots.
//! - [`restore`]: restores in place as VirtualMachineRestores.
//! - [`clone`]: clones as VirtualMachineClones, their VMs taken over.
//! - [`export`]: disks taken away through VirtualMachineExports and the export proxy;
//!   [`arrive`]: the boot disks of VMs moved here from another cluster, through CDI's upload proxy.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod allocation;
pub mod arrive;
pub mod balancer;
pub mod clone;
pub mod cluster;
mod config;
pub mod conflict;
pub mod console;
mod display;
pub mod export;
mod fingerprint;
pub mod health;
pub mod homes;
pub mod image;
pub mod import;
mod index;
pub mod migration;
mod monitor;
pub mod names;
pub mod nat;
mod pause;
pub mod proxy;
pub mod restore;
pub mod room;
pub mod secondary;
mod shared;
pub mod snapshot;
pub mod subnet;
mod subresource;
mod turns;
pub mod upload;
pub mod vm;
pub mod volume;
pub mod watch;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tracing::warn;
use vmaas_backend::{
    Backend, BackendError, BalancerDriver, Capabilities, CatalogImage, ImageDriver, NetworkDriver, SubnetDriver, VmDriver, VolumeDriver,
    Wake,
};
use vmaas_model::ObjectKind;
pub use vmaas_model::k8s::render::FloatingIp;

use crate::cluster::Cluster;
pub use crate::config::{KubevirtConfig, PhysicalNetwork, SubnetMode};
use crate::shared::Shared;
use crate::watch::{Waker, Watched};

/// The backend.
pub struct KubevirtBackend {
    shared: Arc<Shared>,
    uploads: Option<Arc<upload::Uploads>>,
    exports: Option<Arc<export::Exports>>,
    arrivals: Option<Arc<arrive::Arrivals>>,
    /// The open console connections.
    consoles: Arc<console::Sessions>,
}

/// How often every object is looked at again, besides what the watches wake.
pub const RESYNC: Duration = Duration::from_secs(300);

/// Objects the reconciler works on at once by default on this backend
/// (`vmaas-bench kubevirt`: 8 in flight applied about half what a bare
/// client's 16 did, each waiting on the API server).
pub const WORKERS: usize = 32;

impl KubevirtBackend {
    /// Connects, starts the watches and waits for their first lists (so
    /// that what the cluster already holds is known before anything is
    /// reconciled: objects of a previous run are adopted, not made twice).
    /// A cluster that does not answer is listed in the background: until
    /// then it is unreachable (its VMs DEGRADED, nothing made on it).
    pub async fn new(cfg: KubevirtConfig) -> Result<Self, BackendError> {
        let cluster = Cluster::connect(cfg.kubeconfig.as_deref()).await?;
        let waker: Waker = Arc::default();
        let selector = names::selector();
        let r = cluster.res.clone();
        let watch = |ar, ns: &str, sel: Option<&str>| Watched::start(&cluster, ar, ns, sel, waker.clone());
        let shared = Shared {
            vms: Watched::tallying(&cluster, &r.vm, "", Some(&selector), waker.clone(), Some(room::held_by)),
            vmis: watch(&r.vmi, "", Some(&selector)),
            services: watch(&r.service, "", Some(&selector)),
            migrations: watch(&r.migration, "", Some(&selector)),
            udns: match cfg.subnets {
                SubnetMode::PrimaryUdn => watch(&r.udn, "", Some(&selector)),
                SubnetMode::Secondary => watch(&r.cudn, "", Some(&selector)),
            },
            multi_policies: (cfg.subnets == SubnetMode::Secondary).then(|| watch(&r.multi_policy, "", Some(&selector))),
            egress_ips: (cfg.subnets == SubnetMode::Secondary).then(|| watch(&r.egress_ip, "", Some(&selector))),
            data_volumes: watch(&r.data_volume, "", Some(&selector)),
            snapshots: watch(&r.vm_snapshot, "", Some(&selector)),
            restores: watch(&r.vm_restore, "", Some(&selector)),
            policies: watch(&r.network_policy, "", Some(&selector)),
            data_sources: watch(&r.data_source, &cfg.images_namespace, None),
            nodes: watch(&r.node, "", None),
            cluster: cluster.clone(),
            cfg,
            waker: waker.clone(),
            applied: Mutex::default(),
            applied_text: Mutex::default(),
            refused: Mutex::default(),
            conflicts: Mutex::default(),
            namespaces: Mutex::default(),
            making: Default::default(),
            homes: homes::Homes::default(),
            health: health::Health::default(),
        };
        let shared = Arc::new(shared);
        if shared.answers().await {
            shared.first_lists(crate::shared::FIRST_LIST).await?;
            shared.health.mark_listed();
        } else {
            warn!("the cluster does not answer: starting without it; its VMs are DEGRADED (ClusterUnreachable) until it is listed");
            tokio::spawn(monitor::list(Arc::downgrade(&shared)));
        }
        tokio::spawn(monitor::watch(Arc::downgrade(&shared)));
        let uploads = match shared.cfg.upload_proxy.clone() {
            Some(proxy) => Some(Arc::new(upload::Uploads::new(shared.clone(), proxy)?)),
            None => None,
        };
        let arrivals = uploads.clone().map(|u| Arc::new(arrive::Arrivals::new(shared.clone(), u)));
        let exports = match shared.cfg.export_proxy.clone() {
            Some(proxy) => Some(Arc::new(export::Exports::new(shared.clone(), proxy, shared.cfg.scratch_dir.clone())?)),
            None => None,
        };
        Ok(Self { shared, uploads, exports, arrivals, consoles: Arc::default() })
    }
}

impl Backend for KubevirtBackend {
    fn name(&self) -> &'static str {
        "kubevirt"
    }

    fn capabilities(&self) -> Capabilities {
        let kinds = vec![
            ObjectKind::VirtualMachine,
            ObjectKind::VirtualNetwork,
            ObjectKind::Subnet,
            ObjectKind::SecurityGroup,
            ObjectKind::LoadBalancer,
            ObjectKind::Volume,
            ObjectKind::VolumeAttachment,
            ObjectKind::Image,
            ObjectKind::ComputeInstanceSnapshot,
        ];
        let mut kinds = kinds;
        if self.shared.egress_ips.is_some() {
            kinds.push(ObjectKind::NatGateway);
        }
        let network_classes = self.shared.cfg.physical_networks.keys().cloned().collect();
        Capabilities { kinds, live_migration: true, gpus: true, console: true, restores: true, clones: true, pause: true, network_classes }
    }

    /// Watches wake every object whose cluster objects change, and the
    /// health check every VM when the cluster goes or comes back; what a
    /// watch cannot report (an object deleted while the watch was away and
    /// listed again) is caught by a look at everything every [`RESYNC`].
    fn resync(&self) -> Option<Duration> {
        Some(RESYNC)
    }

    /// A reconcile waits on round trips to the clusters' API servers,
    /// which answer many at once: as many in flight as a busy client keeps.
    fn workers(&self) -> usize {
        WORKERS
    }

    fn attach(&self, wake: Wake) {
        let _ = self.shared.waker.set(wake);
    }

    fn health(&self) -> serde_json::Value {
        let c = &self.shared.cfg;
        json!({
            "namespace_prefix": c.namespace_prefix,
            "images_namespace": c.images_namespace,
            "watched": {"virtual_machines": self.shared.vms.all().len(), "data_sources": self.shared.data_sources.all().len()},
        })
    }

    fn vms(&self) -> Arc<VmDriver> {
        Arc::new(vm::Vms(self.shared.clone()))
    }

    fn networks(&self) -> Option<Arc<NetworkDriver>> {
        Some(Arc::new(subnet::Networks))
    }

    fn subnets(&self) -> Option<Arc<SubnetDriver>> {
        Some(Arc::new(subnet::Subnets(self.shared.clone())))
    }

    fn nat_gateways(&self) -> Option<Arc<vmaas_backend::NatDriver>> {
        Some(Arc::new(nat::Nats(self.shared.clone())))
    }

    fn load_balancers(&self) -> Option<Arc<BalancerDriver>> {
        Some(balancer::driver(self.shared.clone()))
    }

    fn volumes(&self) -> Option<Arc<VolumeDriver>> {
        Some(Arc::new(volume::Volumes(self.shared.clone())))
    }

    fn snapshots(&self) -> Option<Arc<vmaas_backend::SnapshotDriver>> {
        Some(Arc::new(snapshot::Snapshots(self.shared.clone())))
    }

    fn consoles(&self) -> Option<Arc<dyn vmaas_backend::Consoles>> {
        Some(Arc::new(console::Consoles(self.shared.clone(), self.consoles.clone())))
    }

    fn exports(&self) -> Option<Arc<dyn vmaas_backend::Exports>> {
        self.exports.clone().map(|e| e as Arc<dyn vmaas_backend::Exports>)
    }

    fn image_uploads(&self) -> Option<Arc<dyn vmaas_backend::ImageUploads>> {
        self.uploads.clone().map(|u| u as Arc<dyn vmaas_backend::ImageUploads>)
    }

    fn arrivals(&self) -> Option<Arc<dyn vmaas_backend::Arrivals>> {
        self.arrivals.clone().map(|a| a as Arc<dyn vmaas_backend::Arrivals>)
    }

    fn image_imports(&self) -> Option<Arc<ImageDriver>> {
        Some(Arc::new(import::Imports(self.shared.clone())))
    }

    fn inventory(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.shared.vms.all().iter().filter_map(|o| watch::owner_of(o).map(|(_, id)| id.to_owned())).collect();
        ids.sort();
        ids.dedup();
        ids
    }

    fn room(&self) -> Option<vmaas_backend::Room> {
        room::room(&self.shared.nodes.all(), &self.shared.vms.held())
    }

    fn holds(&self, kind: ObjectKind, id: &str) -> bool {
        let s = &self.shared;
        let watched = match kind {
            ObjectKind::VirtualMachine => &s.vms,
            ObjectKind::Subnet => &s.udns,
            ObjectKind::Volume => &s.data_volumes,
            ObjectKind::LoadBalancer => &s.services,
            ObjectKind::ComputeInstanceSnapshot => &s.snapshots,
            _ => return false,
        };
        !watched.of(id).is_empty()
    }

    fn reachable(&self) -> bool {
        self.shared.health.unreachable().is_none()
    }

    fn listed(&self) -> bool {
        self.shared.health.listed()
    }

    fn images(&self) -> Option<Vec<CatalogImage>> {
        Some(image::catalog(&self.shared.data_sources.all(), &self.shared.cfg.default_image))
    }
}
