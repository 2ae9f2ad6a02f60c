//! `volumes`: block storage that outlives VMs. Blank, or starting as an
//! image (a copy-on-write overlay: the image is never written); grows with
//! PATCH, even while attached; refused deletion while attached.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::{Json, Router};
use chrono::Utc;
use tracing::info;
use vmaas_model::{CreateObject, Envelope, ObjectKind, Page, PatchVolume, ValidationErrors, Volume, VolumeSpec, VolumeState};

use super::{ApiJson, ApiQuery, AppState, checked_name, images, scope, simple};
use crate::auth::Caller;
use crate::capacity::{self, Usage};
use crate::error::{ApiError, Code};
use crate::quota::{self, Amounts};
use crate::store::{VolumeKind, VolumeRecord};

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/volumes", get(list).post(create)).route("/volumes/{id}", get(read).patch(patch).delete(remove))
}

/// List volumes, oldest first.
#[utoipa::path(get, path = "/api/fulfillment/v1/volumes", tag = "volumes", params(simple::ListQuery),
    responses((status = 200, body = Page<Volume>), (status = 400, body = ApiError), (status = 401, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn list(
    State(s): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<simple::ListQuery>,
) -> Result<Response, ApiError> {
    simple::list::<VolumeKind>(&s, &caller, q, &VolumeState::ALL.iter().map(|x| x.as_str()).collect::<Vec<_>>()).await
}

/// Get one volume.
#[utoipa::path(get, path = "/api/fulfillment/v1/volumes/{id}", tag = "volumes",
    params(("id" = String, Path, description = "Volume id (UUID)")),
    responses((status = 200, body = Envelope<Volume>), (status = 404, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn read(State(s): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Response, ApiError> {
    simple::read::<VolumeKind>(&s, &caller, &id).await
}

/// Refuses a source image the catalog lacks, cannot use, or whose disk is
/// larger than the volume.
async fn check_source(s: &AppState, caller: &Caller, spec: &VolumeSpec, errs: &mut ValidationErrors) -> Result<(), ApiError> {
    let Some(name) = spec.source_image.as_deref() else { return Ok(()) };
    if let Some(i) = s.store.visible_image(&caller.tenant, name).await? {
        let too_small = i.status.virtual_size > 0 && spec.size.to_units_ceil().is_some_and(|b| b < i.status.virtual_size);
        if i.status.state == vmaas_model::image::ImageState::Failed {
            errs.push(
                "object.spec.source_image",
                format!("image {name:?} could not be imported: {}", i.status.message.clone().unwrap_or_default()),
            );
        } else if too_small {
            let why = format!("image {name:?} holds a {} byte disk: the volume must be at least that large", i.status.virtual_size);
            errs.push("object.spec.size", why);
        }
        return Ok(());
    }
    let Some(catalog) = images::catalog(s).await? else {
        errs.push("object.spec.source_image", format!("the {} backend has no images", s.backend.name()));
        return Ok(());
    };
    let names = || catalog.iter().map(|i| i.name.as_str()).collect::<Vec<_>>().join(", ");
    let Some(image) = catalog.iter().find(|i| i.name == name) else {
        errs.push("object.spec.source_image", format!("there is no image {name:?}; images are {}", names()));
        return Ok(());
    };
    if let Some(p) = &image.problem {
        errs.push("object.spec.source_image", format!("image {name:?} cannot be used: {p}"));
    } else if spec.size.to_units_ceil().is_some_and(|b| b < image.virtual_size) {
        let why = format!("image {name:?} holds a {} byte disk: the volume must be at least that large", image.virtual_size);
        errs.push("object.spec.size", why);
    }
    Ok(())
}

/// Create a volume (`spec.size`, optionally `spec.source_image`); it is
/// READY once its disk is made.
#[utoipa::path(post, path = "/api/fulfillment/v1/volumes", tag = "volumes",
    request_body = Envelope<CreateObject<VolumeSpec>>,
    responses((status = 201, body = Envelope<Volume>), (status = 400, body = ApiError), (status = 409, body = ApiError),
        (status = 429, body = ApiError, description = "The host's disk or the tenant's disk quota has no room for it")),
    security(("bearer" = [])))]
pub(super) async fn create(
    State(s): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<Envelope<CreateObject<VolumeSpec>>>,
) -> Result<(StatusCode, Json<Envelope<Volume>>), ApiError> {
    let obj = req.object;
    let mut errs = ValidationErrors::default();
    let name = checked_name(obj.requested_name(), &mut errs);
    let labels = vmaas_model::Labels::from_input(obj.metadata.as_ref(), &mut errs);
    match obj.spec.check("object.spec") {
        Ok(()) => check_source(&s, &caller, &obj.spec, &mut errs).await?,
        Err(e) => errs.extend(e),
    }
    let (Some(name), true) = (name, errs.is_empty()) else { return Err(ApiError::invalid(errs)) };
    let mut rec = VolumeRecord::new(uuid::Uuid::new_v4().to_string(), &caller.tenant, &name, &caller.subject, obj.spec, Utc::now());
    rec.labels = labels;
    let image = match rec.spec.source_image.as_deref() {
        Some(name) => images::imported_id(&s, &caller, name).await?,
        None => None,
    };
    let refs = image.into_iter().map(|i| (i, "image".to_owned())).collect();
    let adm = s.admit().await?;
    let s = adm.state().clone();
    quota::enforce(&s.store, &caller.tenant, Amounts::volume(&rec.spec.size)).await?;
    fits(&s, Usage::volume(&rec.spec.size), None).await?;
    s.store.insert_record(&rec, refs).await.map_err(|e| match e {
        crate::store::StoreError::MissingReference(_) => ApiError::field("object.spec.source_image", "the image was deleted meanwhile"),
        other => other.into(),
    })?;
    adm.commit().await?;
    s.queue.enqueue(ObjectKind::Volume, &rec.id);
    info!(volume = %rec.id, name = %rec.name, size = %rec.spec.size, image = ?rec.spec.source_image, tenant = %rec.tenant, "volume created");
    Ok((StatusCode::CREATED, Json(Envelope { object: rec.to_api() })))
}

/// Refuses (429 naming `disk`) a volume of `asked` (replacing the volume
/// `replacing`) that the host's disk cannot hold beside the VMs' disks and
/// the other volumes. Call it under the admission lock.
async fn fits(s: &AppState, asked: Usage, replacing: Option<&str>) -> Result<(), ApiError> {
    let Some(host) = s.backend.capacity() else { return Ok(()) };
    Ok(capacity::check(&host, &s.overcommit, capacity::held(&s.store, None, replacing).await?, asked)?)
}

/// Grow a volume (`spec.size`; it never shrinks). A running VM that has
/// it sees the new size at once.
#[utoipa::path(patch, path = "/api/fulfillment/v1/volumes/{id}", tag = "volumes",
    params(("id" = String, Path, description = "Volume id (UUID)")),
    request_body = Envelope<PatchVolume>,
    responses((status = 200, body = Envelope<Volume>), (status = 400, body = ApiError), (status = 404, body = ApiError), (status = 409, body = ApiError),
        (status = 429, body = ApiError, description = "The host's disk or the tenant's disk quota has no room for the growth")),
    security(("bearer" = [])))]
pub(super) async fn patch(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<Envelope<PatchVolume>>,
) -> Result<Json<Envelope<Volume>>, ApiError> {
    let current = s.store.get_record::<VolumeKind>(&id, &scope(&caller)).await?;
    let p = req.object;
    let expected = p.metadata.as_ref().and_then(|m| m.version).unwrap_or(current.version);
    let spec = current.spec.patched(&p.spec).map_err(ApiError::invalid)?;
    let current = simple::relabelled(current, p.metadata.as_ref())?;
    let adm = s.admit().await?;
    let s = adm.state().clone();
    quota::enforce(&s.store, &current.tenant, Amounts::volume(&spec.size).beyond(Amounts::volume(&current.spec.size))).await?;
    if spec.size != current.spec.size {
        fits(&s, Usage::volume(&spec.size), Some(&current.id)).await?;
    }
    let updated = s.store.update_record_spec(&current, expected, spec, Utc::now()).await?;
    adm.commit().await?;
    s.queue.enqueue(ObjectKind::Volume, &id);
    info!(volume = %id, size = %updated.spec.size, "volume resized");
    Ok(Json(Envelope { object: updated.to_api() }))
}

/// Delete a volume and its data; refused (409 naming the VM) while attached.
#[utoipa::path(delete, path = "/api/fulfillment/v1/volumes/{id}", tag = "volumes",
    params(("id" = String, Path, description = "Volume id (UUID)")),
    responses((status = 202, body = Envelope<Volume>, description = "Deletion started"), (status = 404, body = ApiError),
        (status = 409, body = ApiError, description = "FAILED_PRECONDITION: it is attached to a VM")),
    security(("bearer" = [])))]
pub(super) async fn remove(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Envelope<Volume>>), ApiError> {
    // Under the admission lock: no attachment is made between the check and the mark.
    let adm = s.admit().await?;
    let s = adm.state().clone();
    let volume = s.store.get_record::<VolumeKind>(&id, &scope(&caller)).await?;
    let holder = s.store.referrers(&volume.id).await?.into_iter().find(|r| r.kind == ObjectKind::VolumeAttachment);
    if let Some(a) = holder.as_ref().map(crate::store::VolumeAttachmentRecord::from_row).transpose()? {
        let vm = s.store.get_vm(&a.spec.compute_instance, &crate::store::Scope::All).await.map(|v| v.name).unwrap_or_default();
        let message = format!(
            "volume {:?} is attached to virtual machine {vm:?} ({}) by attachment {:?}; detach it first",
            volume.name, a.spec.compute_instance, a.name
        );
        return Err(ApiError::new(StatusCode::CONFLICT, Code::FailedPrecondition, message));
    }
    let out = simple::remove::<VolumeKind>(&s, &caller, &id).await?;
    adm.commit().await?;
    Ok(out)
}
