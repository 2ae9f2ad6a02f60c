//! The backend's image catalog as last read: every create looks at it, so
//! it is read at most once per [`CATALOG_FRESH`], off the async runtime.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use vmaas_backend::{Backend, CatalogImage};

use crate::error::ApiError;

/// How long a reading of the backend's catalog is used: an image added to
/// (or removed from) the images directory shows within this.
pub const CATALOG_FRESH: Duration = Duration::from_secs(1);

/// How long a request waits for a catalog not known yet.
pub const CATALOG_WAIT: Duration = Duration::from_secs(10);

/// When the catalog was read, and what it held (`None`: the backend has none).
type CatalogReading = (Instant, Option<Vec<CatalogImage>>);

/// The last reading of the backend's catalog, and when it was taken.
/// Shared by the copies of the state admissions make.
#[derive(Clone, Default)]
pub struct CatalogCache(Arc<Mutex<Option<CatalogReading>>>);

impl CatalogCache {
    /// `backend`'s catalog: the last reading if it is fresh, else a new one.
    /// A backend whose catalog is not known yet (a cluster not listed
    /// since start) is waited for, up to [`CATALOG_WAIT`]; then the
    /// answer is UNAVAILABLE, never an empty catalog.
    pub async fn read(&self, backend: &Arc<dyn Backend>) -> Result<Option<Vec<CatalogImage>>, ApiError> {
        let cached = self.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some((_, images)) = cached.filter(|(at, _)| at.elapsed() < CATALOG_FRESH) {
            return Ok(images);
        }
        known(backend).await?;
        let backend = backend.clone();
        let images = tokio::task::spawn_blocking(move || backend.images())
            .await
            .map_err(|e| ApiError::internal(format!("reading the image catalog: {e}")))?;
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some((Instant::now(), images.clone()));
        Ok(images)
    }
}

/// Waits until `backend`'s catalog is known, up to [`CATALOG_WAIT`].
async fn known(backend: &Arc<dyn Backend>) -> Result<(), ApiError> {
    let deadline = Instant::now() + CATALOG_WAIT;
    while !backend.images_known() {
        if Instant::now() >= deadline {
            let why = "the image catalog is not known yet: the cluster has not been listed since the server started; retry later";
            return Err(ApiError::unavailable(why));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}
