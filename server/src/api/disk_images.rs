//! `disk_images`: OSAC's `osac.public.v1` view of the images `images`
//! serves (see `vmaas_model::image::disk_image` for how the two differ).
//! Each handler reads the request in the view's names, calls the images'
//! application functions and answers in the view.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};
use vmaas_model::image::disk_image::{from_disk_image, patch_of_disk_image, to_disk_image};
use vmaas_model::image::{Image, ImageSpec};
use vmaas_model::{CreateObject, Envelope};

use super::extract::{ApiJson, ApiQuery};
use super::query::{PageQuery, page};
use crate::app::disk_images::{self, in_view};
use crate::app::image_imports::{self, PatchImage};
use crate::app::images;
use crate::auth::Caller;
use crate::decode::decode;
use crate::error::ApiError;
use crate::state::AppState;

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/disk_images", get(list).post(create)).route("/disk_images/{id}", get(read).patch(update).delete(remove))
}

/// List disk images: the catalog's and the imported ones you see.
#[utoipa::path(get, path = "/api/fulfillment/v1/disk_images", tag = "disk images", params(PageQuery),
    responses((status = 200, description = "`{\"items\": [disk images], \"size\", \"total\"}`"), (status = 400, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn list(State(s): State<AppState>, caller: Caller, ApiQuery(q): ApiQuery<PageQuery>) -> Result<Response, ApiError> {
    let (listed, _) = disk_images::list(&s, &caller, q.request()?).await?;
    Ok(page(listed))
}

/// Get one disk image, by id or name.
#[utoipa::path(get, path = "/api/fulfillment/v1/disk_images/{id}", tag = "disk images",
    params(("id" = String, Path, description = "Image id or name")),
    responses((status = 200, description = "`{\"object\": disk image}`"), (status = 404, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn read(State(s): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Response, ApiError> {
    Ok(answer(StatusCode::OK, &images::read(&s, &caller, &id).await?))
}

/// Import a disk image from the `http(s)` URL in `spec.source_ref`.
#[utoipa::path(post, path = "/api/fulfillment/v1/disk_images", tag = "disk images",
    responses((status = 201, description = "`{\"object\": disk image}`, importing"), (status = 400, body = ApiError), (status = 409, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn create(
    State(s): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<Envelope<Value>>,
) -> Result<Response, ApiError> {
    if let Some(t) = req.object.get("@type").and_then(Value::as_str).filter(|t| !t.ends_with("osac.public.v1.DiskImage")) {
        return Err(ApiError::field("object.@type", format!("must be osac.public.v1.DiskImage, got {t}")));
    }
    let body = from_disk_image(req.object, "object").map_err(ApiError::invalid)?;
    let import: Envelope<CreateObject<ImageSpec>> =
        decode(&serde_json::to_vec(&json!({"object": body})).map_err(ApiError::internal)?).map_err(in_view)?;
    let made = disk_images::create(&s, &caller, import.object).await?;
    Ok(answer(StatusCode::CREATED, &made))
}

/// Update an imported disk image: its labels, and its lifecycle
/// (`DISK_IMAGE_LIFECYCLE_DEPRECATED`, `_OBSOLETE`: no new compute instance
/// boots it, `_AVAILABLE` again); what is fixed at import may be sent back unchanged.
#[utoipa::path(patch, path = "/api/fulfillment/v1/disk_images/{id}", tag = "disk images",
    params(("id" = String, Path, description = "Image id or name")),
    responses((status = 200, description = "`{\"object\": disk image}`"), (status = 400, body = ApiError), (status = 403, body = ApiError), (status = 404, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn update(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<Envelope<Value>>,
) -> Result<Response, ApiError> {
    let now = images::read(&s, &caller, &id).await?;
    let body = patch_of_disk_image(req.object, &to_disk_image(&now), "object").map_err(ApiError::invalid)?;
    let change: Envelope<PatchImage> = decode(&serde_json::to_vec(&json!({"object": body})).map_err(ApiError::internal)?)?;
    let changed = image_imports::change(&s, &caller, &id, change.object).await?;
    Ok(answer(StatusCode::OK, &changed.to_api()))
}

/// Delete an imported disk image (one no VM or volume uses).
#[utoipa::path(delete, path = "/api/fulfillment/v1/disk_images/{id}", tag = "disk images",
    params(("id" = String, Path, description = "Image id")),
    responses((status = 202, description = "`{\"object\": disk image}`, being deleted"), (status = 404, body = ApiError), (status = 409, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn remove(State(s): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Response, ApiError> {
    let gone = image_imports::remove(&s, &caller, &id).await?;
    Ok(answer(StatusCode::ACCEPTED, &gone.to_api()))
}

/// `{"object": image}` in the view, with `status`.
fn answer(status: StatusCode, image: &Image) -> Response {
    (status, Json(json!({"object": to_disk_image(image)}))).into_response()
}
