//! Disks taken away: a stopped VM's disk, a volume or a snapshot as one
//! self-contained qcow2 file (no backing file: what `image import` takes
//! back), with its SHA-256 when it is known before it is sent, for the
//! server to stream.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use vmaas_model::checksum::Checksum;

use crate::error::BackendError;

/// What is exported, by id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExportSource {
    /// A stopped VM's boot disk.
    VmDisk(String),
    /// A volume not on a running VM.
    Volume(String),
    /// A snapshot's disk named `disk` (its boot disk when none is named).
    Snapshot {
        /// The snapshot's id.
        id: String,
        /// The disk, as the snapshot's status names it.
        disk: Option<String>,
    },
}

/// An export, ready to be streamed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportFile {
    /// The qcow2 file.
    pub path: PathBuf,
    /// Its length.
    pub size: u64,
    /// Its SHA-256, in lowercase hex, when known already (a kept export's);
    /// `None`: whoever sends it hashes it as it reads it (no pass over the
    /// file before its first byte), or calls [`ExportFile::hash`].
    pub sha256: Option<String>,
    /// Whether it is the caller's to remove once streamed (else the
    /// backend keeps it, e.g. beside a snapshot, which never changes).
    pub temporary: bool,
}

impl ExportFile {
    /// Its SHA-256, computed now (and kept) if it was not known.
    pub async fn hash(&mut self) -> Result<&str, BackendError> {
        if self.sha256.is_none() {
            self.sha256 = Some(sha256_of(&self.path).await?.0);
        }
        Ok(self.sha256.as_deref().unwrap_or_default())
    }
}

/// A file being made: removed when dropped (its making failed, or its
/// caller went away), unless [`Partial::keep`] says it is whole.
#[derive(Debug)]
pub struct Partial(Option<PathBuf>);

impl Partial {
    /// Guards the file at `path`.
    pub fn new(path: &Path) -> Self {
        Self(Some(path.to_owned()))
    }

    /// The file is whole: it stays.
    pub fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for Partial {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// The SHA-256 of the file at `path` (lowercase hex) and its length, read
/// off the async runtime: what an [`ExportFile`] says of its file.
pub async fn sha256_of(path: &Path) -> Result<(String, u64), BackendError> {
    digest_of(path, Checksum::Sha256).await
}

/// The checksum `c` (lowercase hex) and length of the file at `path`, read off the async runtime.
pub async fn digest_of(path: &Path, c: Checksum) -> Result<(String, u64), BackendError> {
    let p = path.to_owned();
    digest_read(format!("hashing {}", path.display()), move || std::fs::File::open(p), c).await
}

/// The checksum `c` (lowercase hex) and length of what `open` gives to
/// read, opened and read on the blocking pool; `context` names it in an error.
async fn digest_read<R: std::io::Read>(
    context: String,
    open: impl FnOnce() -> std::io::Result<R> + Send + 'static,
    c: Checksum,
) -> Result<(String, u64), BackendError> {
    let hashed = tokio::task::spawn_blocking(move || -> std::io::Result<(String, u64)> {
        let (mut r, mut h, mut n) = (open()?, c.hasher(), 0u64);
        let mut buf = vec![0u8; 1 << 20];
        loop {
            match r.read(&mut buf) {
                Ok(0) => return Ok((h.hex(), n)),
                Ok(k) => {
                    h.update(&buf[..k]);
                    n += k as u64;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    });
    hashed.await.map_err(|e| BackendError::transient(context.clone(), e))?.map_err(|e| BackendError::transient(context, e))
}

/// An export composed as it is read ([`crate::qcow2`]): no file of its
/// own, its length known before its first byte, and its source held
/// unchanged (a VM kept from booting) until this is dropped.
pub struct ExportStream {
    /// The image.
    pub image: std::sync::Arc<crate::qcow2::Composed>,
    /// What keeps the disk under it unchanged while it is read.
    pub held: Box<dyn std::any::Any + Send + Sync>,
}

impl std::fmt::Debug for ExportStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExportStream").field("size", &self.image.size()).finish_non_exhaustive()
    }
}

impl ExportStream {
    /// The checksum `c` (lowercase hex) of the whole image, read off the async runtime.
    pub async fn digest(&self, c: Checksum) -> Result<String, BackendError> {
        let r = self.image.reader();
        Ok(digest_read("hashing the composed export".into(), move || Ok(r), c).await?.0)
    }
}

/// Makes exports.
#[async_trait]
pub trait Exports: Send + Sync {
    /// The export of `what`, made now (or kept from before when it cannot have changed).
    async fn export(&self, what: &ExportSource) -> Result<ExportFile, BackendError>;

    /// The export of `what` composed as it is read, when this backend can
    /// compose it (else `None`: [`Exports::export`] makes its file).
    async fn stream(&self, what: &ExportSource) -> Result<Option<ExportStream>, BackendError> {
        let _ = what;
        Ok(None)
    }

    /// Whether the disk of `what` is made yet (a VM never started may have
    /// none: then it has nothing to carry when it moves).
    async fn made(&self, what: &ExportSource) -> Result<bool, BackendError> {
        let _ = what;
        Ok(true)
    }
}

/// Takes VMs moved here from another cluster: the other side of an
/// export.
#[async_trait]
pub trait Arrivals: Send + Sync {
    /// Makes the boot disk of VM `t` (stopped, moving here) from `disk`, an
    /// export of its boot disk on the cluster it leaves; once this
    /// returns, the VM's driver makes `t` with that disk rather than one
    /// from its image. `disk` must be hashed ([`ExportFile::hash`]): what
    /// arrives is checked against its digest. A disk half made is removed
    /// before an error is returned.
    async fn arrive(&self, t: &crate::VmTarget, disk: &ExportFile) -> Result<(), BackendError>;

    /// Removes whatever a move of VM `id` made here (its disk, its VM),
    /// a move that did not finish: done once nothing is left.
    async fn abandon(&self, id: &str) -> Result<crate::Cleanup, BackendError>;
}
