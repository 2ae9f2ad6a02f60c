//! `compute_instance_catalog_items`: OSAC's catalog items, whose objects
//! are flat (no `spec` or `status`), so they are read here with
//! [`Flat`] and served by [`crate::app::resources::catalog_items`] through
//! the shared operations.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::Value;
use vmaas_model::catalog_item::{Flat, PatchCatalogItem};
use vmaas_model::{CatalogItemSpec, ComputeInstanceCatalogItem, Envelope};

use super::extract::{ApiJson, ApiQuery};
use super::query::{ListQuery, page};
use super::shared::{enveloped, raw_json};
use crate::app::kind;
use crate::app::resources::catalog_items;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/compute_instance_catalog_items", get(list).post(create))
        .route("/compute_instance_catalog_items/{id}", get(read).patch(patch).delete(remove))
}

/// List catalog items: administrators see every one, tenants the published ones.
#[utoipa::path(get, path = "/api/fulfillment/v1/compute_instance_catalog_items", tag = "catalog items", params(ListQuery),
    responses((status = 200, description = "`{\"items\": [catalog items], \"size\", \"total\"}`; `?state=PUBLISHED|UNPUBLISHED`"), (status = 400, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn list(State(s): State<AppState>, caller: Caller, ApiQuery(q): ApiQuery<ListQuery>) -> Result<Response, ApiError> {
    Ok(page(catalog_items::list(&s, &caller, q.request()?).await?))
}

/// Get one catalog item (a tenant: a published one).
#[utoipa::path(get, path = "/api/fulfillment/v1/compute_instance_catalog_items/{id}", tag = "catalog items",
    params(("id" = String, Path, description = "Catalog item id")),
    responses((status = 200, body = Envelope<ComputeInstanceCatalogItem>), (status = 404, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn read(State(s): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Response, ApiError> {
    Ok(raw_json(enveloped(&catalog_items::read(&s, &caller, &id).await?)))
}

/// Make a catalog item (administrators): `title`, `description`, `template`, `published`, `field_definitions`.
#[utoipa::path(post, path = "/api/fulfillment/v1/compute_instance_catalog_items", tag = "catalog items",
    request_body = Envelope<CatalogItemSpec>,
    responses((status = 201, body = Envelope<ComputeInstanceCatalogItem>), (status = 400, body = ApiError), (status = 403, body = ApiError), (status = 409, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn create(
    State(s): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<Envelope<Value>>,
) -> Result<(StatusCode, Json<Envelope<ComputeInstanceCatalogItem>>), ApiError> {
    let flat = Flat::<CatalogItemSpec>::read(req.object).map_err(ApiError::invalid)?;
    let rec = kind::create::<ComputeInstanceCatalogItem>(&s, &caller, flat.into()).await?;
    Ok((StatusCode::CREATED, Json(Envelope { object: rec.to_api() })))
}

/// Change a catalog item (administrators): the fields given replace its own; VMs made already keep their template.
#[utoipa::path(patch, path = "/api/fulfillment/v1/compute_instance_catalog_items/{id}", tag = "catalog items",
    params(("id" = String, Path, description = "Catalog item id")),
    request_body = Envelope<PatchCatalogItem>,
    responses((status = 200, body = Envelope<ComputeInstanceCatalogItem>), (status = 400, body = ApiError), (status = 403, body = ApiError), (status = 404, body = ApiError), (status = 409, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn patch(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<Envelope<Value>>,
) -> Result<Json<Envelope<ComputeInstanceCatalogItem>>, ApiError> {
    let flat = Flat::<PatchCatalogItem>::read(req.object).map_err(ApiError::invalid)?;
    crate::app::simple::require_id(&id, flat.id.as_deref())?;
    let change = PatchCatalogItem { metadata: flat.metadata, ..flat.rest };
    let rec = kind::patch::<ComputeInstanceCatalogItem>(&s, &caller, &id, change).await?;
    Ok(Json(Envelope { object: rec.to_api() }))
}

/// Delete a catalog item (administrators); refused (409 naming them) while VMs use it.
#[utoipa::path(delete, path = "/api/fulfillment/v1/compute_instance_catalog_items/{id}", tag = "catalog items",
    params(("id" = String, Path, description = "Catalog item id")),
    responses((status = 202, body = Envelope<ComputeInstanceCatalogItem>), (status = 403, body = ApiError), (status = 404, body = ApiError), (status = 409, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn remove(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Envelope<ComputeInstanceCatalogItem>>), ApiError> {
    let rec = kind::remove::<ComputeInstanceCatalogItem>(&s, &caller, &id).await?;
    Ok((StatusCode::ACCEPTED, Json(Envelope { object: rec.to_api() })))
}
