//! The imported image a VM boots: the one its tenant sees by that name or
//! URL, else, for a URL the backend can import, one made for the request
//! (seed 004's `vmDiskImageTemplate`: created on demand), named `url-` and a
//! hash of the URL, to be stored with the VM. Decided in the admission the
//! VM is stored in, so that two requests naming one URL make one image.

use vmaas_model::MachineSpec;
use vmaas_model::image::ImageSpec;
use vmaas_store::{BootImage, ImageRecord, Store};

use crate::AdmissionError;

/// The imported image `machine` boots, for `tenant` (`subject` makes an
/// image made on demand): none when it boots an image of the backend's
/// catalog (or a URL a backend that does not import; its catalog decides).
pub async fn boot_image(
    store: &Store,
    tenant: &str,
    subject: &str,
    machine: &MachineSpec,
    imports: bool,
) -> Result<Option<BootImage>, AdmissionError> {
    let url = &machine.boot.image;
    if let Some(img) = store.visible_image(tenant, url).await? {
        return Ok(Some(BootImage { id: img.id, new: None }));
    }
    if !machine.boot.is_url() || !imports {
        return Ok(None);
    }
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
