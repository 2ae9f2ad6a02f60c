//! What follows its VMs: a volume is made on the cluster of the first VM
//! it is attached to and stays there (attaching it to a VM on another
//! cluster fails, naming both); a load balancer is made on every cluster
//! that runs one of its targets, each with the targets it runs, and
//! removed from a cluster that runs none of them any more; a snapshot is
//! taken on the cluster of its VM and stays there.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use vmaas_backend::{
    BackendError, BalancerDriver, BalancerObservation, BalancerProblem, BalancerSpec, BalancerTarget, Cleanup, Driver, Requeue,
    SnapshotDriver, SnapshotObservation, SnapshotSpec, SnapshotTarget, VolumeDriver, VolumeObservation, VolumeSpec, VolumeTarget,
};
use vmaas_model::ObjectKind;

use crate::Inner;
use crate::fanout::{delete_on, worst_requeue};
use crate::made::MadeOn;

/// How soon an object whose VMs are not placed yet is looked at again.
const UNPLACED: Duration = Duration::from_secs(5);

/// Volumes, each on one cluster.
pub struct Volumes {
    inner: Arc<Inner>,
    drivers: Vec<Arc<VolumeDriver>>,
    homes: MadeOn,
}

impl Volumes {
    pub(crate) fn new(inner: Arc<Inner>, drivers: Vec<Arc<VolumeDriver>>) -> Self {
        Self { inner, drivers, homes: MadeOn::new(ObjectKind::Volume) }
    }

    /// The cluster volume `id` is on, as known or found.
    fn known(&self, id: &str) -> Option<usize> {
        self.homes.of(&self.inner, id).into_iter().next()
    }
}

#[async_trait]
impl Driver<VolumeSpec, VolumeObservation> for Volumes {
    async fn ensure(&self, t: &VolumeTarget) -> Result<(VolumeObservation, Requeue), BackendError> {
        let vm_home = t.spec.attached_to.as_deref().and_then(|vm| self.inner.home(vm));
        let m = match (self.known(&t.id), vm_home) {
            (Some(k), Some(v)) if k != v => {
                let (k, v) = (&self.inner.members[k].name, &self.inner.members[v].name);
                let why = format!("the volume is on cluster {k} and its VM runs on cluster {v}: a volume does not move between clusters");
                return Ok((VolumeObservation::Failed(why), Requeue::AwaitChange));
            }
            (Some(m), _) | (None, Some(m)) => m,
            (None, None) => {
                let why = "made on the cluster of the first VM it is attached to, once that VM is placed".to_owned();
                return Ok((VolumeObservation::Pending(why), Requeue::after(UNPLACED)));
            }
        };
        self.homes.mark(&t.id, m);
        self.drivers[m].ensure(t).await
    }

    async fn delete(&self, id: &str) -> Result<Cleanup, BackendError> {
        self.homes.delete(&self.inner, &self.drivers, id).await
    }

    async fn retain(&self, known: &[String]) -> Result<(), BackendError> {
        crate::fanout::retain_all(&self.drivers, known).await
    }
}

/// Snapshots, each on the cluster of its VM.
pub struct Snapshots {
    inner: Arc<Inner>,
    drivers: Vec<Arc<SnapshotDriver>>,
    homes: MadeOn,
}

impl Snapshots {
    pub(crate) fn new(inner: Arc<Inner>, drivers: Vec<Arc<SnapshotDriver>>) -> Self {
        Self { inner, drivers, homes: MadeOn::new(ObjectKind::ComputeInstanceSnapshot) }
    }
}

#[async_trait]
impl Driver<SnapshotSpec, SnapshotObservation> for Snapshots {
    async fn ensure(&self, t: &SnapshotTarget) -> Result<(SnapshotObservation, Requeue), BackendError> {
        let known = self.homes.of(&self.inner, &t.id).into_iter().next();
        let Some(m) = known.or_else(|| self.inner.home(&t.spec.vm)) else {
            let why = "taken on the cluster of its VM, once that VM is placed".to_owned();
            return Ok((SnapshotObservation::Pending(why), Requeue::after(UNPLACED)));
        };
        self.homes.mark(&t.id, m);
        self.drivers[m].ensure(t).await
    }

    async fn delete(&self, id: &str) -> Result<Cleanup, BackendError> {
        self.homes.delete(&self.inner, &self.drivers, id).await
    }

    async fn retain(&self, known: &[String]) -> Result<(), BackendError> {
        crate::fanout::retain_all(&self.drivers, known).await
    }
}

/// Load balancers, on the clusters of their targets.
pub struct Balancers {
    inner: Arc<Inner>,
    drivers: Vec<Arc<BalancerDriver>>,
    on: MadeOn,
}

impl Balancers {
    pub(crate) fn new(inner: Arc<Inner>, drivers: Vec<Arc<BalancerDriver>>) -> Self {
        Self { inner, drivers, on: MadeOn::new(ObjectKind::LoadBalancer) }
    }
}

#[async_trait]
impl Driver<BalancerSpec, BalancerObservation> for Balancers {
    async fn ensure(&self, t: &BalancerTarget) -> Result<(BalancerObservation, Requeue), BackendError> {
        let mut by_cluster: BTreeMap<usize, Vec<String>> = BTreeMap::new();
        for vm in &t.spec.targets {
            if let Some(m) = self.inner.home(vm) {
                by_cluster.entry(m).or_default().push(vm.clone());
            }
        }
        let left = self.on.of(&self.inner, &t.id).into_iter().filter(|m| !by_cluster.contains_key(m));
        delete_on(&self.drivers, left, &t.id).await?;
        self.on.set(&t.id, by_cluster.keys().copied().collect());
        if by_cluster.is_empty() {
            let problem = BalancerProblem::Pending("none of its targets is placed on a cluster yet".into());
            return Ok((BalancerObservation { problem: Some(problem), healthy: Vec::new() }, Requeue::after(UNPLACED)));
        }
        let mut healthy = BTreeSet::new();
        let mut problem = None;
        let mut nexts = Vec::new();
        for (m, targets) in by_cluster {
            let part = BalancerTarget { spec: BalancerSpec { targets, ..t.spec.clone() }, ..t.clone() };
            let (seen, next) = self.drivers[m].ensure(&part).await?;
            healthy.extend(seen.healthy);
            problem = problem.or(seen.problem.map(|p| named(&self.inner.members[m].name, p)));
            nexts.push(next);
        }
        let healthy = t.spec.targets.iter().filter(|vm| healthy.contains(*vm)).cloned().collect();
        Ok((BalancerObservation { problem, healthy }, worst_requeue(nexts.into_iter())))
    }

    async fn delete(&self, id: &str) -> Result<Cleanup, BackendError> {
        self.on.delete(&self.inner, &self.drivers, id).await
    }

    async fn retain(&self, known: &[String]) -> Result<(), BackendError> {
        crate::fanout::retain_all(&self.drivers, known).await
    }
}

/// `p`, saying which cluster it is on.
fn named(cluster: &str, p: BalancerProblem) -> BalancerProblem {
    match p {
        BalancerProblem::Pending(m) => BalancerProblem::Pending(format!("on cluster {cluster}: {m}")),
        BalancerProblem::Failed(m) => BalancerProblem::Failed(format!("on cluster {cluster}: {m}")),
    }
}
