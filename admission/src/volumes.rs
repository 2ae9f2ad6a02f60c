//! A volume's one attachment: a volume may be attached to one VM at a
//! time, so an attachment is admitted only for the caller's volume that is
//! usable and held by no other attachment (found through the references
//! to it, not by reading every attachment).

use vmaas_model::{ValidationErrors, Volume, VolumeState};
use vmaas_store::{Scope, Store, VolumeRecord};

use crate::AdmissionError;

/// The field of an attachment that names its volume.
pub const VOLUME_FIELD: &str = "object.spec.volume";

fn invalid(reason: String) -> AdmissionError {
    let mut errs = ValidationErrors::default();
    errs.push(VOLUME_FIELD, reason);
    AdmissionError::Invalid(errs)
}

/// The caller's volume named `reference` (an id or a name, within
/// `scope`), usable and attached nowhere; else why not.
pub async fn free_volume(store: &Store, scope: &Scope, reference: &str) -> Result<VolumeRecord, AdmissionError> {
    let v =
        store.find_record::<Volume>(reference.trim(), scope).await?.ok_or_else(|| invalid(format!("you have no volume {reference:?}")))?;
    if v.deleted_at.is_some() {
        return Err(invalid(format!("volume {:?} is being deleted", v.name)));
    }
    if v.status.state == VolumeState::Failed {
        let why = v.status.message.as_deref().unwrap_or("its disk could not be made");
        return Err(invalid(format!("volume {:?} failed: {why}", v.name)));
    }
    if let Some(h) = store.volume_holder(&v.id).await? {
        let vm = store.get_vm(&h.spec.compute_instance, &Scope::All).await.map(|vm| vm.record.name).unwrap_or_default();
        let message = format!("volume {:?} is attached to virtual machine {vm:?} by attachment {:?}; detach it first", v.name, h.name);
        return Err(AdmissionError::Held(message));
    }
    Ok(v)
}
