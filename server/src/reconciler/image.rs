//! Reconciling imported images, and what a VM's boot waits for: an image
//! still importing keeps the VM PROGRESSING (seed 004's `Provisioning`),
//! one that failed fails the VM with the import's reason, one that is
//! ready is what the VM's root disk is made from.

use std::time::Duration;

use tracing::{info, warn};
use vmaas_backend::{Cleanup, Credentials, ImageImport, ImageObservation, Target};
use vmaas_model::Reason;
use vmaas_model::image::{Image, ImageState, ImageStatus};

use super::status::{get, write};
use super::{Outcome, Pass, Reconciler};
use crate::store::{ImageRecord, StoreError, VmRecord};

/// What a VM boots from.
pub(super) enum Boot {
    /// An image of the backend's catalog.
    Catalog,
    /// The imported image with this id, ready, and what it says of the
    /// guest's platform.
    Imported(String, vmaas_model::GuestProfile),
    /// An imported image that is not ready yet: why.
    Waiting(Reason),
    /// An imported image whose import failed: why.
    Failed(Reason),
}

/// What VM `vm` boots from.
pub(super) async fn boot(r: &Reconciler, vm: &VmRecord) -> Result<Boot, StoreError> {
    let Some(img) = r.store.image_of(&vm.id).await? else { return Ok(Boot::Catalog) };
    Ok(match img.status.state {
        ImageState::Ready => Boot::Imported(img.id.clone(), img.spec.profile()),
        ImageState::Failed => {
            let why = img.status.message.clone().unwrap_or_default();
            Boot::Failed(Reason::new("ImageImportFailed", format!("image {:?} could not be imported: {why}", img.name)))
        }
        _ => {
            let got = if img.status.progress_bytes > 0 { format!(": {} bytes so far", img.status.progress_bytes) } else { String::new() };
            Boot::Waiting(Reason::new("ImageImporting", format!("waiting for image {:?} to be imported{got}", img.name)))
        }
    })
}

fn status_of(seen: ImageObservation) -> ImageStatus {
    let mut s = ImageStatus::default();
    match seen {
        ImageObservation::Pending(m) => (s.state, s.message) = (ImageState::Pending, Some(m)),
        ImageObservation::Importing { bytes, total } => {
            (s.state, s.progress_bytes, s.size_bytes) = (ImageState::Importing, bytes, total.unwrap_or(0));
        }
        ImageObservation::Ready(f) => {
            (s.state, s.format, s.virtual_size, s.size_bytes, s.sha256) =
                (ImageState::Ready, f.format, f.virtual_size, f.size_bytes, Some(f.sha256));
        }
        ImageObservation::Failed(m) => (s.state, s.message) = (ImageState::Failed, Some(m)),
    }
    s
}

/// Wakes the VMs that boot from `img` and the volumes made from it (by its
/// name or its URL): its state changed.
async fn wake_users(r: &Reconciler, img: &ImageRecord) -> Result<(), StoreError> {
    for u in r.store.image_users(img).await? {
        r.queue.enqueue(u.kind, &u.id);
    }
    Ok(())
}

/// The registry credentials `img` is pulled with, opened, while its import
/// goes on (none once it ended and its password was forgotten); or why
/// they cannot be opened.
async fn credentials(r: &Reconciler, img: &ImageRecord) -> Result<Result<Option<Credentials>, Unopened>, StoreError> {
    let Some(given) = &img.spec.registry_credentials else { return Ok(Ok(None)) };
    let Some(sealed) = r.store.secret(&img.id).await? else { return Ok(Ok(None)) };
    let Some(sealer) = &r.config.sealer else { return Ok(Err(Unopened::NoKey)) };
    Ok(match sealer.open(&img.id, &sealed) {
        Ok(password) => Ok(Some(Credentials { username: given.username.clone(), password })),
        Err(e) => {
            warn!(image = %img.id, error = %e, "registry credentials do not open: was the server's key file replaced?");
            Err(Unopened::Seal(e))
        }
    })
}

/// Why an image's registry credentials cannot be opened.
#[derive(Debug, thiserror::Error)]
enum Unopened {
    /// The server has no key file.
    #[error("this server holds no key to open the registry credentials with")]
    NoKey,
    /// The key does not open them.
    #[error("the registry credentials cannot be opened: {0}; import the image again")]
    Seal(crate::seal::SealError),
}

/// One imported image: its import through the driver, then its status.
pub(super) async fn reconcile(r: &Reconciler, id: &str) -> Pass {
    let Some(img) = get::<Image>(r, id).await? else { return Ok((Outcome::Unchanged, None)) };
    let driver = r.backend.image_imports();
    if img.deleted_at.is_some() {
        if let Some(d) = &driver {
            match d.delete(&img.id).await {
                Ok(Cleanup::Done) => {}
                Ok(Cleanup::InProgress) => return Ok((Outcome::Unchanged, Some(Duration::from_millis(500)))),
                Err(e) => {
                    warn!(image = %img.id, error = %e, "removing an image failed; will retry");
                    return Ok((Outcome::BackendError, Some(Duration::from_secs(1))));
                }
            }
        }
        r.store.delete_secret(&img.id).await?;
        r.store.remove(&img.id).await?;
        info!(image = %img.id, name = %img.name, "image removed");
        return Ok((Outcome::Removed, None));
    }
    let Some(driver) = driver else {
        let message = format!("the {} backend does not import images", r.backend.name());
        return Ok((write(r, &img, status_of(ImageObservation::Failed(message))).await?, None));
    };
    let credentials = match credentials(r, &img).await? {
        Ok(c) => c,
        Err(why) => return Ok((write(r, &img, status_of(ImageObservation::Failed(why.to_string()))).await?, None)),
    };
    let (source, sha256, max_bytes) = (img.spec.source.clone(), img.spec.sha256.clone(), r.config.image_max_bytes);
    let spec = ImageImport { source, sha256, max_bytes, credentials };
    let target = Target { id: img.id.clone(), tenant: img.tenant.clone(), name: img.name.clone(), version: img.version, spec };
    let (seen, next) = match driver.ensure(&target).await {
        Ok((seen, next)) => (seen, next.delay()),
        Err(e) => {
            warn!(image = %img.id, error = %e, "backend error on an image");
            (ImageObservation::Pending(e.to_string()), Some(Duration::from_secs(1)))
        }
    };
    let mut status = status_of(seen);
    if status.state != img.status.state {
        wake_users(r, &img).await?;
    }
    if matches!(status.state, ImageState::Ready | ImageState::Failed) && img.spec.registry_credentials.is_some() {
        // The import ended: its password is needed no more.
        r.store.delete_secret(&img.id).await?;
    }
    let unused = r.store.image_users(&img).await?.is_empty();
    status.unused_since = unused.then(|| img.status.unused_since.unwrap_or_else(chrono::Utc::now));
    if let (Some(since), Some(keep)) = (status.unused_since, r.config.image_retention) {
        let due = since + chrono::Duration::from_std(keep).unwrap_or(chrono::Duration::MAX);
        if chrono::Utc::now() >= due && crate::prune::prune(&r.store, &r.backend, &img).await? {
            return Ok((Outcome::Removed, None));
        }
        let left = (due - chrono::Utc::now()).to_std().unwrap_or_default();
        let outcome = write(r, &img, status).await?;
        return Ok((outcome, Some(next.unwrap_or(left).min(left).max(Duration::from_millis(200)))));
    }
    Ok((write(r, &img, status).await?, next))
}
