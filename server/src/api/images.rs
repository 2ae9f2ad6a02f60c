//! `images`: the OS images VMs can boot from, read (their imports, uploads
//! and deletes are [`super::image_imports`]'s routes on the same paths).
//! What each answer holds is [`crate::app::images`]'s.

use axum::extract::{Path, Query, State};
use axum::routing::get;
use axum::{Json, Router};
use vmaas_model::image::Image;
use vmaas_model::{Envelope, Page};

use crate::app::images;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

/// The reads of images.
pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/images", get(list)).route("/images/{id}", get(read))
}

/// List the images VMs can boot from: the catalog's (by name), then the imported ones you see.
#[utoipa::path(get, path = "/api/fulfillment/v1/images", tag = "images",
    responses((status = 200, body = Page<Image>), (status = 401, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn list(State(s): State<AppState>, caller: Caller, Query(q): Query<NameQuery>) -> Result<Json<Page<Image>>, ApiError> {
    let items = images::list(&s, &caller, q.name.as_deref()).await?;
    let n = items.len() as u64;
    Ok(Json(Page { items, size: n, total: n }))
}

/// Query of the image list.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct NameQuery {
    /// Only the image with this exact name.
    name: Option<String>,
}

/// Get one image: a catalog image by name, an imported one by id or name.
#[utoipa::path(get, path = "/api/fulfillment/v1/images/{id}", tag = "images",
    params(("id" = String, Path, description = "Image name (catalog), or id or name (imported)")),
    responses((status = 200, body = Envelope<Image>), (status = 404, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn read(State(s): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Json<Envelope<Image>>, ApiError> {
    Ok(Json(Envelope { object: images::read(&s, &caller, &id).await? }))
}
