//! Imported images: an import (from an `http(s)` URL, or to be
//! uploaded), the upload (streamed to the backend, never held whole in
//! memory), a change of labels and lifecycle (OSAC's `DiskImage.lifecycle`:
//! an obsolete image boots no new VM, [`super::images::check_image`]), a
//! delete (refused while VMs or volumes use it) and a prune.

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use chrono::Utc;
use serde::Deserialize;
use tracing::info;
use vmaas_backend::{ImageImport, ImageObservation, Target, Upload};
use vmaas_model::image::{Image, ImageLifecyclePatch, ImageSpec, ImageState};
use vmaas_model::{CreateObject, MetadataInput, ObjectKind, ValidationErrors};

use super::images::{Named, in_catalog_named, lookup, users_of};
use super::scope::{checked_name, scope};
use crate::auth::Caller;
use crate::error::{ApiError, Code};
use crate::state::AppState;
use crate::store::{Filter, ImageRecord, Scope};

/// Refuses a name a catalog image, a public image or one of the tenant's has.
async fn check_free(s: &AppState, caller: &Caller, name: &str) -> Result<(), ApiError> {
    let taken = |why: String| ApiError::new(StatusCode::CONFLICT, Code::AlreadyExists, why);
    if in_catalog_named(s, name).await? {
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

/// Imports the image `obj` asks for: from `spec.source` (an `http(s)`
/// URL), or, without one, from the file uploaded next ([`upload`]).
/// `spec.public` (administrators) publishes it.
pub(crate) async fn create(s: &AppState, caller: &Caller, obj: CreateObject<ImageSpec>) -> Result<ImageRecord, ApiError> {
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
    let (Some(name), Some(mut spec), true) = (name, spec, errs.is_empty()) else { return Err(ApiError::invalid(errs)) };
    if spec.public {
        caller.require_admin("publish images (spec.public)")?;
    }
    let id = uuid::Uuid::new_v4().to_string();
    // The password is sealed and kept apart before the image exists, and
    // taken out of the spec: no copy of the image holds it.
    let sealed = match spec.registry_credentials.as_mut() {
        Some(c) => Some(s.keys.sealer().seal(&id, &std::mem::take(&mut c.password)).map_err(ApiError::internal)?),
        None => None,
    };
    if let Some(sealed) = &sealed {
        s.store.put_secret(&id, sealed).await?;
    }
    let made =
        admit_import(s, caller, ImageRecord::new(id.clone(), &caller.tenant, &name, &caller.subject, spec, Utc::now()), labels).await;
    if made.is_err() && sealed.is_some() {
        s.store.delete_secret(&id).await?;
    }
    let rec = made?;
    s.queue.enqueue(ObjectKind::Image, &rec.id);
    info!(image = %rec.id, name = %rec.name, source = ?rec.spec.source, tenant = %rec.tenant, "image import requested");
    Ok(rec)
}

/// Stores `rec` under admission: its name free, the tenant's imports within bounds.
async fn admit_import(s: &AppState, caller: &Caller, mut rec: ImageRecord, labels: vmaas_model::Labels) -> Result<ImageRecord, ApiError> {
    let adm = s.admit().await?;
    let s = adm.state().clone();
    check_free(&s, caller, &rec.name).await?;
    let (limit, from_url) = (s.image_imports_per_tenant, rec.spec.source.is_some());
    vmaas_admission::images::require_import_room(&s.store, &caller.tenant, limit, from_url, "object.spec.source").await?;
    rec.labels = labels;
    s.store.insert_record(&rec, Vec::new()).await?;
    adm.commit().await?;
    Ok(rec)
}

/// The caller's imported image `reference` ([`lookup`]), to change: a
/// public image only an administrator (or its tenant) changes (403), and a
/// name several tenants use must be given as an id (409).
pub(crate) async fn own(s: &AppState, caller: &Caller, reference: &str) -> Result<ImageRecord, ApiError> {
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

/// Takes the file of the caller's image `id` created without
/// `spec.source`: streamed, hashed and checked before it is usable.
pub(crate) async fn upload(s: &AppState, caller: &Caller, id: &str, body: Upload) -> Result<Image, ApiError> {
    let img = own(s, caller, id).await?;
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
    let spec = ImageImport { source: None, sha256: img.spec.sha256.clone(), max_bytes: s.image_max_bytes, credentials: None };
    let target = Target { id: img.id.clone(), tenant: img.tenant.clone(), name: img.name.clone(), version: img.version, spec };
    let seen = uploads.upload(&target, body).await.map_err(|e| conflict(e.to_string()))?;
    s.queue.enqueue(ObjectKind::Image, &img.id);
    if let ImageObservation::Failed(why) = seen {
        return Err(ApiError::field("content", why));
    }
    info!(image = %img.id, name = %img.name, "image uploaded");
    settled(s, caller, &img.id).await
}

/// Starts deleting the caller's imported image `id` and its file; refused
/// (409 naming them) while VMs boot from it or volumes are made from it.
pub(crate) async fn remove(s: &AppState, caller: &Caller, id: &str) -> Result<ImageRecord, ApiError> {
    if in_catalog_named(s, id).await? {
        return Err(ApiError::forbidden(format!("image {id:?} is a file of the administrator's catalog, not an imported image")));
    }
    let adm = s.admit().await?;
    let s = adm.state().clone();
    let img = own(&s, caller, id).await?;
    let using = users_of(&s, &img.references(), &img.tenant, img.spec.public, None).await?;
    if !using.is_empty() {
        let list: Vec<String> = using.iter().map(|(k, n)| format!("{k} {n:?}")).collect();
        let message = format!("image {:?} is used by {}: delete them first", img.name, list.join(", "));
        return Err(ApiError::new(StatusCode::CONFLICT, Code::FailedPrecondition, message));
    }
    let rec = s.store.mark_record_deleted::<Image>(&img.id, &scope(caller), Utc::now()).await?;
    adm.commit().await?;
    s.queue.enqueue(ObjectKind::Image, &img.id);
    info!(image = %img.id, name = %img.name, "image deletion requested");
    Ok(rec)
}

/// Prunes the caller's imported images (an administrator: everyone's)
/// that no VM or volume uses, unused for at least `unused_for` (e.g. `1h`);
/// with `dry_run`, only lists them.
pub(crate) async fn prune(s: &AppState, caller: &Caller, dry_run: bool, unused_for: Option<&str>) -> Result<Vec<Image>, ApiError> {
    let min = match unused_for.map(humantime::parse_duration).transpose() {
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
        if dry_run || crate::prune::prune(&s.store, &s.backend, &img).await? {
            items.push(img.to_api());
        }
    }
    info!(pruned = items.len(), dry_run, tenant = %caller.tenant, "image prune");
    Ok(items)
}

/// A change of an image: its labels, annotations and lifecycle.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PatchImage {
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

impl PatchImage {
    /// A change of the image `id` (when given): its new `metadata`, and
    /// its lifecycle as `spec` says.
    pub(crate) fn new(id: Option<String>, metadata: Option<MetadataInput>, spec: Option<ImageLifecyclePatch>) -> Self {
        Self { type_url: None, id, metadata, spec }
    }
}

/// Changes the caller's imported image `id`: its labels, or its lifecycle.
pub(crate) async fn change(s: &AppState, caller: &Caller, id: &str, p: PatchImage) -> Result<ImageRecord, ApiError> {
    if in_catalog_named(s, id).await? {
        return Err(ApiError::forbidden(format!("image {id:?} is a file of the administrator's catalog: it has no lifecycle")));
    }
    let img = own(s, caller, id).await?;
    let mut errs = ValidationErrors::default();
    if let Some(other) = p.id.as_deref().filter(|other| *other != img.id && *other != img.name) {
        errs.push("object.id", format!("must match the image in the path ({id:?}), got {other:?}"));
    }
    let moves = p.spec.unwrap_or_default();
    let labels = img.labels.patched(p.metadata.as_ref(), &mut errs);
    if let Some(m) = &p.metadata {
        m.check_owned(&img.tenant, &img.creators, false, &mut errs);
    }
    let moved = match moves.applied(Utc::now(), (img.spec.lifecycle, img.spec.deprecation.as_ref()), "object.spec") {
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
    Ok(updated)
}
