//! OSAC's `auto_external_ip_attachment`: a VM created with it gets an
//! external IP from the default pool and an attachment of that address to
//! it, made in the VM's own admission (the address is taken under its lock,
//! and nothing is stored unless the VM is), both named as the VM. Both
//! carry the label `vmaas.io/auto-external-ip-of` ([`AUTO_LABEL`]) with the VM's id, and go when the VM
//! goes (`reconciler::external::release_auto`).

use chrono::Utc;
use tracing::{info, warn};
use vmaas_model::external_ip::AUTO_LABEL;
use vmaas_model::{
    ExternalIp, ExternalIpAttachment, ExternalIpAttachmentSpec, ExternalIpAttachmentStatus, ExternalIpSpec, ExternalIpState,
    ExternalIpStatus, ObjectKind,
};

use crate::app::resources::external_ips;
use crate::app::scope::owned_by;
use crate::app::simple;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::quota::{self, Amounts};
use crate::state::AppState;
use crate::store::{ATTACHMENT_OF, AttachmentRecord, ExternalIpRecord, VmRecord};

/// The field a refusal names.
const FIELD: &str = "object.spec.auto_external_ip_attachment";

/// The external IP and attachment a new VM asks for, not stored yet.
pub(super) struct Planned {
    ip: ExternalIpRecord,
    attachment: AttachmentRecord,
}

/// What the new VM `vm` asks for, if it asks (`s` holds the admission
/// lock): its names free, the tenant's quota taken into account, an
/// address taken from the default pool.
pub(super) async fn plan(s: &AppState, caller: &Caller, vm: &VmRecord) -> Result<Option<Planned>, ApiError> {
    if !vm.spec.auto_external_ip_attachment {
        return Ok(None);
    }
    let Some(pool) = s.pools.get("") else { return Err(ApiError::field(FIELD, "the server offers no external IP pool")) };
    let scope = owned_by(&vm.tenant);
    let ip_taken = simple::find::<ExternalIp>(s, &scope, &vm.name).await?.is_some();
    if ip_taken || simple::find::<ExternalIpAttachment>(s, &scope, &vm.name).await?.is_some() {
        let kind = if ip_taken { "an external IP" } else { "an external IP attachment" };
        return Err(ApiError::field(FIELD, format!("you have {kind} named {:?} already: the automatic one is named as the VM", vm.name)));
    }
    quota::enforce(&s.store, &vm.tenant, Amounts::external_ip()).await?;
    let address = external_ips::allocate(s, pool).await?.to_string();
    let now = Utc::now();
    let mut ip = ExternalIpRecord::new(uuid(), &vm.tenant, &vm.name, &caller.subject, ExternalIpSpec { pool: pool.name.clone() }, now);
    ip.status =
        ExternalIpStatus { state: ExternalIpState::Allocated, address: address.clone(), pool: pool.name.clone(), ..Default::default() };
    let spec = ExternalIpAttachmentSpec { external_ip: ip.id.clone(), compute_instance: Some(vm.id.clone()), ..Default::default() };
    let mut attachment = AttachmentRecord::new(uuid(), &vm.tenant, &vm.name, &caller.subject, spec, now);
    attachment.status = ExternalIpAttachmentStatus { external_ip_address: address, ..Default::default() };
    for labels in [&mut ip.labels, &mut attachment.labels] {
        labels.labels.insert(AUTO_LABEL.into(), vm.id.clone());
    }
    Ok(Some(Planned { ip, attachment }))
}

/// Stores `p` once its VM `vm` is stored; if that fails, the VM goes too
/// (nothing half-made), and the error is returned.
pub(super) async fn store(s: &AppState, vm: &VmRecord, p: Planned) -> Result<(), ApiError> {
    let stored = async {
        s.store.insert_record(&p.ip, Vec::new()).await?;
        s.store.insert_record(&p.attachment, vec![(p.ip.id.clone(), ATTACHMENT_OF.to_owned())]).await
    };
    if let Err(e) = stored.await {
        warn!(vm = %vm.id, error = %e, "the automatic external IP could not be stored: the VM is removed");
        for id in [&p.ip.id, &vm.id] {
            if let Err(undo) = s.store.remove(id).await {
                warn!(id = %id, error = %undo, "undoing a create");
            }
        }
        return Err(e.into());
    }
    s.queue.enqueue(ObjectKind::ExternalIp, &p.ip.id);
    s.queue.enqueue(ObjectKind::ExternalIpAttachment, &p.attachment.id);
    info!(vm = %vm.id, address = %p.ip.status.address, "external IP allocated and attached with the VM");
    Ok(())
}

fn uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}
