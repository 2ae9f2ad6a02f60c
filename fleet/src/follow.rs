//! What follows its VMs: a volume is made on the cluster of the first VM
//! it is attached to and stays there (attaching it to a VM on another
//! cluster fails, naming both); a load balancer is made on every cluster
//! that runs one of its targets, each with the targets it runs, and
//! removed from a cluster that runs none of them any more; a snapshot is
//! taken on the cluster of its VM and stays there.
//!
//! One driver, [`Follow`], does this for every kind: it keeps the record
//! of where each object is made, deletes and retains on every cluster,
//! and asks the kind's [`Placement`] where one step of ensuring goes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use vmaas_backend::{
    BackendError, BalancerObservation, BalancerProblem, BalancerSpec, BalancerTarget, Cleanup, Driver, Requeue, SnapshotObservation,
    SnapshotSpec, SnapshotTarget, VolumeObservation, VolumeSpec, VolumeTarget,
};
use vmaas_model::ObjectKind;

use vmaas_backend::Target;

use crate::Inner;
use crate::fanout::{delete_on, worst_requeue};
use crate::made::MadeOn;

/// How soon an object whose VMs are not placed yet is looked at again.
const UNPLACED: Duration = Duration::from_secs(5);

/// Where the objects of one kind go among the clusters: one step of
/// placing `t` and ensuring it there, through `f`'s drivers and record.
#[async_trait]
pub trait Placement<S, O>: Send + Sync + Sized + 'static {
    /// The kind it places (for the record of where objects are made).
    const KIND: ObjectKind;

    /// Places `t` (marking where in `f.on`) and ensures it there.
    async fn ensure(f: &Follow<S, O, Self>, t: &Target<S>) -> Result<(O, Requeue), BackendError>;
}

/// A driver over every cluster's driver of one kind, placing objects as
/// `P` says; deleting and retaining are the same for every kind.
pub struct Follow<S, O, P> {
    inner: Arc<Inner>,
    drivers: Vec<Arc<dyn Driver<S, O>>>,
    on: MadeOn,
    placement: std::marker::PhantomData<fn() -> P>,
}

impl<S, O, P: Placement<S, O>> Follow<S, O, P> {
    pub(crate) fn new(inner: Arc<Inner>, drivers: Vec<Arc<dyn Driver<S, O>>>) -> Self {
        Self { inner, drivers, on: MadeOn::new(P::KIND), placement: std::marker::PhantomData }
    }

    /// The cluster `id` is made on, as known or found.
    fn known(&self, id: &str) -> Option<usize> {
        self.on.of(&self.inner, id).into_iter().next()
    }
}

#[async_trait]
impl<S: Send + Sync + 'static, O: Send + 'static, P: Placement<S, O>> Driver<S, O> for Follow<S, O, P> {
    async fn ensure(&self, t: &Target<S>) -> Result<(O, Requeue), BackendError> {
        P::ensure(self, t).await
    }

    async fn delete(&self, id: &str) -> Result<Cleanup, BackendError> {
        self.on.delete(&self.inner, &self.drivers, id).await
    }

    async fn retain(&self, known: &[String]) -> Result<(), BackendError> {
        crate::fanout::retain_all(&self.drivers, known).await
    }
}

/// Volumes, each on the cluster of the first VM it is attached to.
pub struct OnFirstVm;

/// Volumes, each on one cluster.
pub type Volumes = Follow<VolumeSpec, VolumeObservation, OnFirstVm>;

#[async_trait]
impl Placement<VolumeSpec, VolumeObservation> for OnFirstVm {
    const KIND: ObjectKind = ObjectKind::Volume;

    async fn ensure(f: &Volumes, t: &VolumeTarget) -> Result<(VolumeObservation, Requeue), BackendError> {
        let vm_home = t.spec.attached_to.as_deref().and_then(|vm| f.inner.home(vm));
        let m = match (f.known(&t.id), vm_home) {
            (Some(k), Some(v)) if k != v => {
                let (k, v) = (&f.inner.members[k].name, &f.inner.members[v].name);
                let why = format!("the volume is on cluster {k} and its VM runs on cluster {v}: a volume does not move between clusters");
                return Ok((VolumeObservation::Failed(why), Requeue::AwaitChange));
            }
            (Some(m), _) | (None, Some(m)) => m,
            (None, None) => {
                let why = "made on the cluster of the first VM it is attached to, once that VM is placed".to_owned();
                return Ok((VolumeObservation::Pending(why), Requeue::after(UNPLACED)));
            }
        };
        f.on.mark(&t.id, m);
        f.drivers[m].ensure(t).await
    }
}

/// Snapshots, each taken on the cluster of its VM.
pub struct WithItsVm;

/// Snapshots, each on the cluster of its VM.
pub type Snapshots = Follow<SnapshotSpec, SnapshotObservation, WithItsVm>;

#[async_trait]
impl Placement<SnapshotSpec, SnapshotObservation> for WithItsVm {
    const KIND: ObjectKind = ObjectKind::ComputeInstanceSnapshot;

    async fn ensure(f: &Snapshots, t: &SnapshotTarget) -> Result<(SnapshotObservation, Requeue), BackendError> {
        let Some(m) = f.known(&t.id).or_else(|| f.inner.home(&t.spec.vm)) else {
            let why = "taken on the cluster of its VM, once that VM is placed".to_owned();
            return Ok((SnapshotObservation::Pending(why), Requeue::after(UNPLACED)));
        };
        f.on.mark(&t.id, m);
        f.drivers[m].ensure(t).await
    }
}

/// Load balancers, on every cluster that runs one of their targets.
pub struct OnTheirTargets;

/// Load balancers, on the clusters of their targets.
pub type Balancers = Follow<BalancerSpec, BalancerObservation, OnTheirTargets>;

#[async_trait]
impl Placement<BalancerSpec, BalancerObservation> for OnTheirTargets {
    const KIND: ObjectKind = ObjectKind::LoadBalancer;

    async fn ensure(f: &Balancers, t: &BalancerTarget) -> Result<(BalancerObservation, Requeue), BackendError> {
        let mut by_cluster: BTreeMap<usize, Vec<String>> = BTreeMap::new();
        for vm in &t.spec.targets {
            if let Some(m) = f.inner.home(vm) {
                by_cluster.entry(m).or_default().push(vm.clone());
            }
        }
        let left = f.on.of(&f.inner, &t.id).into_iter().filter(|m| !by_cluster.contains_key(m));
        delete_on(&f.drivers, left, &t.id).await?;
        f.on.set(&t.id, by_cluster.keys().copied().collect());
        if by_cluster.is_empty() {
            let problem = BalancerProblem::Pending("none of its targets is placed on a cluster yet".into());
            return Ok((BalancerObservation { problem: Some(problem), healthy: Vec::new() }, Requeue::after(UNPLACED)));
        }
        let mut healthy = BTreeSet::new();
        let mut problem = None;
        let mut nexts = Vec::new();
        for (m, targets) in by_cluster {
            let part = BalancerTarget { spec: BalancerSpec { targets, ..t.spec.clone() }, ..t.clone() };
            let (seen, next) = f.drivers[m].ensure(&part).await?;
            healthy.extend(seen.healthy);
            problem = problem.or(seen.problem.map(|p| named(&f.inner.members[m].name, p)));
            nexts.push(next);
        }
        let healthy = t.spec.targets.iter().filter(|vm| healthy.contains(*vm)).cloned().collect();
        Ok((BalancerObservation { problem, healthy }, worst_requeue(nexts.into_iter())))
    }
}

/// `p`, saying which cluster it is on.
fn named(cluster: &str, p: BalancerProblem) -> BalancerProblem {
    match p {
        BalancerProblem::Pending(m) => BalancerProblem::Pending(format!("on cluster {cluster}: {m}")),
        BalancerProblem::Failed(m) => BalancerProblem::Failed(format!("on cluster {cluster}: {m}")),
    }
}
