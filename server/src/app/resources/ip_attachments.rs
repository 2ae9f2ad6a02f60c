//! `external_ip_attachments`: one of the caller's external IPs on one of its
//! VMs (`spec.compute_instance`), whose exposed ports then answer on the
//! address. An address has one attachment at a time; a PATCH of
//! `spec.compute_instance` moves it (and the traffic) to another VM.

use axum::http::StatusCode;
use chrono::Utc;
use tracing::info;
use vmaas_model::{
    ExternalIp, ExternalIpAttachment, ExternalIpAttachmentSpec, ExternalIpAttachmentStatus, ObjectKind, PatchExternalIpAttachment,
    ValidationErrors,
};

use crate::app::kind::Kind;
use crate::app::scope::owned_by;
use crate::app::simple;
use crate::auth::Caller;
use crate::error::{ApiError, Code};
use crate::reconciler::{self, PassFuture, Reconciler};
use crate::state::AppState;
use crate::store::{ATTACHMENT_OF, AttachmentRecord, ExternalIpRecord, Scope};

const IP_FIELD: &str = "object.spec.external_ip";
const VM_FIELD: &str = "object.spec.compute_instance";

impl Kind for ExternalIpAttachment {
    type Patch = PatchExternalIpAttachment;

    fn check_spec(spec: &ExternalIpAttachmentSpec) -> Result<(), ValidationErrors> {
        spec.check("object.spec")
    }

    async fn create(s: &AppState, caller: &Caller, mut rec: AttachmentRecord) -> Result<AttachmentRecord, ApiError> {
        let scope = owned_by(&caller.tenant);
        let adm = s.admit().await?;
        let s = adm.state().clone();
        let ip = free_address(&s, &scope, &rec.spec.external_ip, None).await?;
        let vm =
            simple::row(&s, &scope, ObjectKind::VirtualMachine, rec.spec.compute_instance.as_deref().unwrap_or_default(), VM_FIELD).await?;
        rec.spec = ExternalIpAttachmentSpec { external_ip: ip.id.clone(), compute_instance: Some(vm.id.clone()), ..Default::default() };
        rec.status = ExternalIpAttachmentStatus { external_ip_address: ip.status.address.clone(), ..Default::default() };
        s.store.insert_record(&rec, vec![(ip.id.clone(), ATTACHMENT_OF.to_owned())]).await?;
        adm.commit().await?;
        for (kind, id) in
            [(ObjectKind::ExternalIpAttachment, &rec.id), (ObjectKind::ExternalIp, &ip.id), (ObjectKind::VirtualMachine, &vm.id)]
        {
            s.queue.enqueue(kind, id);
        }
        info!(attachment = %rec.id, address = %ip.status.address, vm = %vm.id, "external IP attached");
        Ok(rec)
    }

    async fn patch(s: &AppState, caller: &Caller, id: &str, p: PatchExternalIpAttachment) -> Result<AttachmentRecord, ApiError> {
        let (current, expected) = simple::changing::<Self>(s, caller, id, p.metadata.as_ref()).await?;
        let mut spec = current.spec.clone();
        if let Some(target) = p.spec.compute_instance {
            spec.compute_instance =
                Some(simple::row(s, &owned_by(&current.tenant), ObjectKind::VirtualMachine, &target, VM_FIELD).await?.id);
        }
        let current = simple::relabelled(current, p.metadata.as_ref())?;
        let updated = s.store.update_record_spec(&current, expected, spec, Utc::now()).await?;
        let vms = [current.spec.compute_instance.as_deref(), updated.spec.compute_instance.as_deref()];
        for vm in vms.into_iter().flatten() {
            s.queue.enqueue(ObjectKind::VirtualMachine, vm);
        }
        s.queue.enqueue(ObjectKind::ExternalIpAttachment, id);
        info!(attachment = %id, vm = ?updated.spec.compute_instance, "external IP attachment moved");
        Ok(updated)
    }

    fn reconcile<'a>(r: &'a Reconciler, id: &'a str) -> PassFuture<'a> {
        Box::pin(reconciler::external::reconcile_attachment(r, id))
    }
}

/// The caller's external IP named `reference`, not being deleted and held
/// by nothing (an attachment or a NAT gateway) but `except`.
pub(super) async fn free_address(s: &AppState, scope: &Scope, reference: &str, except: Option<&str>) -> Result<ExternalIpRecord, ApiError> {
    let ip = simple::find::<ExternalIp>(s, scope, reference.trim())
        .await?
        .ok_or_else(|| ApiError::field(IP_FIELD, format!("you have no external IP {reference:?}")))?;
    if ip.deleted_at.is_some() {
        return Err(ApiError::field(IP_FIELD, format!("external IP {:?} is being released", ip.name)));
    }
    let holders = s.store.referrers(&ip.id).await?;
    if let Some(h) = holders.iter().find(|a| Some(a.id.as_str()) != except) {
        let message = match h.kind {
            ObjectKind::ExternalIpAttachment => {
                format!(
                    "external IP {:?} is attached by {:?} already: move that attachment with PATCH, or delete it to free the address",
                    ip.name, h.name
                )
            }
            other => {
                format!("external IP {:?} is held by {} {:?}: an address serves one gateway or attachment", ip.name, other.human(), h.name)
            }
        };
        return Err(ApiError::new(StatusCode::CONFLICT, Code::FailedPrecondition, message));
    }
    Ok(ip)
}
