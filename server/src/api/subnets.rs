//! `subnets`: ranges of a tenant's virtual networks (OSAC's `Subnet`), each
//! an Ethernet segment on the qemu backend. A subnet names its network (by
//! id or name; stored as the id), lies inside the network's range and
//! overlaps none of its siblings; a network with subnets cannot be deleted.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::{Json, Router};
use chrono::Utc;
use tracing::info;
use vmaas_model::network::Cidr;
use vmaas_model::{CreateSubnet, Envelope, ObjectKind, Page, Subnet, SubnetState, ValidationErrors};

use super::{ApiJson, ApiQuery, AppState, checked_name, owned_by, simple};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::store::{NetworkRecord, SUBNET_OF, StoreError, SubnetKind, SubnetRecord};

const FIELD: &str = "object.spec.virtual_network";

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/subnets", get(list).post(create)).route("/subnets/{id}", get(read).patch(patch).delete(remove))
}

/// List subnets, oldest first.
#[utoipa::path(get, path = "/api/fulfillment/v1/subnets", tag = "subnets", params(simple::ListQuery),
    responses((status = 200, body = Page<Subnet>), (status = 400, body = ApiError), (status = 401, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn list(
    State(s): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<simple::ListQuery>,
) -> Result<Response, ApiError> {
    simple::list::<SubnetKind>(&s, &caller, q, &SubnetState::ALL.map(SubnetState::as_str)).await
}

/// Get one subnet.
#[utoipa::path(get, path = "/api/fulfillment/v1/subnets/{id}", tag = "subnets",
    params(("id" = String, Path, description = "Subnet id (UUID)")),
    responses((status = 200, body = Envelope<Subnet>), (status = 404, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn read(State(s): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Response, ApiError> {
    simple::read::<SubnetKind>(&s, &caller, &id).await
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

/// Create a subnet. It is PENDING until the backend runs its segment.
#[utoipa::path(post, path = "/api/fulfillment/v1/subnets", tag = "subnets",
    request_body = Envelope<CreateSubnet>,
    responses((status = 201, body = Envelope<Subnet>), (status = 400, body = ApiError), (status = 409, body = ApiError, description = "The name is taken")),
    security(("bearer" = [])))]
pub(super) async fn create(
    State(s): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<Envelope<CreateSubnet>>,
) -> Result<(StatusCode, Json<Envelope<Subnet>>), ApiError> {
    let obj = req.object;
    let mut errs = ValidationErrors::default();
    let name = checked_name(obj.requested_name(), &mut errs);
    let labels = vmaas_model::Labels::from_input(obj.metadata.as_ref(), &mut errs);
    let cidr = obj.spec.check("object.spec").map_err(|e| errs.extend(e)).ok();
    let (Some(name), Some(cidr), true) = (name, cidr, errs.is_empty()) else { return Err(ApiError::invalid(errs)) };
    // Placement and insertion under one lock: two subnets cannot both take a range.
    let adm = s.admit().await?;
    let s = adm.state().clone();
    let net = check_placement(&s, &caller, &obj.spec, &cidr).await?;
    let mut spec = obj.spec.clone();
    spec.virtual_network = net.id.clone();
    let mut rec = SubnetRecord::new(uuid::Uuid::new_v4().to_string(), &caller.tenant, &name, &caller.subject, spec, Utc::now());
    rec.labels = labels;
    s.store.insert_record(&rec, vec![(net.id.clone(), SUBNET_OF.to_owned())]).await.map_err(|e| match e {
        StoreError::MissingReference(reason) => ApiError::field(FIELD, reason),
        other => other.into(),
    })?;
    adm.commit().await?;
    s.queue.enqueue(ObjectKind::Subnet, &rec.id);
    s.queue.enqueue(ObjectKind::VirtualNetwork, &net.id);
    info!(subnet = %rec.id, name = %rec.name, network = %net.id, tenant = %rec.tenant, "subnet created");
    Ok((StatusCode::CREATED, Json(Envelope { object: rec.to_api() })))
}

/// Change the labels and annotations of a subnet (its spec is fixed at create).
#[utoipa::path(patch, path = "/api/fulfillment/v1/subnets/{id}", tag = "subnets",
    params(("id" = String, Path, description = "Id (UUID)")),
    request_body = Envelope<simple::Relabel>,
    responses((status = 200, body = Envelope<Subnet>), (status = 400, body = ApiError), (status = 404, body = ApiError), (status = 409, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn patch(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<Envelope<simple::Relabel>>,
) -> Result<Json<Envelope<Subnet>>, ApiError> {
    simple::relabel::<SubnetKind>(&s, &caller, &id, req.object).await
}

/// Delete a subnet; refused (409) while VMs are attached to it.
#[utoipa::path(delete, path = "/api/fulfillment/v1/subnets/{id}", tag = "subnets",
    params(("id" = String, Path, description = "Subnet id (UUID)")),
    responses((status = 202, body = Envelope<Subnet>, description = "Deletion started"), (status = 404, body = ApiError),
        (status = 409, body = ApiError, description = "FAILED_PRECONDITION: VMs are attached to it")),
    security(("bearer" = [])))]
pub(super) async fn remove(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Envelope<Subnet>>), ApiError> {
    simple::remove::<SubnetKind>(&s, &caller, &id).await
}
