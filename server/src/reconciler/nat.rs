//! Reconciling NAT gateways: the backend's driver routes the network out
//! through the gateway's address; its status says whether it does.

use std::time::Duration;

use tracing::{info, warn};
use vmaas_backend::{Cleanup, NatObservation, NatSpec, Requeue, Target};
use vmaas_model::{NatGateway, NatGatewayState, NatGatewayStatus, ObjectKind, VirtualNetwork};

use super::status::{get, write};
use super::{Outcome, Pass, Reconciler};
use crate::store::{Record, Scope, StoreError};

/// How soon a gateway is looked at again after a transient failure.
const RETRY: Duration = Duration::from_secs(1);

/// A NAT gateway: one step of its driver, then its status; on deletion,
/// the driver stops it and its external IP is looked at again.
pub(crate) async fn reconcile(r: &Reconciler, id: &str) -> Pass {
    let Some(g) = get::<NatGateway>(r, id).await? else { return Ok((Outcome::Unchanged, None)) };
    let driver = r.backend.nat_gateways();
    if g.deleted_at.is_some() {
        if let Some(d) = &driver {
            match d.delete(&g.id).await {
                Ok(Cleanup::Done) => {}
                Ok(Cleanup::InProgress) => return Ok((Outcome::Unchanged, Some(RETRY))),
                Err(e) => {
                    warn!(nat_gateway = %g.id, error = %e, "stopping a NAT gateway failed; will retry");
                    return Ok((Outcome::BackendError, Some(RETRY)));
                }
            }
        }
        r.store.remove(&g.id).await?;
        r.queue.enqueue(ObjectKind::ExternalIp, &g.spec.external_ip);
        info!(nat_gateway = %g.id, name = %g.name, "NAT gateway removed");
        return Ok((Outcome::Removed, None));
    }
    let Some(driver) = driver else {
        let status = failed(&g, format!("the {} backend does not run NAT gateways", r.backend.name()));
        return Ok((write(r, &g, status).await?, None));
    };
    let Some(spec) = spec(r, &g).await? else {
        return Ok((write(r, &g, failed(&g, "its network has no IPv4 range, or its address does not parse".into())).await?, None));
    };
    let target = Target { id: g.id.clone(), tenant: g.tenant.clone(), name: g.name.clone(), version: g.version, spec };
    match driver.ensure(&target).await {
        Ok((seen, next)) => {
            let status = match seen {
                NatObservation::Ready => {
                    NatGatewayStatus { state: NatGatewayState::Ready, message: None, address: g.status.address.clone() }
                }
                NatObservation::Failed(why) => failed(&g, why),
            };
            let next = match next {
                Requeue::After(d) => Some(d),
                Requeue::AwaitChange => None,
            };
            Ok((write(r, &g, status).await?, next))
        }
        Err(e) => {
            warn!(nat_gateway = %g.id, error = %e, "backend error on a NAT gateway");
            let state = if e.is_transient() { NatGatewayState::Pending } else { NatGatewayState::Failed };
            let status = NatGatewayStatus { state, message: Some(e.to_string()), address: g.status.address.clone() };
            write(r, &g, status).await?;
            Ok((Outcome::BackendError, e.is_transient().then_some(RETRY)))
        }
    }
}

fn failed(g: &Record<NatGateway>, why: String) -> NatGatewayStatus {
    NatGatewayStatus { state: NatGatewayState::Failed, message: Some(why), address: g.status.address.clone() }
}

/// What the driver is given: the network's range and the gateway's address.
async fn spec(r: &Reconciler, g: &Record<NatGateway>) -> Result<Option<NatSpec>, StoreError> {
    let network = match r.store.get_record::<VirtualNetwork>(&g.spec.virtual_network, &Scope::All).await {
        Ok(n) => n,
        Err(StoreError::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let (Some(cidr), Ok(address)) = (network.spec.ipv4_cidr, g.status.address.parse()) else { return Ok(None) };
    Ok(Some(NatSpec { virtual_network: network.id, network_cidr: cidr, address }))
}
