//! Reconciling virtual networks, subnets and security groups: the same
//! steps for all (a spec to ensure, a deletion to finish, a status from what
//! the driver reports), over [`Simple`] kinds. Security groups have no
//! driver: their rules are enforced on the NICs that have them, by the VMs'
//! reconcile.

use std::sync::Arc;
use std::time::Duration;

use tracing::{info, warn};
use vmaas_backend::{Backend, BackendError, Cleanup, Driver, NetworkObservation, NetworkSpec, Requeue, SubnetSpec, Target};
use vmaas_model::{
    Object, SecurityGroup, SecurityGroupState, SecurityGroupStatus, Subnet, SubnetState, SubnetStatus, VirtualNetwork, VirtualNetworkState,
    VirtualNetworkStatus,
};

use super::status::write;
use super::{Outcome, Reconciler};
use crate::store::record::Record;
use crate::store::{Scope, StoreError};

/// How soon an object is looked at again after a transient failure.
const RETRY: Duration = Duration::from_secs(1);

/// A kind reconciled by a driver that reports a [`NetworkObservation`].
pub(crate) trait Simple: Object {
    /// What its driver is given.
    type Target: Send + Sync;
    /// Its name in logs.
    const LABEL: &'static str;
    /// Whether it is the server's alone (no driver: READY once stored).
    const LOCAL: bool = false;
    /// The backend's driver of this kind, if it runs it.
    fn driver(b: &dyn Backend) -> Option<Arc<dyn Driver<Self::Target, NetworkObservation>>>;
    /// The driver's spec (`parent`: its network, when it has one that is
    /// still stored).
    fn target(spec: &Self::Spec, parent: Option<&Record<VirtualNetwork>>) -> Self::Target;
    /// The status of what the driver saw, with the count of its users.
    fn status(seen: NetworkObservation, users: u32) -> Self::Status;
    /// The object whose count of users it is among (its network), if any.
    fn parent(_spec: &Self::Spec) -> Option<&str> {
        None
    }
}

impl Simple for VirtualNetwork {
    type Target = NetworkSpec;
    const LABEL: &'static str = "virtual network";

    fn driver(b: &dyn Backend) -> Option<Arc<dyn Driver<NetworkSpec, NetworkObservation>>> {
        b.networks()
    }

    fn target(spec: &Self::Spec, _: Option<&Record<VirtualNetwork>>) -> NetworkSpec {
        NetworkSpec { ipv4_cidr: spec.ipv4_cidr.clone(), ipv6_cidr: spec.ipv6_cidr.clone() }
    }

    fn status(seen: NetworkObservation, users: u32) -> VirtualNetworkStatus {
        let (state, message) = match seen {
            NetworkObservation::Pending(m) => (VirtualNetworkState::Pending, Some(m)),
            NetworkObservation::Ready => (VirtualNetworkState::Ready, None),
            NetworkObservation::Failed(m) => (VirtualNetworkState::Failed, Some(m)),
        };
        VirtualNetworkStatus { state, message, users }
    }
}

impl Simple for SecurityGroup {
    type Target = ();
    const LABEL: &'static str = "security group";
    const LOCAL: bool = true;

    fn driver(_: &dyn Backend) -> Option<Arc<dyn Driver<(), NetworkObservation>>> {
        None
    }

    fn target(_: &Self::Spec, _: Option<&Record<VirtualNetwork>>) {}

    fn parent(spec: &Self::Spec) -> Option<&str> {
        Some(&spec.virtual_network)
    }

    fn status(seen: NetworkObservation, users: u32) -> SecurityGroupStatus {
        let (state, message) = match seen {
            NetworkObservation::Pending(m) => (SecurityGroupState::Pending, Some(m)),
            NetworkObservation::Ready => (SecurityGroupState::Ready, None),
            NetworkObservation::Failed(m) => (SecurityGroupState::Failed, Some(m)),
        };
        SecurityGroupStatus { state, message, users }
    }
}

impl Simple for Subnet {
    type Target = SubnetSpec;
    const LABEL: &'static str = "subnet";

    fn driver(b: &dyn Backend) -> Option<Arc<dyn Driver<SubnetSpec, NetworkObservation>>> {
        b.subnets()
    }

    fn parent(spec: &Self::Spec) -> Option<&str> {
        Some(&spec.virtual_network)
    }

    fn target(spec: &Self::Spec, parent: Option<&Record<VirtualNetwork>>) -> SubnetSpec {
        SubnetSpec {
            virtual_network: spec.virtual_network.clone(),
            network_name: parent.map(|p| p.name.clone()).unwrap_or_default(),
            ipv4_cidr: spec.ipv4_cidr.clone().unwrap_or_default(),
            network_class: parent.map(|p| p.spec.network_class.clone()).unwrap_or_default(),
        }
    }

    fn status(seen: NetworkObservation, users: u32) -> SubnetStatus {
        let (state, message) = match seen {
            NetworkObservation::Pending(m) => (SubnetState::Pending, Some(m)),
            NetworkObservation::Ready => (SubnetState::Ready, None),
            NetworkObservation::Failed(m) => (SubnetState::Failed, Some(m)),
        };
        SubnetStatus { state, message, users }
    }
}

/// One pass over object `id` of kind `K`.
pub(crate) async fn reconcile<K: Simple>(r: &Reconciler, id: &str) -> Result<(Outcome, Option<Duration>), StoreError> {
    let rec = match r.store.get_record::<K>(id, &Scope::All).await {
        Ok(n) => n,
        Err(StoreError::NotFound { .. }) => return Ok((Outcome::Unchanged, None)),
        Err(e) => return Err(e),
    };
    let users = u32::try_from(r.store.referrers(&rec.id).await?.len()).unwrap_or(u32::MAX);
    let Some(driver) = K::driver(r.backend.as_ref()) else {
        if rec.deleted_at.is_some() {
            return removed(r, &rec).await;
        }
        if K::LOCAL {
            return Ok((write(r, &rec, K::status(NetworkObservation::Ready, users)).await?, None));
        }
        let message = format!("the {} backend does not run {}s", r.backend.name(), K::LABEL);
        return Ok((write(r, &rec, K::status(NetworkObservation::Failed(message), users)).await?, None));
    };
    if rec.deleted_at.is_some() {
        return match driver.delete(&rec.id).await {
            Ok(Cleanup::Done) => removed(r, &rec).await,
            Ok(Cleanup::InProgress) => Ok((Outcome::Unchanged, Some(RETRY))),
            Err(e) => failed(r, &rec, e, users).await,
        };
    }
    let parent = match K::parent(&rec.spec) {
        Some(p) => match r.store.get_record::<VirtualNetwork>(p, &Scope::All).await {
            Ok(network) => Some(network),
            Err(StoreError::NotFound { .. }) => None,
            Err(e) => return Err(e),
        },
        None => None,
    };
    let spec = K::target(&rec.spec, parent.as_ref());
    let target = Target { id: rec.id.clone(), tenant: rec.tenant.clone(), name: rec.name.clone(), version: rec.version, spec };
    match driver.ensure(&target).await {
        Ok((seen, next)) => {
            let next = match next {
                Requeue::After(d) => Some(d),
                Requeue::AwaitChange => None,
            };
            Ok((write(r, &rec, K::status(seen, users)).await?, next))
        }
        Err(e) => failed(r, &rec, e, users).await,
    }
}

/// Removes the record of a deleted object; its network counts one user less.
async fn removed<K: Simple>(r: &Reconciler, rec: &Record<K>) -> Result<(Outcome, Option<Duration>), StoreError> {
    r.store.remove(&rec.id).await?;
    if let Some(parent) = K::parent(&rec.spec) {
        r.queue.enqueue(vmaas_model::ObjectKind::VirtualNetwork, parent);
    }
    info!(id = %rec.id, name = %rec.name, "{} removed", K::LABEL);
    Ok((Outcome::Removed, None))
}

async fn failed<K: Simple>(
    r: &Reconciler,
    rec: &Record<K>,
    e: BackendError,
    users: u32,
) -> Result<(Outcome, Option<Duration>), StoreError> {
    warn!(id = %rec.id, error = %e, "backend error on a {}", K::LABEL);
    let seen = if e.is_transient() { NetworkObservation::Pending(e.to_string()) } else { NetworkObservation::Failed(e.to_string()) };
    write(r, rec, K::status(seen, users)).await?;
    Ok((Outcome::BackendError, e.is_transient().then_some(RETRY)))
}
