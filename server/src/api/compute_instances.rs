//! `compute_instances`: OSAC's `osac.public.v1` view of the same VM objects
//! `virtual_machines` serves. The work is [`crate::app::compute_instances`]'s.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use vmaas_model::Envelope;

use super::extract::ApiJson;
use super::extract::ApiQuery;
use super::query::page;
use super::shared::Paging;
use super::vms;
use crate::app::compute_instances as instances;
use crate::app::listing::ListRequest;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/compute_instances", get(list).post(create))
        .route("/compute_instances/{id}", get(read).patch(patch).delete(remove))
}

/// Query of the compute instance list.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct ListQuery {
    /// Items to skip (default 0).
    offset: Option<u64>,
    /// Items to return, 1 to 1000 (default 100).
    limit: Option<u64>,
    /// Only the instance with this exact name.
    name: Option<String>,
    /// A CEL expression over the compute instance, e.g. `this.status.state == 'COMPUTE_INSTANCE_STATE_RUNNING'`.
    filter: Option<String>,
    /// Sort keys, e.g. `this.metadata.name desc`.
    order: Option<String>,
}

/// List compute instances (the caller's VMs, in OSAC's public names).
#[utoipa::path(get, path = "/api/fulfillment/v1/compute_instances", tag = "compute instances", params(ListQuery),
    responses((status = 200, description = "`{\"items\": [compute instances], \"size\", \"total\"}`"), (status = 400, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn list(State(s): State<AppState>, caller: Caller, ApiQuery(q): ApiQuery<ListQuery>) -> Result<Response, ApiError> {
    let (offset, limit) = Paging { offset: q.offset, limit: q.limit }.resolve()?;
    let req = ListRequest { offset, limit, name: q.name, filter: q.filter, order: q.order, ..ListRequest::default() };
    Ok(page(instances::list(&s, &caller, req).await?))
}

/// Get one compute instance.
#[utoipa::path(get, path = "/api/fulfillment/v1/compute_instances/{id}", tag = "compute instances",
    params(("id" = String, Path, description = "VM id (UUID)")),
    responses((status = 200, description = "`{\"object\": compute instance}`"), (status = 404, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn read(State(s): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Response, ApiError> {
    Ok(answer(StatusCode::OK, instances::read(&s, &caller, &id).await?))
}

/// Create a compute instance (a VM): `spec.run_strategy` `Always` or `Halted`.
#[utoipa::path(post, path = "/api/fulfillment/v1/compute_instances", tag = "compute instances",
    responses((status = 201, description = "`{\"object\": compute instance}`"), (status = 400, body = ApiError), (status = 409, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn create(
    State(s): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<Envelope<Value>>,
) -> Result<Response, ApiError> {
    Ok(answer(StatusCode::CREATED, instances::create(&s, &caller, req.object).await?))
}

/// Change a compute instance: only the fields sent (or named by the
/// gateway's `update_mask`) change; a `spec.restart_requested_at` restarts it.
#[utoipa::path(patch, path = "/api/fulfillment/v1/compute_instances/{id}", tag = "compute instances",
    params(("id" = String, Path, description = "VM id (UUID)")),
    responses((status = 200, description = "`{\"object\": compute instance}`"), (status = 400, body = ApiError), (status = 404, body = ApiError), (status = 409, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn patch(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<Envelope<Value>>,
) -> Result<Response, ApiError> {
    Ok(answer(StatusCode::OK, instances::patch(&s, &caller, &id, req.object).await?))
}

/// Delete a compute instance.
#[utoipa::path(delete, path = "/api/fulfillment/v1/compute_instances/{id}", tag = "compute instances",
    params(("id" = String, Path, description = "VM id (UUID)"), vms::DeleteQuery),
    responses((status = 202, description = "`{\"object\": compute instance}`, being deleted"), (status = 404, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn remove(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<vms::DeleteQuery>,
) -> Result<Response, ApiError> {
    Ok(answer(StatusCode::ACCEPTED, instances::remove(&s, &caller, &id, q.retain_snapshots).await?))
}

/// `{"object": instance}`, with `status`.
fn answer(status: StatusCode, instance: Value) -> Response {
    (status, Json(json!({"object": instance}))).into_response()
}
