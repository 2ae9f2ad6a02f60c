//! `nat_gateways`: a virtual network's way out (OSAC's `NATGateway`). Its
//! guests' outbound flows leave from one of the caller's external IPs,
//! which the gateway then holds alone (no attachment may take it, and it
//! cannot be released while the gateway lives). One per network; the
//! spec is fixed at create.

use axum::http::StatusCode;
use tracing::info;
use vmaas_model::{NatGateway, NatGatewaySpec, NatGatewayStatus, ObjectKind, ValidationErrors, VirtualNetwork};

use crate::app::kind::Kind;
use crate::app::scope::owned_by;
use crate::app::simple;
use crate::auth::Caller;
use crate::error::{ApiError, Code};
use crate::reconciler::{self, PassFuture, Reconciler};
use crate::state::AppState;
use crate::store::Record;

const NETWORK_FIELD: &str = "object.spec.virtual_network";
/// The role of a NAT gateway's references (to its network and its external IP).
const NAT_OF: &str = "nat_gateway";

impl Kind for NatGateway {
    type Patch = simple::Relabel;

    fn check_spec(spec: &NatGatewaySpec) -> Result<(), ValidationErrors> {
        spec.check("object.spec")
    }

    async fn create(s: &AppState, caller: &Caller, mut rec: Record<NatGateway>) -> Result<Record<NatGateway>, ApiError> {
        let scope = owned_by(&caller.tenant);
        let adm = s.admit().await?;
        let s = adm.state().clone();
        let net = simple::row(&s, &scope, ObjectKind::VirtualNetwork, &rec.spec.virtual_network, NETWORK_FIELD).await?;
        if let Some(other) = s.store.referrers(&net.id).await?.iter().find(|r| r.kind == ObjectKind::NatGateway) {
            let message = format!("virtual network {:?} has NAT gateway {:?} already: one per network", net.name, other.name);
            return Err(ApiError::new(StatusCode::CONFLICT, Code::AlreadyExists, message));
        }
        let network = s.store.get_record::<VirtualNetwork>(&net.id, &scope).await?;
        if network.spec.ipv4_cidr.is_none() {
            return Err(ApiError::field(NETWORK_FIELD, format!("virtual network {:?} has no IPv4 range to route out", net.name)));
        }
        let ip = super::ip_attachments::free_address(&s, &scope, &rec.spec.external_ip, None).await?;
        rec.spec = NatGatewaySpec { virtual_network: net.id.clone(), external_ip: ip.id.clone() };
        rec.status = NatGatewayStatus { address: ip.status.address.clone(), ..Default::default() };
        s.store.insert_record(&rec, vec![(net.id.clone(), NAT_OF.to_owned()), (ip.id.clone(), NAT_OF.to_owned())]).await?;
        adm.commit().await?;
        s.queue.enqueue(ObjectKind::NatGateway, &rec.id);
        s.queue.enqueue(ObjectKind::ExternalIp, &ip.id);
        info!(nat_gateway = %rec.id, network = %net.id, address = %ip.status.address, "NAT gateway created");
        Ok(rec)
    }

    async fn patch(s: &AppState, caller: &Caller, id: &str, p: simple::Relabel) -> Result<Record<NatGateway>, ApiError> {
        simple::relabel::<Self>(s, caller, id, p).await
    }

    fn reconcile<'a>(r: &'a Reconciler, id: &'a str) -> PassFuture<'a> {
        Box::pin(reconciler::nat::reconcile(r, id))
    }
}
