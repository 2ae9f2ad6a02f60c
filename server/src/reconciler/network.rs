//! Reconciling one virtual network through the backend's network driver.

use std::time::Duration;

use tracing::{info, warn};
use vmaas_backend::{BackendError, Cleanup, NetworkObservation, NetworkSpec, NetworkTarget, Requeue};
use vmaas_model::{VirtualNetworkState, VirtualNetworkStatus};

use super::{Outcome, Reconciler};
use crate::store::{NetworkRecord, Scope, StoreError};

/// How soon a network is looked at again after a transient failure.
const RETRY: Duration = Duration::from_secs(1);

fn status(state: VirtualNetworkState, message: Option<String>) -> VirtualNetworkStatus {
    VirtualNetworkStatus { state, message }
}

/// One pass over network `id`.
pub(super) async fn reconcile(r: &Reconciler, id: &str) -> Result<(Outcome, Option<Duration>), StoreError> {
    let net = match r.store.get_network(id, &Scope::All).await {
        Ok(n) => n,
        Err(StoreError::NotFound { .. }) => return Ok((Outcome::Unchanged, None)),
        Err(e) => return Err(e),
    };
    let Some(driver) = r.backend.networks() else {
        let message = format!("the {} backend does not run virtual networks", r.backend.name());
        if net.deleted_at.is_some() {
            r.store.remove(&net.id).await?;
            return Ok((Outcome::Removed, None));
        }
        return Ok((write(r, &net, status(VirtualNetworkState::Failed, Some(message))).await?, None));
    };
    if net.deleted_at.is_some() {
        return match driver.delete(&net.id).await {
            Ok(Cleanup::Done) => {
                r.store.remove(&net.id).await?;
                info!(network = %net.id, name = %net.name, "virtual network removed");
                Ok((Outcome::Removed, None))
            }
            Ok(Cleanup::InProgress) => Ok((Outcome::Unchanged, Some(RETRY))),
            Err(e) => failed(r, &net, e).await,
        };
    }
    let target = NetworkTarget {
        id: net.id.clone(),
        tenant: net.tenant.clone(),
        name: net.name.clone(),
        version: net.version,
        spec: NetworkSpec { ipv4_cidr: net.spec.ipv4_cidr.clone(), ipv6_cidr: net.spec.ipv6_cidr.clone() },
    };
    match driver.ensure(&target).await {
        Ok((seen, next)) => {
            let s = match seen {
                NetworkObservation::Pending(m) => status(VirtualNetworkState::Pending, Some(m)),
                NetworkObservation::Ready => status(VirtualNetworkState::Ready, None),
                NetworkObservation::Failed(m) => status(VirtualNetworkState::Failed, Some(m)),
            };
            let next = match next {
                Requeue::After(d) => Some(d),
                Requeue::AwaitChange => None,
            };
            Ok((write(r, &net, s).await?, next))
        }
        Err(e) => failed(r, &net, e).await,
    }
}

async fn failed(r: &Reconciler, net: &NetworkRecord, e: BackendError) -> Result<(Outcome, Option<Duration>), StoreError> {
    warn!(network = %net.id, error = %e, "backend error");
    let state = if e.is_transient() { VirtualNetworkState::Pending } else { VirtualNetworkState::Failed };
    write(r, net, status(state, Some(e.to_string()))).await?;
    Ok((Outcome::BackendError, e.is_transient().then_some(RETRY)))
}

async fn write(r: &Reconciler, net: &NetworkRecord, s: VirtualNetworkStatus) -> Result<Outcome, StoreError> {
    if s == net.status && !net.unacknowledged() {
        return Ok(Outcome::Unchanged);
    }
    if !r.store.write_network_status(net, &s).await? {
        return Ok(Outcome::Unchanged);
    }
    r.queue.status_written();
    Ok(Outcome::Updated)
}
