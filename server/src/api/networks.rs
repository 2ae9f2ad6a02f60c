//! `virtual_networks`: a tenant's private address spaces (OSAC's
//! `VirtualNetwork`). Each tenant sees and changes only its own.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::{Json, Router};
use chrono::Utc;
use tracing::info;
use vmaas_model::{CreateVirtualNetwork, Envelope, ObjectKind, Page, ValidationErrors, VirtualNetwork, VirtualNetworkState};

use super::{ApiJson, ApiQuery, AppState, checked_name, simple};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::store::{NetworkKind, NetworkRecord};

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/virtual_networks", get(list).post(create)).route("/virtual_networks/{id}", get(read).patch(patch).delete(remove))
}

/// List virtual networks, oldest first.
#[utoipa::path(get, path = "/api/fulfillment/v1/virtual_networks", tag = "virtual networks", params(simple::ListQuery),
    responses((status = 200, body = Page<VirtualNetwork>), (status = 400, body = ApiError), (status = 401, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn list(
    State(s): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<simple::ListQuery>,
) -> Result<Response, ApiError> {
    simple::list::<NetworkKind>(&s, &caller, q, &VirtualNetworkState::ALL.map(VirtualNetworkState::as_str)).await
}

/// Get one virtual network.
#[utoipa::path(get, path = "/api/fulfillment/v1/virtual_networks/{id}", tag = "virtual networks",
    params(("id" = String, Path, description = "Network id (UUID)")),
    responses((status = 200, body = Envelope<VirtualNetwork>), (status = 404, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn read(State(s): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Response, ApiError> {
    simple::read::<NetworkKind>(&s, &caller, &id).await
}

/// Create a virtual network. It is PENDING until the backend has set it up.
#[utoipa::path(post, path = "/api/fulfillment/v1/virtual_networks", tag = "virtual networks",
    request_body = Envelope<CreateVirtualNetwork>,
    responses((status = 201, body = Envelope<VirtualNetwork>), (status = 400, body = ApiError), (status = 409, body = ApiError, description = "The name is taken")),
    security(("bearer" = [])))]
pub(super) async fn create(
    State(s): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<Envelope<CreateVirtualNetwork>>,
) -> Result<(StatusCode, Json<Envelope<VirtualNetwork>>), ApiError> {
    let obj = req.object;
    let mut errs = ValidationErrors::default();
    let name = checked_name(obj.requested_name(), &mut errs);
    let labels = vmaas_model::Labels::from_input(obj.metadata.as_ref(), &mut errs);
    if let Err(e) = obj.spec.check("object.spec") {
        errs.extend(e);
    }
    let (Some(name), true) = (name, errs.is_empty()) else { return Err(ApiError::invalid(errs)) };
    let mut rec =
        NetworkRecord::new(uuid::Uuid::new_v4().to_string(), &caller.tenant, &name, &caller.subject, obj.spec.clone(), Utc::now());
    rec.labels = labels;
    s.store.insert_record(&rec, Vec::new()).await?;
    s.queue.enqueue(ObjectKind::VirtualNetwork, &rec.id);
    info!(network = %rec.id, name = %rec.name, tenant = %rec.tenant, "virtual network created");
    Ok((StatusCode::CREATED, Json(Envelope { object: rec.to_api() })))
}

/// Change the labels and annotations of a virtual network (its spec is fixed at create).
#[utoipa::path(patch, path = "/api/fulfillment/v1/virtual_networks/{id}", tag = "virtual networks",
    params(("id" = String, Path, description = "Id (UUID)")),
    request_body = Envelope<simple::Relabel>,
    responses((status = 200, body = Envelope<VirtualNetwork>), (status = 400, body = ApiError), (status = 404, body = ApiError), (status = 409, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn patch(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<Envelope<simple::Relabel>>,
) -> Result<Json<Envelope<VirtualNetwork>>, ApiError> {
    simple::relabel::<NetworkKind>(&s, &caller, &id, req.object).await
}

/// Delete a virtual network; refused (409) while it has subnets; it is gone
/// (404) once the backend has removed it.
#[utoipa::path(delete, path = "/api/fulfillment/v1/virtual_networks/{id}", tag = "virtual networks",
    params(("id" = String, Path, description = "Network id (UUID)")),
    responses((status = 202, body = Envelope<VirtualNetwork>, description = "Deletion started"), (status = 404, body = ApiError),
        (status = 409, body = ApiError, description = "FAILED_PRECONDITION: it has subnets")),
    security(("bearer" = [])))]
pub(super) async fn remove(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Envelope<VirtualNetwork>>), ApiError> {
    simple::remove::<NetworkKind>(&s, &caller, &id).await
}
