//! Pruning imported images nothing uses: by the reconciler once an image
//! has been unused for `--image-retention`, or asked for (`POST
//! /images:prune`, `vmaas image prune`). An image goes only if no VM or
//! volume uses it, and its record is deleted in one statement that the
//! database refuses while anything refers to it, so a VM created during a
//! prune pass either keeps its image or is refused: never left without it.

use std::sync::Arc;

use tracing::{info, warn};
use vmaas_backend::Backend;
use vmaas_model::ObjectKind;
use vmaas_model::image::ImageState;

use crate::store::{ImageRecord, Store, StoreError};

/// Whether `img` may be pruned now, as far as its state says: imported or
/// failed, not being deleted.
pub fn settled(img: &ImageRecord) -> bool {
    img.deleted_at.is_none() && matches!(img.status.state, ImageState::Ready | ImageState::Failed)
}

/// Removes `img` if nothing uses it: true when it went.
pub async fn prune(store: &Store, backend: &Arc<dyn Backend>, img: &ImageRecord) -> Result<bool, StoreError> {
    if !settled(img) || !store.image_users(img).await?.is_empty() {
        return Ok(false);
    }
    match store.delete_now(ObjectKind::Image, &img.id).await {
        Ok(()) => {}
        Err(StoreError::InUse(why)) => {
            info!(image = %img.id, %why, "image kept: something started using it");
            return Ok(false);
        }
        Err(StoreError::NotFound { .. }) => return Ok(false),
        Err(e) => return Err(e),
    }
    if let Some(d) = backend.image_imports()
        && let Err(e) = d.delete(&img.id).await
    {
        warn!(image = %img.id, error = %e, "the pruned image's files could not be removed");
    }
    info!(image = %img.id, name = %img.name, tenant = %img.tenant, "unused image pruned");
    Ok(true)
}
