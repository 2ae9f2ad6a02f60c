//! `virtual_machine_templates`: everyone lists and reads; administrators
//! publish. The work is [`crate::app::templates`]'s.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use vmaas_model::{Envelope, Page, VirtualMachineTemplate};

use super::extract::ApiJson;
use super::extract::ApiQuery;
use super::query::page;
use crate::app::templates;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/virtual_machine_templates", get(list).post(create))
        .route("/virtual_machine_templates/{id}", get(read).put(update).patch(patch).delete(remove))
}

/// Query of a template list.
pub(super) use super::query::PageQuery as ListQuery;

/// List templates.
#[utoipa::path(get, path = "/api/fulfillment/v1/virtual_machine_templates", tag = "templates", params(ListQuery),
    responses((status = 200, body = Page<VirtualMachineTemplate>), (status = 400, body = ApiError), (status = 401, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn list(
    State(s): State<AppState>,
    _caller: Caller,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<axum::response::Response, ApiError> {
    Ok(page(templates::list(&s, q.request()?, |t| t).await?))
}

/// Get one template.
#[utoipa::path(get, path = "/api/fulfillment/v1/virtual_machine_templates/{id}", tag = "templates",
    params(("id" = String, Path, description = "Template id")),
    responses((status = 200, body = Envelope<VirtualMachineTemplate>), (status = 404, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn read(
    State(s): State<AppState>,
    _caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Envelope<VirtualMachineTemplate>>, ApiError> {
    Ok(Json(Envelope { object: templates::read(&s, &id).await? }))
}

/// Publish a template (administrators only).
#[utoipa::path(post, path = "/api/fulfillment/v1/virtual_machine_templates", tag = "templates",
    request_body = Envelope<VirtualMachineTemplate>,
    responses((status = 201, body = Envelope<VirtualMachineTemplate>), (status = 400, body = ApiError), (status = 403, body = ApiError), (status = 409, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn create(
    State(s): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<Envelope<VirtualMachineTemplate>>,
) -> Result<(StatusCode, Json<Envelope<VirtualMachineTemplate>>), ApiError> {
    Ok((StatusCode::CREATED, Json(Envelope { object: templates::create(&s, &caller, &req.object).await? })))
}

/// Replace a template (administrators only). Send `metadata.version` to refuse lost updates.
#[utoipa::path(put, path = "/api/fulfillment/v1/virtual_machine_templates/{id}", tag = "templates",
    params(("id" = String, Path, description = "Template id")),
    request_body = Envelope<VirtualMachineTemplate>,
    responses((status = 200, body = Envelope<VirtualMachineTemplate>), (status = 400, body = ApiError), (status = 403, body = ApiError), (status = 404, body = ApiError), (status = 409, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn update(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<Envelope<VirtualMachineTemplate>>,
) -> Result<Json<Envelope<VirtualMachineTemplate>>, ApiError> {
    Ok(Json(Envelope { object: templates::update(&s, &caller, &id, &req.object).await? }))
}

/// Query of a template PATCH.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct PatchQuery {
    /// Fields to change, comma-separated dotted paths (OSAC's `update_mask`),
    /// e.g. `title,spec_defaults.memory`; a named field the body lacks is
    /// cleared. Absent: every field the body carries.
    pub(super) update_mask: Option<String>,
}

/// Change some fields of a template (administrators only), as OSAC's
/// `Update` with a field mask. `metadata.version`, when sent, must be current.
#[utoipa::path(patch, path = "/api/fulfillment/v1/virtual_machine_templates/{id}", tag = "templates",
    params(("id" = String, Path, description = "Template id"), PatchQuery),
    request_body(content = Object, description = "`{\"object\": {…}}` or the bare object: the fields to change"),
    responses((status = 200, body = Envelope<VirtualMachineTemplate>), (status = 400, body = ApiError), (status = 403, body = ApiError), (status = 404, body = ApiError), (status = 409, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn patch(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<PatchQuery>,
    ApiJson(req): ApiJson<Envelope<serde_json::Map<String, serde_json::Value>>>,
) -> Result<Json<Envelope<VirtualMachineTemplate>>, ApiError> {
    Ok(Json(Envelope { object: templates::patch(&s, &caller, &id, &req.object, q.update_mask.as_deref()).await? }))
}

/// Remove a template no VM uses (administrators only).
#[utoipa::path(delete, path = "/api/fulfillment/v1/virtual_machine_templates/{id}", tag = "templates",
    params(("id" = String, Path, description = "Template id")),
    responses((status = 204, description = "Removed"), (status = 403, body = ApiError), (status = 404, body = ApiError), (status = 409, body = ApiError, description = "Still used by VMs")),
    security(("bearer" = [])))]
pub(super) async fn remove(State(s): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<StatusCode, ApiError> {
    templates::remove(&s, &caller, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
