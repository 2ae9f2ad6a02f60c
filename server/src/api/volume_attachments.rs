//! `volume_attachments`: one of the caller's volumes on one of its VMs. A
//! running VM gets it by hotplug; deleting the attachment hot-unplugs it,
//! and the attachment is gone once the guest has released the disk. A
//! volume has one attachment at a time.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::{Json, Router};
use chrono::Utc;
use tracing::info;
use vmaas_model::volume::disk_serial;
use vmaas_model::{
    CreateObject, Envelope, ObjectKind, Page, ValidationErrors, VolumeAttachment, VolumeAttachmentSpec, VolumeAttachmentState,
    VolumeAttachmentStatus,
};

use super::{ApiJson, ApiQuery, AppState, checked_name, owned_by, simple};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::store::{VOLUME_OF, VolumeAttachmentKind, VolumeAttachmentRecord};

const VM_FIELD: &str = "object.spec.compute_instance";

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/volume_attachments", get(list).post(create)).route("/volume_attachments/{id}", get(read).delete(remove))
}

/// List volume attachments, oldest first.
#[utoipa::path(get, path = "/api/fulfillment/v1/volume_attachments", tag = "volumes", params(simple::ListQuery),
    responses((status = 200, body = Page<VolumeAttachment>), (status = 400, body = ApiError), (status = 401, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn list(
    State(s): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<simple::ListQuery>,
) -> Result<Response, ApiError> {
    let states: Vec<&'static str> = VolumeAttachmentState::ALL.iter().map(|x| x.as_str()).collect();
    simple::list::<VolumeAttachmentKind>(&s, &caller, q, &states).await
}

/// Get one volume attachment.
#[utoipa::path(get, path = "/api/fulfillment/v1/volume_attachments/{id}", tag = "volumes",
    params(("id" = String, Path, description = "Attachment id (UUID)")),
    responses((status = 200, body = Envelope<VolumeAttachment>), (status = 404, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn read(State(s): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Response, ApiError> {
    simple::read::<VolumeAttachmentKind>(&s, &caller, &id).await
}

/// Attach a volume to a VM: hotplugged if the VM runs, else there when it starts.
#[utoipa::path(post, path = "/api/fulfillment/v1/volume_attachments", tag = "volumes",
    request_body = Envelope<CreateObject<VolumeAttachmentSpec>>,
    responses((status = 201, body = Envelope<VolumeAttachment>), (status = 400, body = ApiError),
        (status = 409, body = ApiError, description = "The name is taken, or the volume is attached already")),
    security(("bearer" = [])))]
pub(super) async fn create(
    State(s): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<Envelope<CreateObject<VolumeAttachmentSpec>>>,
) -> Result<(StatusCode, Json<Envelope<VolumeAttachment>>), ApiError> {
    let obj = req.object;
    let mut errs = ValidationErrors::default();
    let name = checked_name(obj.requested_name(), &mut errs);
    let labels = vmaas_model::Labels::from_input(obj.metadata.as_ref(), &mut errs);
    if let Err(e) = obj.spec.check("object.spec") {
        errs.extend(e);
    }
    let (Some(name), true) = (name, errs.is_empty()) else { return Err(ApiError::invalid(errs)) };
    let scope = owned_by(&caller.tenant);
    let adm = s.admit().await?;
    let s = adm.state().clone();
    let volume = vmaas_admission::volumes::free_volume(&s.store, &scope, &obj.spec.volume).await?;
    let vm = simple::row(&s, &scope, ObjectKind::VirtualMachine, &obj.spec.compute_instance, VM_FIELD).await?;
    let spec = VolumeAttachmentSpec { volume: volume.id.clone(), compute_instance: vm.id.clone(), auto_delete: obj.spec.auto_delete };
    let mut rec = VolumeAttachmentRecord::new(uuid::Uuid::new_v4().to_string(), &caller.tenant, &name, &caller.subject, spec, Utc::now());
    rec.labels = labels;
    rec.status = VolumeAttachmentStatus { serial: Some(disk_serial(&volume.id)), ..Default::default() };
    s.store.insert_record(&rec, vec![(volume.id.clone(), VOLUME_OF.to_owned())]).await?;
    adm.commit().await?;
    for (kind, id) in [(ObjectKind::VolumeAttachment, &rec.id), (ObjectKind::Volume, &volume.id), (ObjectKind::VirtualMachine, &vm.id)] {
        s.queue.enqueue(kind, id);
    }
    info!(attachment = %rec.id, volume = %volume.id, vm = %vm.id, "volume attached");
    Ok((StatusCode::CREATED, Json(Envelope { object: rec.to_api() })))
}

/// Detach: a running guest gets a hot-unplug request; the attachment is
/// gone once the guest released the disk (`VOLUME_ATTACHMENT_STATE_DELETING` until then).
#[utoipa::path(delete, path = "/api/fulfillment/v1/volume_attachments/{id}", tag = "volumes",
    params(("id" = String, Path, description = "Attachment id (UUID)")),
    responses((status = 202, body = Envelope<VolumeAttachment>, description = "Detaching"), (status = 404, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn remove(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Envelope<VolumeAttachment>>), ApiError> {
    let out = simple::remove::<VolumeAttachmentKind>(&s, &caller, &id).await?;
    s.queue.enqueue(ObjectKind::VirtualMachine, &out.1.object.spec.compute_instance);
    Ok(out)
}
