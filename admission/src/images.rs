//! The imported image a VM boots: the one its tenant sees by that name or
//! URL, else, for a URL the backend can import, one made for the request
//! (seed 004's `vmDiskImageTemplate`: created on demand), named `url-` and a
//! hash of the URL, to be stored with the VM. Decided in the admission the
//! VM is stored in, so that two requests naming one URL make one image.

use vmaas_model::image::ImageSpec;
use vmaas_model::{MachineSpec, ObjectKind};
use vmaas_store::{BootImage, Filter, ImageRecord, Scope, Store};

use crate::AdmissionError;

/// Refuses a new import from a URL for `tenant` (RESOURCE_EXHAUSTED
/// naming `field`) while it has `limit` under way (`--image-imports-per-tenant`),
/// and any import once the tenant holds all of its disk quota: the one
/// check of every import, whether `POST /images` or a VM's create asks
/// for it. Call it in the admission the import is stored in.
pub async fn require_import_room(store: &Store, tenant: &str, limit: usize, from_url: bool, field: &str) -> Result<(), AdmissionError> {
    if from_url {
        let under_way = imports_under_way(store, tenant, limit).await?;
        if under_way >= limit {
            return Err(AdmissionError::exhausted(
                field,
                format!(
                    "{under_way} imports from a URL are under way for tenant {tenant:?}, the most it may have at once (--image-imports-per-tenant {limit}); wait for one to finish"
                ),
            ));
        }
    }
    crate::quota::require_disk_left(store, tenant, "an image import").await
}

/// How many of `tenant`'s imports from a URL are under way (counted up to
/// `enough`: the store reads the tenant's pending and importing images only).
/// Counted by id: an import that moves from pending to importing between
/// the two reads is one import, not two.
async fn imports_under_way(store: &Store, tenant: &str, enough: usize) -> Result<usize, AdmissionError> {
    let mut seen = std::collections::HashSet::new();
    for state in ["IMAGE_STATE_PENDING", "IMAGE_STATE_IMPORTING"] {
        let f = Filter {
            state: Some(state.to_owned()),
            limit: u64::try_from(enough).unwrap_or(u64::MAX).saturating_add(1),
            ..Filter::default()
        };
        let (rows, _) = store.list(ObjectKind::Image, &Scope::Tenant(tenant.to_owned()), &f).await?;
        let under_way = rows
            .iter()
            .filter(|r| r.deleted_at.is_none())
            .filter_map(|r| ImageRecord::from_row(r).ok())
            .filter(|i| i.spec.source.is_some())
            .map(|i| i.id);
        seen.extend(under_way);
    }
    Ok(seen.len())
}

/// The imported image `machine` boots, for `tenant` (`subject` makes an
/// image made on demand): none when it boots an image of the backend's
/// catalog (or a URL a backend that does not import; its catalog decides).
/// An image made on demand passes [`require_import_room`] first, with
/// `imports`, the backend's limit of imports under way per tenant (none:
/// the backend does not import).
pub async fn boot_image(
    store: &Store,
    tenant: &str,
    subject: &str,
    machine: &MachineSpec,
    imports: Option<usize>,
) -> Result<Option<BootImage>, AdmissionError> {
    let url = &machine.boot.image;
    if let Some(img) = store.visible_image(tenant, url).await? {
        return Ok(Some(BootImage { id: img.id, new: None }));
    }
    let Some(limit) = imports.filter(|_| machine.boot.is_url()) else {
        return Ok(None);
    };
    require_import_room(store, tenant, limit, true, "spec.image").await?;
    let spec = ImageSpec { source: Some(url.to_owned()), description: format!("imported on demand from {url}"), ..Default::default() };
    let rec = ImageRecord::new(uuid::Uuid::new_v4().to_string(), tenant, &on_demand_name(url), subject, spec, chrono::Utc::now());
    Ok(Some(BootImage { id: rec.id.clone(), new: Some(rec) }))
}

/// The name of the image made on demand from `url`: `url-` and its FNV-1a hash.
pub fn on_demand_name(url: &str) -> String {
    let h = url.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    format!("url-{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_url_one_name() {
        let a = on_demand_name("https://example.org/a.qcow2");
        assert_eq!(a, on_demand_name("https://example.org/a.qcow2"));
        assert_ne!(a, on_demand_name("https://example.org/b.qcow2"));
        assert!(a.starts_with("url-") && a.len() == 20, "{a}");
    }
}
