//! `virtual_networks`: a tenant's private address spaces (OSAC's
//! `VirtualNetwork`). Each tenant sees and changes only its own.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::{Json, Router};
use chrono::Utc;
use serde::Deserialize;
use tracing::info;
use vmaas_model::{CreateVirtualNetwork, Envelope, ObjectKind, Page, ValidationErrors, VirtualNetwork, VirtualNetworkState};

use super::{ApiJson, ApiQuery, AppState, Paging, checked_name, page_json, raw_json, scope};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::store::{Filter, NetworkKind, NetworkRecord};

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/virtual_networks", get(list).post(create)).route("/virtual_networks/{id}", get(read).delete(remove))
}

/// Query of a network list.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct ListQuery {
    /// Items to skip (default 0).
    offset: Option<u64>,
    /// Items to return, 1 to 1000 (default 100).
    limit: Option<u64>,
    /// Only the network with this exact name.
    name: Option<String>,
    /// Only networks in this state, e.g. `VIRTUAL_NETWORK_STATE_READY` or `READY`.
    state: Option<String>,
}

fn parse_state(s: &str) -> Result<VirtualNetworkState, ApiError> {
    let up = s.to_ascii_uppercase();
    [VirtualNetworkState::Pending, VirtualNetworkState::Ready, VirtualNetworkState::Failed]
        .into_iter()
        .find(|st| st.as_str() == up || st.as_str().ends_with(&format!("_{up}")))
        .ok_or_else(|| ApiError::field("state", format!("unknown state {s:?}: expected one of PENDING, READY, FAILED")))
}

/// List virtual networks, oldest first.
#[utoipa::path(get, path = "/api/fulfillment/v1/virtual_networks", tag = "virtual networks", params(ListQuery),
    responses((status = 200, body = Page<VirtualNetwork>), (status = 400, body = ApiError), (status = 401, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn list(State(s): State<AppState>, caller: Caller, ApiQuery(q): ApiQuery<ListQuery>) -> Result<Response, ApiError> {
    let (offset, limit) = Paging { offset: q.offset, limit: q.limit }.resolve()?;
    let state = q.state.as_deref().map(parse_state).transpose()?.map(|st| st.as_str().to_owned());
    let (items, total) =
        s.store.list_json(ObjectKind::VirtualNetwork, &scope(&caller), &Filter { name: q.name, state, offset, limit }).await?;
    Ok(page_json(&items, total))
}

/// Get one virtual network.
#[utoipa::path(get, path = "/api/fulfillment/v1/virtual_networks/{id}", tag = "virtual networks",
    params(("id" = String, Path, description = "Network id (UUID)")),
    responses((status = 200, body = Envelope<VirtualNetwork>), (status = 404, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn read(State(s): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Response, ApiError> {
    let n = s.store.get_json(ObjectKind::VirtualNetwork, &id, &scope(&caller)).await?;
    Ok(raw_json(format!("{{\"object\":{n}}}")))
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
    if let Err(e) = obj.spec.check("object.spec") {
        errs.extend(e);
    }
    let (Some(name), true) = (name, errs.is_empty()) else { return Err(ApiError::invalid(errs)) };
    let rec = NetworkRecord::new(uuid::Uuid::new_v4().to_string(), &caller.tenant, &name, &caller.subject, obj.spec.clone(), Utc::now());
    s.store.insert_record(&rec, Vec::new()).await?;
    s.queue.enqueue(ObjectKind::VirtualNetwork, &rec.id);
    info!(network = %rec.id, name = %rec.name, tenant = %rec.tenant, "virtual network created");
    Ok((StatusCode::CREATED, Json(Envelope { object: rec.to_api() })))
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
    let row = s.store.get(ObjectKind::VirtualNetwork, &id, &scope(&caller)).await?;
    s.store.ensure_unused(&row).await?;
    let rec = s.store.mark_record_deleted::<NetworkKind>(&id, &scope(&caller), Utc::now()).await?;
    s.queue.enqueue(ObjectKind::VirtualNetwork, &id);
    info!(network = %id, name = %rec.name, "virtual network deletion requested");
    Ok((StatusCode::ACCEPTED, Json(Envelope { object: rec.to_api() })))
}
