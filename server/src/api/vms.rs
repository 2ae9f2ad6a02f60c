//! `virtual_machines`: each tenant sees and changes only its own;
//! administrators see all. The work is [`crate::app::vms`]'s.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::{Json, Router};
use vmaas_model::{CreateVirtualMachine, Envelope, Page, PatchVirtualMachine, VirtualMachine};

use super::extract::ApiJson;
use super::extract::ApiQuery;
use super::query::{ListQuery, page};
use super::shared::{enveloped, raw_json};
use crate::app::listing::States;
use crate::app::vms;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/virtual_machines", get(list).post(create))
        .route("/virtual_machines/{id}", get(read).patch(patch).delete(remove))
        .route("/virtual_machines/{id}/restart", axum::routing::post(restart))
}

/// List virtual machines, oldest first.
#[utoipa::path(get, path = "/api/fulfillment/v1/virtual_machines", tag = "virtual machines", params(ListQuery),
    responses((status = 200, body = Page<VirtualMachine>), (status = 400, body = ApiError), (status = 401, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn list(State(s): State<AppState>, caller: Caller, ApiQuery(q): ApiQuery<ListQuery>) -> Result<Response, ApiError> {
    Ok(page(vms::list(&s, &caller, q.request()?, States::Stored, |items| async { Ok(items) }).await?))
}

/// Get one virtual machine.
#[utoipa::path(get, path = "/api/fulfillment/v1/virtual_machines/{id}", tag = "virtual machines",
    params(("id" = String, Path, description = "VM id (UUID)")),
    responses((status = 200, body = Envelope<VirtualMachine>), (status = 404, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn read(State(s): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Response, ApiError> {
    Ok(raw_json(enveloped(&vms::read_json(&s, &caller, &id).await?)))
}

/// Create a virtual machine from a template.
///
/// The name is `object.metadata.name`, or else `object.id` as in the seed
/// design; the server assigns the real id.
#[utoipa::path(post, path = "/api/fulfillment/v1/virtual_machines", tag = "virtual machines",
    request_body = Envelope<CreateVirtualMachine>,
    responses((status = 201, body = Envelope<VirtualMachine>), (status = 400, body = ApiError), (status = 409, body = ApiError, description = "The name is taken"),
        (status = 429, body = ApiError, description = "RESOURCE_EXHAUSTED: the host has no room for the CPU, memory or disk asked for, or the tenant's quota does not allow it")),
    security(("bearer" = [])))]
pub(super) async fn create(
    State(s): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<Envelope<CreateVirtualMachine>>,
) -> Result<(StatusCode, Json<Envelope<VirtualMachine>>), ApiError> {
    let rec = vms::create(&s, &caller, req.object).await?;
    Ok((StatusCode::CREATED, Json(Envelope { object: rec.to_api() })))
}

/// Change a virtual machine's spec: its power `state` or its `template_parameters`.
///
/// Send `object.metadata.version` to refuse lost updates: a stale version gets 409.
#[utoipa::path(patch, path = "/api/fulfillment/v1/virtual_machines/{id}", tag = "virtual machines",
    params(("id" = String, Path, description = "VM id (UUID)")),
    request_body = Envelope<PatchVirtualMachine>,
    responses((status = 200, body = Envelope<VirtualMachine>), (status = 400, body = ApiError), (status = 404, body = ApiError), (status = 409, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn patch(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<Envelope<PatchVirtualMachine>>,
) -> Result<Json<Envelope<VirtualMachine>>, ApiError> {
    Ok(Json(Envelope { object: vms::patch(&s, &caller, &id, req.object).await?.to_api() }))
}

/// Delete a virtual machine. It shows as DELETING until the backend has
/// removed everything it had; then it is gone (404).
#[utoipa::path(delete, path = "/api/fulfillment/v1/virtual_machines/{id}", tag = "virtual machines",
    params(("id" = String, Path, description = "VM id (UUID)"), DeleteQuery),
    responses((status = 202, body = Envelope<VirtualMachine>, description = "Deletion started"), (status = 404, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn remove(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<DeleteQuery>,
) -> Result<(StatusCode, Json<Envelope<VirtualMachine>>), ApiError> {
    let rec = vms::remove(&s, &caller, &id, q.retain_snapshots).await?;
    Ok((StatusCode::ACCEPTED, Json(Envelope { object: rec.to_api() })))
}

/// What a VM's deletion may ask.
#[derive(Debug, Default, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(super) struct DeleteQuery {
    /// Keep the VM's snapshots (by default they are deleted with it).
    #[serde(default)]
    pub(super) retain_snapshots: bool,
}

/// Restart a running virtual machine: its guest is stopped and booted again
/// (PROGRESSING, then READY once it answers).
#[utoipa::path(post, path = "/api/fulfillment/v1/virtual_machines/{id}/restart", tag = "virtual machines",
    params(("id" = String, Path, description = "VM id (UUID)")),
    responses((status = 202, body = Envelope<VirtualMachine>, description = "Restart requested"), (status = 404, body = ApiError), (status = 409, body = ApiError, description = "Stopped or being deleted")),
    security(("bearer" = [])))]
pub(super) async fn restart(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Envelope<VirtualMachine>>), ApiError> {
    let rec = vms::restart(&s, &caller, &id).await?;
    Ok((StatusCode::ACCEPTED, Json(Envelope { object: rec.to_api() })))
}
