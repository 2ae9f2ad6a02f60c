//! `external_ip_attachments`: one of the caller's external IPs on one of its
//! VMs (`spec.compute_instance`), whose exposed ports then answer on the
//! address. An address has one attachment at a time; a PATCH of
//! `spec.compute_instance` moves it (and the traffic) to another VM.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::{Json, Router};
use chrono::Utc;
use tracing::info;
use vmaas_model::{
    CreateObject, Envelope, ExternalIpAttachment, ExternalIpAttachmentSpec, ExternalIpAttachmentState, ExternalIpAttachmentStatus,
    ObjectKind, Page, PatchExternalIpAttachment, ValidationErrors,
};

use super::{ApiJson, ApiQuery, AppState, checked_name, owned_by, scope, simple};
use crate::auth::Caller;
use crate::error::{ApiError, Code};
use crate::store::{ATTACHMENT_OF, AttachmentKind, AttachmentRecord, ExternalIpKind, ExternalIpRecord, Scope};

const IP_FIELD: &str = "object.spec.external_ip";
const VM_FIELD: &str = "object.spec.compute_instance";

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/external_ip_attachments", get(list).post(create))
        .route("/external_ip_attachments/{id}", get(read).patch(patch).delete(remove))
}

/// List attachments, oldest first.
#[utoipa::path(get, path = "/api/fulfillment/v1/external_ip_attachments", tag = "external IPs", params(simple::ListQuery),
    responses((status = 200, body = Page<ExternalIpAttachment>), (status = 400, body = ApiError), (status = 401, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn list(
    State(s): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<simple::ListQuery>,
) -> Result<Response, ApiError> {
    let states: Vec<&'static str> = ExternalIpAttachmentState::ALL.iter().map(|x| x.as_str()).collect();
    simple::list::<AttachmentKind>(&s, &caller, q, &states).await
}

/// Get one attachment.
#[utoipa::path(get, path = "/api/fulfillment/v1/external_ip_attachments/{id}", tag = "external IPs",
    params(("id" = String, Path, description = "Attachment id (UUID)")),
    responses((status = 200, body = Envelope<ExternalIpAttachment>), (status = 404, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn read(State(s): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Response, ApiError> {
    simple::read::<AttachmentKind>(&s, &caller, &id).await
}

/// The caller's external IP named `reference`, not being deleted and held
/// by no other attachment than `except`.
async fn free_address(s: &AppState, scope: &Scope, reference: &str, except: Option<&str>) -> Result<ExternalIpRecord, ApiError> {
    let ip = simple::find::<ExternalIpKind>(s, scope, reference.trim())
        .await?
        .ok_or_else(|| ApiError::field(IP_FIELD, format!("you have no external IP {reference:?}")))?;
    if ip.deleted_at.is_some() {
        return Err(ApiError::field(IP_FIELD, format!("external IP {:?} is being released", ip.name)));
    }
    let holders = s.store.referrers(&ip.id).await?;
    if let Some(h) = holders.iter().find(|a| a.kind == ObjectKind::ExternalIpAttachment && Some(a.id.as_str()) != except) {
        let message = format!("external IP {:?} is attached by {:?} already; move that attachment with PATCH instead", ip.name, h.name);
        return Err(ApiError::new(StatusCode::CONFLICT, Code::FailedPrecondition, message));
    }
    Ok(ip)
}

/// Attach an external IP to a VM.
#[utoipa::path(post, path = "/api/fulfillment/v1/external_ip_attachments", tag = "external IPs",
    request_body = Envelope<CreateObject<ExternalIpAttachmentSpec>>,
    responses((status = 201, body = Envelope<ExternalIpAttachment>), (status = 400, body = ApiError),
        (status = 409, body = ApiError, description = "The name is taken, or the address is attached already")),
    security(("bearer" = [])))]
pub(super) async fn create(
    State(s): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<Envelope<CreateObject<ExternalIpAttachmentSpec>>>,
) -> Result<(StatusCode, Json<Envelope<ExternalIpAttachment>>), ApiError> {
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
    let ip = free_address(&s, &scope, &obj.spec.external_ip, None).await?;
    let vm =
        simple::row(&s, &scope, ObjectKind::VirtualMachine, obj.spec.compute_instance.as_deref().unwrap_or_default(), VM_FIELD).await?;
    let spec = ExternalIpAttachmentSpec { external_ip: ip.id.clone(), compute_instance: Some(vm.id.clone()), ..Default::default() };
    let mut rec = AttachmentRecord::new(uuid::Uuid::new_v4().to_string(), &caller.tenant, &name, &caller.subject, spec, Utc::now());
    rec.labels = labels;
    rec.status = ExternalIpAttachmentStatus { external_ip_address: ip.status.address.clone(), ..Default::default() };
    s.store.insert_record(&rec, vec![(ip.id.clone(), ATTACHMENT_OF.to_owned())]).await?;
    adm.commit().await?;
    for (kind, id) in [(ObjectKind::ExternalIpAttachment, &rec.id), (ObjectKind::ExternalIp, &ip.id), (ObjectKind::VirtualMachine, &vm.id)]
    {
        s.queue.enqueue(kind, id);
    }
    info!(attachment = %rec.id, address = %ip.status.address, vm = %vm.id, "external IP attached");
    Ok((StatusCode::CREATED, Json(Envelope { object: rec.to_api() })))
}

/// Move an attachment to another VM (`spec.compute_instance`): the address
/// leaves the old VM and answers with the new one's ports.
#[utoipa::path(patch, path = "/api/fulfillment/v1/external_ip_attachments/{id}", tag = "external IPs",
    params(("id" = String, Path, description = "Attachment id (UUID)")),
    request_body = Envelope<PatchExternalIpAttachment>,
    responses((status = 200, body = Envelope<ExternalIpAttachment>), (status = 400, body = ApiError), (status = 404, body = ApiError), (status = 409, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn patch(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<Envelope<PatchExternalIpAttachment>>,
) -> Result<Json<Envelope<ExternalIpAttachment>>, ApiError> {
    let scope = scope(&caller);
    let current = s.store.get_record::<AttachmentKind>(&id, &scope).await?;
    let p = req.object;
    let expected = p.metadata.as_ref().and_then(|m| m.version).unwrap_or(current.version);
    let mut spec = current.spec.clone();
    if let Some(target) = p.spec.compute_instance {
        spec.compute_instance = Some(simple::row(&s, &owned_by(&current.tenant), ObjectKind::VirtualMachine, &target, VM_FIELD).await?.id);
    }
    let current = simple::relabelled(current, p.metadata.as_ref())?;
    let updated = s.store.update_record_spec(&current, expected, spec, Utc::now()).await?;
    let vms = [current.spec.compute_instance.as_deref(), updated.spec.compute_instance.as_deref()];
    for vm in vms.into_iter().flatten() {
        s.queue.enqueue(ObjectKind::VirtualMachine, vm);
    }
    s.queue.enqueue(ObjectKind::ExternalIpAttachment, &id);
    info!(attachment = %id, vm = ?updated.spec.compute_instance, "external IP attachment moved");
    Ok(Json(Envelope { object: updated.to_api() }))
}

/// Detach: the address stops answering for the VM and is free to attach again.
#[utoipa::path(delete, path = "/api/fulfillment/v1/external_ip_attachments/{id}", tag = "external IPs",
    params(("id" = String, Path, description = "Attachment id (UUID)")),
    responses((status = 202, body = Envelope<ExternalIpAttachment>, description = "Detaching"), (status = 404, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn remove(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Envelope<ExternalIpAttachment>>), ApiError> {
    simple::remove::<AttachmentKind>(&s, &caller, &id).await
}
