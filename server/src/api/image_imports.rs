//! Importing images: `POST /images` (from an `http(s)` URL, or to be
//! uploaded), `PUT /images/{id}/content` (the upload, streamed to the
//! backend, never held whole in memory) and `DELETE /images/{id}` (refused
//! while VMs or volumes use it).

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{delete, post, put};
use axum::{Json, Router};
use chrono::Utc;
use futures::TryStreamExt;
use tracing::info;
use vmaas_backend::{ImageImport, ImageObservation, Target};
use vmaas_model::image::{Image, ImageSpec, ImageState};
use vmaas_model::{CreateObject, Envelope, ObjectKind, Page, ValidationErrors};

use super::extract::ApiJson;
use super::images::{Named, catalog, lookup, users_of};
use super::shared::checked_name;
use super::shared::scope;
use crate::auth::Caller;
use crate::error::{ApiError, Code};
use crate::state::AppState;
use crate::store::{Filter, ImageRecord, Scope};

/// Imports, uploads, prunes and deletes of images (their reads are
/// [`super::images`]'s routes on the same paths).
pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/images", post(create))
        .route("/images:prune", post(prune))
        .route("/images/{id}", delete(remove))
        .route("/images/{id}/content", put(upload).layer(axum::extract::DefaultBodyLimit::disable()))
}

/// Refuses a name a catalog image, a public image or one of the tenant's has.
async fn check_free(s: &AppState, caller: &Caller, name: &str) -> Result<(), ApiError> {
    let taken = |why: String| ApiError::new(StatusCode::CONFLICT, Code::AlreadyExists, why);
    if catalog(s).await?.unwrap_or_default().iter().any(|i| i.name == name) {
        return Err(taken(format!("image {name:?} is a public image of the catalog: choose another name")));
    }
    let by_name = Filter { name: Some(name.to_owned()), ..Filter::all() };
    let (rows, _) = s.store.list(ObjectKind::Image, &Scope::All, &by_name).await?;
    let all: Vec<ImageRecord> = rows.iter().map(ImageRecord::from_row).collect::<Result<_, _>>()?;
    if let Some(i) = all.iter().find(|i| i.spec.public || i.tenant == caller.tenant) {
        let whose = if i.spec.public { "a public image" } else { "one of your images" };
        return Err(taken(format!("image {name:?} exists already ({whose})")));
    }
    Ok(())
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
    let obj = req.object;
    let mut errs = ValidationErrors::default();
    let name = checked_name(obj.requested_name(), &mut errs);
    let spec = match obj.spec.checked("object.spec") {
        Ok(spec) => Some(spec),
        Err(e) => {
            errs.extend(e);
            None
        }
    };
    let labels = vmaas_model::Labels::from_input(obj.metadata.as_ref(), &mut errs);
    if let Some(m) = &obj.metadata {
        m.check_owned(&caller.tenant, std::slice::from_ref(&caller.subject), true, &mut errs);
    }
    let (Some(name), Some(spec), true) = (name, spec, errs.is_empty()) else { return Err(ApiError::invalid(errs)) };
    if spec.public {
        caller.require_admin("publish images (spec.public)")?;
    }
    let adm = s.admit().await?;
    let s = adm.state().clone();
    check_free(&s, &caller, &name).await?;
    let (limit, from_url) = (s.image_imports_per_tenant, spec.source.is_some());
    vmaas_admission::images::require_import_room(&s.store, &caller.tenant, limit, from_url, "object.spec.source").await?;
    let mut rec = ImageRecord::new(uuid::Uuid::new_v4().to_string(), &caller.tenant, &name, &caller.subject, spec, Utc::now());
    rec.labels = labels;
    s.store.insert_record(&rec, Vec::new()).await?;
    adm.commit().await?;
    s.queue.enqueue(ObjectKind::Image, &rec.id);
    info!(image = %rec.id, name = %rec.name, source = ?rec.spec.source, tenant = %rec.tenant, "image import requested");
    Ok((StatusCode::CREATED, Json(Envelope { object: rec.to_api() })))
}

/// The caller's imported image `reference` ([`lookup`]), to change: a
/// public image only an administrator (or its tenant) changes (403), and a
/// name several tenants use must be given as an id (409).
pub(super) async fn own(s: &AppState, caller: &Caller, reference: &str) -> Result<ImageRecord, ApiError> {
    match lookup(s, caller, reference).await? {
        Named::One(i) if i.spec.public && !caller.is_admin() && i.tenant != caller.tenant => {
            Err(ApiError::forbidden(format!("image {:?} is a public image: only administrators change it", i.name)))
        }
        Named::One(i) => Ok(*i),
        Named::Several(all) => {
            let tenants: Vec<&str> = all.iter().map(|i| i.tenant.as_str()).collect();
            Err(ApiError::precondition(format!(
                "image name {reference:?} is held by tenants {}: name the image by its id",
                tenants.join(", ")
            )))
        }
        Named::None => Err(ApiError::not_found("image", reference)),
    }
}

/// Waits (at most 2 s) until the reconciler has written what the backend
/// made of the upload, and returns the image as it is then.
async fn settled(s: &AppState, caller: &Caller, id: &str) -> Result<Image, ApiError> {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let img = own(s, caller, id).await?;
        if matches!(img.status.state, ImageState::Ready | ImageState::Failed) || Instant::now() > deadline {
            return Ok(img.to_api());
        }
        s.queue.wait_status(Duration::from_millis(50)).await;
    }
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
    let img = own(&s, &caller, &id).await?;
    let conflict = |m: String| ApiError::new(StatusCode::CONFLICT, Code::FailedPrecondition, m);
    if img.deleted_at.is_some() || img.spec.source.is_some() || img.status.state == ImageState::Ready {
        return Err(conflict(format!(
            "image {:?} takes no upload: it is imported from its source, imported already, or being deleted",
            img.name
        )));
    }
    let uploads = s.backend.image_uploads().ok_or_else(|| {
        ApiError::field("backend", format!("the {} backend does not take uploaded images (see docs/backends.md)", s.backend.name()))
    })?;
    let spec = ImageImport { source: None, sha256: img.spec.sha256.clone(), max_bytes: s.image_max_bytes };
    let target = Target { id: img.id.clone(), tenant: img.tenant.clone(), name: img.name.clone(), version: img.version, spec };
    let stream = body.into_data_stream().map_err(std::io::Error::other);
    let seen = uploads.upload(&target, Box::pin(stream)).await.map_err(|e| conflict(e.to_string()))?;
    s.queue.enqueue(ObjectKind::Image, &img.id);
    if let ImageObservation::Failed(why) = seen {
        return Err(ApiError::field("content", why));
    }
    info!(image = %img.id, name = %img.name, "image uploaded");
    Ok(Json(Envelope { object: settled(&s, &caller, &img.id).await? }))
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
    if catalog(&s).await?.unwrap_or_default().iter().any(|i| i.name == id) {
        return Err(ApiError::forbidden(format!("image {id:?} is a file of the administrator's catalog, not an imported image")));
    }
    let adm = s.admit().await?;
    let s = adm.state().clone();
    let img = own(&s, &caller, &id).await?;
    let using = users_of(&s, &img.references(), &img.tenant, img.spec.public, None).await?;
    if !using.is_empty() {
        let list: Vec<String> = using.iter().map(|(k, n)| format!("{k} {n:?}")).collect();
        let message = format!("image {:?} is used by {}: delete them first", img.name, list.join(", "));
        return Err(ApiError::new(StatusCode::CONFLICT, Code::FailedPrecondition, message));
    }
    let rec = s.store.mark_record_deleted::<Image>(&img.id, &scope(&caller), Utc::now()).await?;
    adm.commit().await?;
    s.queue.enqueue(ObjectKind::Image, &img.id);
    info!(image = %img.id, name = %img.name, "image deletion requested");
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
    let min = match q.unused_for.as_deref().map(humantime::parse_duration).transpose() {
        Ok(d) => chrono::Duration::from_std(d.unwrap_or_default()).unwrap_or(chrono::Duration::MAX),
        Err(e) => return Err(ApiError::field("unused_for", format!("not a duration such as 1h or 7d: {e}"))),
    };
    let now = Utc::now();
    let mut items = Vec::new();
    for img in s.store.all_records::<Image>().await? {
        let mine = caller.is_admin() || img.tenant == caller.tenant;
        let old_enough = img.status.unused_since.is_some_and(|t| now - t >= min) || min.is_zero();
        if !mine || !old_enough || !crate::prune::settled(&img) || !s.store.image_users(&img).await?.is_empty() {
            continue;
        }
        if q.dry_run || crate::prune::prune(&s.store, &s.backend, &img).await? {
            items.push(img.to_api());
        }
    }
    let n = items.len() as u64;
    info!(pruned = n, dry_run = q.dry_run, tenant = %caller.tenant, "image prune");
    Ok(Json(Page { items, size: n, total: n }))
}
