//! `compute_instance_templates`: OSAC's `osac.public.v1` view of the same
//! templates `virtual_machine_templates` serves (see
//! `vmaas_model::template::view` for how the two differ). Each handler
//! reads the request in the view's names, calls [`crate::app::templates`]
//! (whose checks say administrators write), and answers in the view.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};
use vmaas_model::template::view::{from_compute_instance_template, to_compute_instance_template};
use vmaas_model::{Envelope, VirtualMachineTemplate};

use super::extract::ApiJson;
use super::extract::ApiQuery;
use super::query::page;
use super::templates::ListQuery;
use crate::app::templates;
use crate::auth::Caller;
use crate::decode::decode;
use crate::error::ApiError;
use crate::state::AppState;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/compute_instance_templates", get(list).post(create))
        .route("/compute_instance_templates/{id}", get(read).patch(patch).delete(remove))
}

/// List compute instance templates (the templates, in OSAC's public names).
#[utoipa::path(get, path = "/api/fulfillment/v1/compute_instance_templates", tag = "templates", params(ListQuery),
    responses((status = 200, description = "`{\"items\": [compute instance templates], \"size\", \"total\"}`"), (status = 400, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn list(State(s): State<AppState>, _caller: Caller, ApiQuery(q): ApiQuery<ListQuery>) -> Result<Response, ApiError> {
    Ok(page(templates::list(&s, q.request()?, to_compute_instance_template).await?))
}

/// Get one compute instance template.
#[utoipa::path(get, path = "/api/fulfillment/v1/compute_instance_templates/{id}", tag = "templates",
    params(("id" = String, Path, description = "Template id")),
    responses((status = 200, description = "`{\"object\": compute instance template}`"), (status = 404, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn read(State(s): State<AppState>, _caller: Caller, Path(id): Path<String>) -> Result<Response, ApiError> {
    answer(StatusCode::OK, &templates::read(&s, &id).await?)
}

/// Publish a template given as a compute instance template (administrators only).
#[utoipa::path(post, path = "/api/fulfillment/v1/compute_instance_templates", tag = "templates",
    responses((status = 201, description = "`{\"object\": compute instance template}`"), (status = 400, body = ApiError), (status = 403, body = ApiError), (status = 409, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn create(
    State(s): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<Envelope<Value>>,
) -> Result<Response, ApiError> {
    let body = from_compute_instance_template(req.object, "object").map_err(ApiError::invalid)?;
    let t: Envelope<VirtualMachineTemplate> = decode(&serde_json::to_vec(&json!({"object": body})).map_err(ApiError::internal)?)?;
    answer(StatusCode::CREATED, &templates::create(&s, &caller, &t.object).await?)
}

/// Change the fields sent of a template (administrators only).
#[utoipa::path(patch, path = "/api/fulfillment/v1/compute_instance_templates/{id}", tag = "templates",
    params(("id" = String, Path, description = "Template id")),
    responses((status = 200, description = "`{\"object\": compute instance template}`"), (status = 400, body = ApiError), (status = 403, body = ApiError), (status = 404, body = ApiError), (status = 409, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn patch(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<Envelope<Value>>,
) -> Result<Response, ApiError> {
    let body = from_compute_instance_template(req.object, "object").map_err(ApiError::invalid)?;
    let Value::Object(fields) = body else { return Err(ApiError::field("object", "must be a JSON object")) };
    answer(StatusCode::OK, &templates::patch(&s, &caller, &id, &fields, None).await?)
}

/// Remove a template no VM uses (administrators only).
#[utoipa::path(delete, path = "/api/fulfillment/v1/compute_instance_templates/{id}", tag = "templates",
    params(("id" = String, Path, description = "Template id")),
    responses((status = 204, description = "Removed"), (status = 403, body = ApiError), (status = 404, body = ApiError), (status = 409, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn remove(State(s): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<StatusCode, ApiError> {
    templates::remove(&s, &caller, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `{"object": template}` in the view, with `status`.
fn answer(status: StatusCode, t: &VirtualMachineTemplate) -> Result<Response, ApiError> {
    let value = serde_json::to_value(t).map_err(ApiError::internal)?;
    Ok((status, Json(json!({"object": to_compute_instance_template(value)}))).into_response())
}
