//! Importing images: `POST /images` (from an `http(s)` URL, or to be
//! uploaded), `PUT /images/{id}/content` (the upload, streamed to the
//! backend, never held whole in memory), `PATCH /images/{id}` (labels and
//! lifecycle), `DELETE /images/{id}` (refused while VMs or volumes use it)
//! and `POST /images:prune`. The work is [`crate::app::image_imports`]'s.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{patch, post, put};
use axum::{Json, Router};
use futures::TryStreamExt;
use vmaas_model::image::{Image, ImageSpec};
use vmaas_model::{CreateObject, Envelope, Page};

use super::extract::ApiJson;
use crate::app::image_imports::{self, PatchImage};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

/// Imports, uploads, changes, prunes and deletes of images (their reads are
/// [`super::images`]'s routes on the same paths).
pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/images", post(create))
        .route("/images:prune", post(prune))
        .route("/images/{id}", patch(change).delete(remove))
        .route("/images/{id}/content", put(upload).layer(axum::extract::DefaultBodyLimit::disable()))
}

/// Import an image: from `spec.source` (an `http(s)` URL), or, without
/// one, from the file uploaded next with `PUT /images/{id}/content`.
/// `spec.sha256` is checked; `spec.public` (administrators) publishes it.
#[utoipa::path(post, path = "/api/fulfillment/v1/images", tag = "images",
    request_body = Envelope<CreateObject<ImageSpec>>,
    responses((status = 201, body = Envelope<Image>), (status = 400, body = ApiError), (status = 403, body = ApiError), (status = 409, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn create(
    State(s): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<Envelope<CreateObject<ImageSpec>>>,
) -> Result<(StatusCode, Json<Envelope<Image>>), ApiError> {
    let rec = image_imports::create(&s, &caller, req.object).await?;
    Ok((StatusCode::CREATED, Json(Envelope { object: rec.to_api() })))
}

/// Upload the file of an image created without `spec.source`: streamed,
/// hashed and checked (qcow2 or raw; a qcow2 naming a backing file or an
/// external data file is refused) before it is usable.
#[utoipa::path(put, path = "/api/fulfillment/v1/images/{id}/content", tag = "images",
    params(("id" = String, Path, description = "Image id (UUID)")),
    request_body(content = Vec<u8>, content_type = "application/octet-stream"),
    responses((status = 200, body = Envelope<Image>), (status = 400, body = ApiError, description = "The file is refused; the image is FAILED, and a new upload may replace it"),
        (status = 404, body = ApiError), (status = 409, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn upload(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    body: Body,
) -> Result<Json<Envelope<Image>>, ApiError> {
    let stream = Box::pin(body.into_data_stream().map_err(std::io::Error::other));
    Ok(Json(Envelope { object: image_imports::upload(&s, &caller, &id, stream).await? }))
}

/// Change an imported image: its labels, or its lifecycle
/// (`DISK_IMAGE_LIFECYCLE_DEPRECATED`: still booted; `_OBSOLETE`: no new VM
/// boots it; `_AVAILABLE` again). The owner, or an administrator for a
/// public image. The catalog's images have no lifecycle.
#[utoipa::path(patch, path = "/api/fulfillment/v1/images/{id}", tag = "images",
    params(("id" = String, Path, description = "Image id or name")),
    request_body = Envelope<PatchImage>,
    responses((status = 200, body = Envelope<Image>), (status = 400, body = ApiError), (status = 403, body = ApiError), (status = 404, body = ApiError), (status = 409, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn change(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<Envelope<PatchImage>>,
) -> Result<Json<Envelope<Image>>, ApiError> {
    let rec = image_imports::change(&s, &caller, &id, req.object).await?;
    Ok(Json(Envelope { object: rec.to_api() }))
}

/// Delete an imported image and its file; refused (409 naming them) while
/// VMs boot from it or volumes are made from it.
#[utoipa::path(delete, path = "/api/fulfillment/v1/images/{id}", tag = "images",
    params(("id" = String, Path, description = "Image id (UUID) or name")),
    responses((status = 202, body = Envelope<Image>), (status = 403, body = ApiError), (status = 404, body = ApiError),
        (status = 409, body = ApiError, description = "FAILED_PRECONDITION: VMs or volumes use it")),
    security(("bearer" = [])))]
pub(super) async fn remove(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Envelope<Image>>), ApiError> {
    let rec = image_imports::remove(&s, &caller, &id).await?;
    Ok((StatusCode::ACCEPTED, Json(Envelope { object: rec.to_api() })))
}

/// Query of a prune.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct PruneQuery {
    /// Only list what would go.
    #[serde(default)]
    dry_run: bool,
    /// Only images unused for at least this long, e.g. `1h` (default: any unused image).
    unused_for: Option<String>,
}

/// Prune your imported images that no VM or volume uses (an administrator:
/// everyone's); with `dry_run`, only list them. An image a VM starts using
/// meanwhile is kept.
#[utoipa::path(post, path = "/api/fulfillment/v1/images:prune", tag = "images", params(PruneQuery),
    responses((status = 200, body = Page<Image>, description = "The images pruned (or, with dry_run, that would be)"), (status = 400, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn prune(
    State(s): State<AppState>,
    caller: Caller,
    axum::extract::Query(q): axum::extract::Query<PruneQuery>,
) -> Result<Json<Page<Image>>, ApiError> {
    let items = image_imports::prune(&s, &caller, q.dry_run, q.unused_for.as_deref()).await?;
    let n = items.len() as u64;
    Ok(Json(Page { items, size: n, total: n }))
}
