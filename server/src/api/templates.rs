//! `virtual_machine_templates`: everyone lists and reads; administrators publish.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use chrono::Utc;
use tracing::info;
use vmaas_model::{Envelope, Page, Template, ValidationErrors, VirtualMachineTemplate};

use super::extract::ApiJson;
use super::extract::ApiQuery;
use super::shared::Paging;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/virtual_machine_templates", get(list).post(create))
        .route("/virtual_machine_templates/{id}", get(read).put(update).patch(patch).delete(remove))
}

/// Checks a published template, prefixing every field path with `object.`.
fn check(t: &VirtualMachineTemplate) -> Result<VirtualMachineTemplate, ApiError> {
    let wire = t.clone().published();
    Template::compile(wire.clone()).map_err(|errs| {
        let mut out = ValidationErrors::default();
        for e in errs.0 {
            out.push(format!("object.{}", e.field), e.reason);
        }
        ApiError::invalid(out)
    })?;
    Ok(wire)
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
    listed(&s, q, |t| t).await
}

/// A page of templates, each rendered by `view` (filtered and sorted in that view).
pub(super) async fn listed(
    s: &AppState,
    q: ListQuery,
    view: fn(serde_json::Value) -> serde_json::Value,
) -> Result<axum::response::Response, ApiError> {
    let (offset, limit) = Paging { offset: q.offset, limit: q.limit }.resolve()?;
    let selection = super::query::Selection::parse(q.filter.as_deref(), q.order.as_deref())?;
    let (from, count) = super::query::Selection::window(&selection, offset, limit);
    let (items, total) = s.store.list_templates(from, count).await?;
    let items = items
        .iter()
        .map(|r| serde_json::to_value(r.to_api()).map(|v| std::sync::Arc::from(view(v).to_string())))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(super::query::Selection::respond(selection, items, total, offset, limit))
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
    let r = s.store.get_template(&id).await?;
    Ok(Json(Envelope { object: r.to_api() }))
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
    caller.require_admin("publish templates")?;
    let wire = check(&req.object)?;
    let r = s.store.insert_template(&wire, Utc::now()).await?;
    info!(template = %wire.id, by = %caller.subject, "template published");
    Ok((StatusCode::CREATED, Json(Envelope { object: r.to_api() })))
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
    caller.require_admin("change templates")?;
    if req.object.id != id {
        return Err(ApiError::field("object.id", format!("must match the id in the path ({id:?}), got {:?}", req.object.id)));
    }
    let version = req.object.metadata.as_ref().and_then(|m| m.version);
    replace(&s, &caller, &req.object, version).await
}

/// Checks `t` as a whole and stores it over the template of its id, if
/// that is still at `version` (when given).
async fn replace(
    s: &AppState,
    caller: &Caller,
    t: &VirtualMachineTemplate,
    version: Option<i64>,
) -> Result<Json<Envelope<VirtualMachineTemplate>>, ApiError> {
    let wire = check(t)?;
    let r = s.store.update_template(&wire, version, Utc::now()).await?;
    info!(template = %wire.id, version = r.version, by = %caller.subject, "template updated");
    Ok(Json(Envelope { object: r.to_api() }))
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
    caller.require_admin("change templates")?;
    let p = req.object;
    if let Some(pid) = p.get("id").filter(|v| v.as_str() != Some(id.as_str())) {
        return Err(ApiError::field("object.id", format!("must match the id in the path ({id:?}), got {pid}")));
    }
    let current = s.store.get_template(&id).await?;
    let sent = p.get("metadata").and_then(|m| m.get("version")).and_then(serde_json::Value::as_i64);
    let mut merged = serde_json::to_value(current.to_api()).map_err(|e| ApiError::internal(e.to_string()))?;
    super::mask::apply(&mut merged, &p, q.update_mask.as_deref());
    let body = serde_json::to_vec(&serde_json::json!({ "object": merged })).map_err(|e| ApiError::internal(e.to_string()))?;
    let next: Envelope<VirtualMachineTemplate> = super::extract::decode(&body)?;
    // Laid over the version read: a change in between is a 409, not lost.
    replace(&s, &caller, &next.object, Some(sent.unwrap_or(current.version))).await
}

/// Remove a template no VM uses (administrators only).
#[utoipa::path(delete, path = "/api/fulfillment/v1/virtual_machine_templates/{id}", tag = "templates",
    params(("id" = String, Path, description = "Template id")),
    responses((status = 204, description = "Removed"), (status = 403, body = ApiError), (status = 404, body = ApiError), (status = 409, body = ApiError, description = "Still used by VMs")),
    security(("bearer" = [])))]
pub(super) async fn remove(State(s): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<StatusCode, ApiError> {
    caller.require_admin("delete templates")?;
    s.store.delete_template(&id).await?;
    info!(template = %id, by = %caller.subject, "template deleted");
    Ok(StatusCode::NO_CONTENT)
}
