//! `subnets`: ranges of a tenant's virtual networks (OSAC's `Subnet`), each
//! an Ethernet segment on the qemu backend. A subnet names its network (by
//! id or name; stored as the id), lies inside the network's range and
//! overlaps none of its siblings; a network with subnets cannot be deleted.

use tracing::info;
use vmaas_model::network::Cidr;
use vmaas_model::{ObjectKind, Subnet, ValidationErrors};

use crate::app::kind::Kind;
use crate::app::scope::owned_by;
use crate::app::simple;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::reconciler::{self, PassFuture, Reconciler};
use crate::state::AppState;
use crate::store::{NetworkRecord, SUBNET_OF, StoreError, SubnetRecord};

const FIELD: &str = "object.spec.virtual_network";

impl Kind for Subnet {
    type Patch = simple::Relabel;

    fn check_spec(spec: &Self::Spec) -> Result<(), ValidationErrors> {
        spec.check("object.spec").map(drop)
    }

    async fn create(s: &AppState, caller: &Caller, mut rec: SubnetRecord) -> Result<SubnetRecord, ApiError> {
        let cidr = rec.spec.check("object.spec").map_err(ApiError::invalid)?;
        // Placement and insertion under one lock: two subnets cannot both take a range.
        let adm = s.admit().await?;
        let s = adm.state().clone();
        let net = check_placement(&s, caller, &rec.spec, &cidr).await?;
        rec.spec.virtual_network = net.id.clone();
        s.store.insert_record(&rec, vec![(net.id.clone(), SUBNET_OF.to_owned())]).await.map_err(|e| match e {
            StoreError::MissingReference(reason) => ApiError::field(FIELD, reason),
            other => other.into(),
        })?;
        adm.commit().await?;
        s.queue.enqueue(ObjectKind::Subnet, &rec.id);
        s.queue.enqueue(ObjectKind::VirtualNetwork, &net.id);
        info!(subnet = %rec.id, name = %rec.name, network = %net.id, tenant = %rec.tenant, "subnet created");
        Ok(rec)
    }

    async fn patch(s: &AppState, caller: &Caller, id: &str, p: simple::Relabel) -> Result<SubnetRecord, ApiError> {
        simple::relabel::<Self>(s, caller, id, p).await
    }

    fn reconcile<'a>(r: &'a Reconciler, id: &'a str) -> PassFuture<'a> {
        Box::pin(reconciler::network::reconcile::<Self>(r, id))
    }
}

/// Checks the subnet against its network and its siblings; returns the network.
async fn check_placement(s: &AppState, caller: &Caller, spec: &vmaas_model::SubnetSpec, cidr: &Cidr) -> Result<NetworkRecord, ApiError> {
    let net = simple::network(s, &owned_by(&caller.tenant), &spec.virtual_network).await?;
    if net.deleted_at.is_some() {
        return Err(ApiError::field(FIELD, format!("virtual network {:?} is being deleted", net.name)));
    }
    let Some(range) = net.spec.ipv4_cidr.as_deref().and_then(|c| Cidr::parse(c, 4).ok()) else {
        return Err(ApiError::field(FIELD, format!("virtual network {:?} has no IPv4 range", net.name)));
    };
    let text = spec.ipv4_cidr.as_deref().unwrap_or_default();
    if !cidr.within(&range) {
        return Err(ApiError::field(
            "object.spec.ipv4_cidr",
            format!("{text} is not inside the network's {}", net.spec.ipv4_cidr.as_deref().unwrap_or("")),
        ));
    }
    let siblings = s.store.referrers(&net.id).await?.into_iter().filter(|r| r.kind == ObjectKind::Subnet);
    for sib in siblings.map(|r| crate::store::SubnetRecord::from_row(&r)).collect::<Result<Vec<_>, _>>()? {
        let theirs = sib.spec.ipv4_cidr.as_deref().and_then(|c| Cidr::parse(c, 4).ok());
        if theirs.is_some_and(|t| cidr.overlaps(&t)) {
            return Err(ApiError::field(
                "object.spec.ipv4_cidr",
                format!("{text} overlaps subnet {:?} ({})", sib.name, sib.spec.ipv4_cidr.as_deref().unwrap_or("")),
            ));
        }
    }
    Ok(net)
}
