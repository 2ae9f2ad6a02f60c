//! `volumes`: block storage that outlives VMs. Blank, or starting as an
//! image (a copy-on-write overlay: the image is never written); grows with
//! PATCH, even while attached; refused deletion while attached.

use axum::http::StatusCode;
use chrono::Utc;
use tracing::info;
use vmaas_model::{ObjectKind, PatchVolume, ValidationErrors, Volume, VolumeSpec};

use crate::app::images;
use crate::app::kind::Kind;
use crate::app::simple;
use crate::auth::Caller;
use crate::capacity::{self, Usage};
use crate::error::{ApiError, Code};
use crate::quota::{self, Amounts};
use crate::reconciler::{self, PassFuture, Reconciler};
use crate::state::AppState;
use crate::store::VolumeRecord;

impl Kind for Volume {
    type Patch = PatchVolume;

    fn check_spec(spec: &VolumeSpec) -> Result<(), ValidationErrors> {
        spec.check("object.spec")
    }

    async fn check(s: &AppState, caller: &Caller, spec: &VolumeSpec, errs: &mut ValidationErrors) -> Result<(), ApiError> {
        check_source(s, caller, spec, errs).await
    }

    async fn create(s: &AppState, caller: &Caller, rec: VolumeRecord) -> Result<VolumeRecord, ApiError> {
        let image = match rec.spec.source_image.as_deref() {
            Some(name) => images::imported_id(s, caller, name).await?,
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
        Ok(rec)
    }

    async fn patch(s: &AppState, caller: &Caller, id: &str, p: PatchVolume) -> Result<VolumeRecord, ApiError> {
        let (current, expected) = simple::changing::<Self>(s, caller, id, p.metadata.as_ref()).await?;
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
        s.queue.enqueue(ObjectKind::Volume, id);
        info!(volume = %id, size = %updated.spec.size, "volume resized");
        Ok(updated)
    }

    async fn remove(s: &AppState, caller: &Caller, id: &str) -> Result<VolumeRecord, ApiError> {
        // Under the admission lock: no attachment is made between the check and the mark.
        let adm = s.admit().await?;
        let s = adm.state().clone();
        let volume = s.store.get_record::<Volume>(id, &crate::app::scope::scope(caller)).await?;
        if let Some(a) = s.store.volume_holder(&volume.id).await? {
            let vm = s.store.get_vm(&a.spec.compute_instance, &crate::store::Scope::All).await.map(|v| v.record.name).unwrap_or_default();
            let message = format!(
                "volume {:?} is attached to virtual machine {vm:?} ({}) by attachment {:?}; detach it first",
                volume.name, a.spec.compute_instance, a.name
            );
            return Err(ApiError::new(StatusCode::CONFLICT, Code::FailedPrecondition, message));
        }
        let out = simple::remove::<Volume>(&s, caller, id).await?;
        adm.commit().await?;
        Ok(out)
    }

    fn reconcile<'a>(r: &'a Reconciler, id: &'a str) -> PassFuture<'a> {
        Box::pin(reconciler::volume::reconcile_volume(r, id))
    }
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

/// Refuses (429 naming `disk`) a volume of `asked` (replacing the volume
/// `replacing`) that the host's disk cannot hold beside the VMs' disks and
/// the other volumes. Call it under the admission lock.
async fn fits(s: &AppState, asked: Usage, replacing: Option<&str>) -> Result<(), ApiError> {
    let Some(host) = s.backend.capacity() else { return Ok(()) };
    Ok(capacity::check(&host, &s.overcommit, capacity::held(&s.store, None, replacing).await?, asked)?)
}
