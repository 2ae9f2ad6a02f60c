//! Images uploaded through the API, made on every cluster: the upload is
//! written once to a file of the server's (at most one byte past the
//! limit, so a file too big is refused as the clusters refuse it), then
//! streamed from there to each cluster's uploads in turn. The first cluster
//! to refuse it (another SHA-256 than asked, too big, not a disk image)
//! decides the answer, naming that cluster; a new upload replaces it.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use tokio::io::AsyncWriteExt;
use tracing::info;
use vmaas_backend::{BackendError, ImageObservation, ImageTarget, ImageUploads, Upload};

/// How much of the file is read at a time when it is sent on.
const CHUNK: usize = 256 * 1024;

/// Uploads, on every cluster (by name).
pub struct Uploads {
    names: Vec<String>,
    each: Vec<Arc<dyn ImageUploads>>,
    spool: PathBuf,
}

impl Uploads {
    /// Uploads to `each` cluster of `names`, written first under `spool`.
    pub(crate) fn new(names: Vec<String>, each: Vec<Arc<dyn ImageUploads>>, spool: PathBuf) -> Self {
        Self { names, each, spool }
    }

    /// Writes `body` to `path`, at most `limit` bytes.
    async fn receive(path: &std::path::Path, mut body: Upload, limit: u64) -> std::io::Result<()> {
        let mut file = tokio::fs::File::create(path).await?;
        let mut written = 0u64;
        while let Some(chunk) = body.next().await {
            let chunk = chunk?;
            let take = usize::try_from(limit.saturating_sub(written)).unwrap_or(usize::MAX).min(chunk.len());
            file.write_all(&chunk[..take]).await?;
            written += take as u64;
            if written >= limit {
                break;
            }
        }
        file.flush().await
    }
}

#[async_trait]
impl ImageUploads for Uploads {
    async fn upload(&self, t: &ImageTarget, body: Upload) -> Result<ImageObservation, BackendError> {
        let io = |e: std::io::Error| BackendError::transient("keeping the upload to send to each cluster", e);
        tokio::fs::create_dir_all(&self.spool).await.map_err(io)?;
        let path = self.spool.join(format!("{}.upload", t.id));
        let sent = async {
            Self::receive(&path, body, t.spec.max_bytes.saturating_add(1)).await.map_err(io)?;
            let mut seen = None;
            for (name, uploads) in self.names.iter().zip(&self.each) {
                match uploads.upload(t, vmaas_backend::image::file_upload(&path, CHUNK).await.map_err(io)?).await? {
                    ImageObservation::Failed(why) => return Ok(ImageObservation::Failed(format!("on cluster {name}: {why}"))),
                    o => {
                        info!(image = %t.id, cluster = %name, "upload made on the cluster");
                        seen.get_or_insert(o);
                    }
                }
            }
            Ok(seen.unwrap_or_else(|| ImageObservation::Pending("no cluster to upload it to".into())))
        }
        .await;
        let _ = tokio::fs::remove_file(&path).await;
        sent
    }
}
