//! `PATCH /images/{id}`: an imported image's labels and lifecycle (OSAC's
//! `DiskImage.lifecycle`): its owner (an administrator, for a public image)
//! deprecates it, makes it obsolete, or makes it available again. An
//! obsolete image boots no new VM ([`super::images::check_image`]); the VMs
//! that boot it keep it. The catalog's images are the administrator's
//! files and have no lifecycle.

use axum::extract::{Path, State};
use axum::routing::patch;
use axum::{Json, Router};
use chrono::Utc;
use serde::Deserialize;
use tracing::info;
use vmaas_model::image::{Image, ImageLifecyclePatch};
use vmaas_model::{Envelope, MetadataInput, ValidationErrors};

use super::extract::ApiJson;
use super::image_imports::own;
use super::images::catalog;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/images/{id}", patch(change))
}

/// A change of an image: its labels, annotations and lifecycle.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct PatchImage {
    /// Accepted and ignored.
    #[serde(rename = "@type", default)]
    #[allow(dead_code)]
    type_url: Option<String>,
    /// Must be the id in the path, if sent.
    #[serde(default)]
    id: Option<String>,
    /// `labels` and `annotations` (each replaced whole when given), `version`.
    #[serde(default)]
    metadata: Option<MetadataInput>,
    /// `lifecycle`, and `deprecation.obsolescence_timestamp`.
    #[serde(default)]
    spec: Option<ImageLifecyclePatch>,
}

/// Change an imported image: its labels, or its lifecycle
/// (`DISK_IMAGE_LIFECYCLE_DEPRECATED`: still booted; `_OBSOLETE`: no new VM
/// boots it; `_AVAILABLE` again). The owner, or an administrator for a
/// public image.
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
    if catalog(&s).await?.unwrap_or_default().iter().any(|i| i.name == id) {
        return Err(ApiError::forbidden(format!("image {id:?} is a file of the administrator's catalog: it has no lifecycle")));
    }
    let img = own(&s, &caller, &id).await?;
    let p = req.object;
    let mut errs = ValidationErrors::default();
    if let Some(other) = p.id.as_deref().filter(|other| *other != img.id && *other != img.name) {
        errs.push("object.id", format!("must match the image in the path ({id:?}), got {other:?}"));
    }
    let change = p.spec.unwrap_or_default();
    let labels = img.labels.patched(p.metadata.as_ref(), &mut errs);
    if let Some(m) = &p.metadata {
        m.check_owned(&img.tenant, &img.creators, false, &mut errs);
    }
    let moved = match change.applied(Utc::now(), (img.spec.lifecycle, img.spec.deprecation.as_ref()), "object.spec") {
        Ok(m) => Some(m),
        Err(e) => {
            errs.0.extend(e.0);
            None
        }
    };
    let (Some((lifecycle, deprecation)), true) = (moved, errs.is_empty()) else { return Err(ApiError::invalid(errs)) };
    let expected = p.metadata.as_ref().and_then(|m| m.version).unwrap_or(img.version);
    let mut current = img.clone();
    current.labels = labels;
    let mut spec = img.spec.clone();
    (spec.lifecycle, spec.deprecation) = (lifecycle, deprecation);
    let updated = s.store.update_record_spec(&current, expected, spec, Utc::now()).await?;
    info!(image = %img.id, name = %img.name, lifecycle = lifecycle.as_str(), "image changed");
    Ok(Json(Envelope { object: updated.to_api() }))
}
