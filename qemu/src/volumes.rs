//! Volumes on this host: one qcow2 file each, `DATA_DIR/volumes/<id>.qcow2`,
//! blank or a copy-on-write overlay of a catalog image's base disk (the
//! image file is never written). A volume is made under a temporary name
//! and renamed once whole, so a file with the volume's name is always a
//! usable disk. Files live outside every VM's directory: deleting a VM
//! never deletes its volumes.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use tracing::info;
use vmaas_backend::{BackendError, Cleanup, Driver, Requeue, VolumeObservation, VolumeSpec, VolumeTarget};

use crate::images::{Catalog, probe};

/// Why a disk file could not be made, read or grown.
#[derive(Debug, thiserror::Error)]
pub enum DiskError {
    /// `qemu-img` could not be run.
    #[error("running {}: {source}", bin.display())]
    Run {
        /// The binary.
        bin: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// `qemu-img` failed; its error output.
    #[error("{0}")]
    QemuImg(String),
    /// The file's header cannot be read.
    #[error("reading {}: {source}", path.display())]
    Header {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The image it starts as cannot be used.
    #[error(transparent)]
    Image(#[from] crate::images::ImageError),
    /// The image's disk cannot be found.
    #[error("{}: {source}", path.display())]
    Base {
        /// The disk.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The volume is smaller than the image it starts as.
    #[error("image {name:?} needs a volume of at least {needs} bytes, not {size}")]
    TooSmall {
        /// The image.
        name: String,
        /// Its disk's size.
        needs: u64,
        /// The volume's.
        size: u64,
    },
    /// A blocking task died.
    #[error("{0}")]
    Task(#[from] tokio::task::JoinError),
}

/// Runs `qemu-img` (`bin`) with `args`: its standard output, or its error
/// output on failure.
pub(crate) async fn qemu_img(bin: &Path, args: &[&OsStr]) -> Result<Vec<u8>, DiskError> {
    // Killed if its caller goes away (an export whose client left).
    let mut cmd = tokio::process::Command::new(bin);
    cmd.args(args).kill_on_drop(true);
    let out = cmd.output().await.map_err(|e| DiskError::Run { bin: bin.to_owned(), source: e })?;
    if out.status.success() { Ok(out.stdout) } else { Err(DiskError::QemuImg(String::from_utf8_lossy(&out.stderr).trim().to_owned())) }
}

/// What the header of the qcow2 or raw file at `path` says, off the runtime.
pub(crate) async fn header(path: &Path) -> Result<crate::images::DiskInfo, DiskError> {
    let p = path.to_owned();
    tokio::task::spawn_blocking(move || probe(&p)).await?.map_err(|e| DiskError::Header { path: path.to_owned(), source: e })
}

/// The virtual size of the qcow2 or raw file at `path`, off the runtime.
pub(crate) async fn virtual_size(path: &Path) -> Result<u64, DiskError> {
    Ok(header(path).await?.virtual_size)
}

/// Grows the file at `path` to `wanted` bytes if it is smaller; the size
/// it had, when it grew.
pub(crate) async fn grow_file(bin: &Path, path: &Path, wanted: u64) -> Result<Option<u64>, DiskError> {
    let size = virtual_size(path).await?;
    if size >= wanted {
        return Ok(None);
    }
    let w = wanted.to_string();
    qemu_img(bin, &["resize".as_ref(), "-q".as_ref(), "-f".as_ref(), "qcow2".as_ref(), path.as_os_str(), w.as_ref()]).await?;
    Ok(Some(size))
}

/// The volume driver.
pub struct Volumes {
    dir: PathBuf,
    images: Catalog,
    qemu_img: PathBuf,
    imported: PathBuf,
}

impl Volumes {
    /// Volumes kept under `dir`, made with `qemu_img` from the images of
    /// `images` or imported under `imported`.
    pub fn new(dir: PathBuf, images: Catalog, qemu_img: PathBuf, imported: PathBuf) -> Self {
        Self { dir, images, qemu_img, imported }
    }

    /// The file of volume `id`.
    pub fn path(dir: &Path, id: &str) -> PathBuf {
        dir.join(format!("{id}.qcow2"))
    }

    /// Makes the file of `t`, or why it cannot be made.
    async fn create(&self, t: &VolumeTarget, file: &Path) -> Result<(), VolumeObservation> {
        let failed = VolumeObservation::Failed;
        let transient = |e: std::io::Error| VolumeObservation::Pending(format!("cannot write {}: {e}", self.dir.display()));
        tokio::fs::create_dir_all(&self.dir).await.map_err(transient)?;
        let base = match (&t.spec.imported_image, &t.spec.source_image) {
            (Some(id), _) => Some(self.base_of(id, true, t.spec.size_bytes).await.map_err(|e| failed(e.to_string()))?),
            (None, Some(name)) => Some(self.base_of(name, false, t.spec.size_bytes).await.map_err(|e| failed(e.to_string()))?),
            (None, None) => None,
        };
        let part = file.with_extension("qcow2.part");
        let size = t.spec.size_bytes.to_string();
        let mut args: Vec<&OsStr> = vec!["create".as_ref(), "-q".as_ref(), "-f".as_ref(), "qcow2".as_ref()];
        if let Some((b, format)) = &base {
            args.extend(["-F".as_ref(), format.as_ref(), "-b".as_ref(), b.as_os_str()]);
        }
        args.extend([part.as_os_str(), size.as_ref()]);
        qemu_img(&self.qemu_img, &args).await.map_err(|m| failed(format!("creating its disk: {m}")))?;
        tokio::fs::rename(&part, file).await.map_err(transient)?;
        info!(volume = %t.id, name = %t.name, bytes = t.spec.size_bytes, image = ?t.spec.source_image, "volume created");
        Ok(())
    }

    /// The base disk of image `name` (an imported image's id when
    /// `imported`), if a volume of `size` bytes can start as it.
    async fn base_of(&self, name: &str, imported: bool, size: u64) -> Result<(PathBuf, &'static str), DiskError> {
        let (catalog, dir, n) = (self.images.clone(), self.imported.clone(), name.to_owned());
        let image =
            tokio::task::spawn_blocking(move || if imported { crate::import::imported(&dir, &n) } else { catalog.get(&n) }).await??;
        let base = tokio::fs::canonicalize(image.disk()).await.map_err(|e| DiskError::Base { path: image.disk(), source: e })?;
        let h = header(&base).await?;
        if size < h.virtual_size {
            return Err(DiskError::TooSmall { name: name.to_owned(), needs: h.virtual_size, size });
        }
        Ok((base, h.format))
    }

    /// Grows the file of a detached volume to `t`'s size (a VM grows the
    /// volumes it has itself, see `hotplug`).
    async fn grow(&self, t: &VolumeTarget, file: &Path) -> Result<(), VolumeObservation> {
        if t.spec.attached_to.is_some() {
            return Ok(());
        }
        let grown = grow_file(&self.qemu_img, file, t.spec.size_bytes)
            .await
            .map_err(|m| VolumeObservation::Pending(format!("growing its disk: {m}")))?;
        if let Some(from) = grown {
            info!(volume = %t.id, from, to = t.spec.size_bytes, "volume grown");
        }
        Ok(())
    }
}

#[async_trait]
impl Driver<VolumeSpec, VolumeObservation> for Volumes {
    async fn ensure(&self, t: &VolumeTarget) -> Result<(VolumeObservation, Requeue), BackendError> {
        let file = Self::path(&self.dir, &t.id);
        let made =
            if tokio::fs::try_exists(&file).await.unwrap_or(false) { self.grow(t, &file).await } else { self.create(t, &file).await };
        Ok(match made {
            Ok(()) => (VolumeObservation::Ready, Requeue::AwaitChange),
            Err(o @ VolumeObservation::Pending(_)) => (o, Requeue::after(std::time::Duration::from_secs(2))),
            Err(o) => (o, Requeue::AwaitChange),
        })
    }

    async fn delete(&self, id: &str) -> Result<Cleanup, BackendError> {
        let file = Self::path(&self.dir, id);
        for f in [file.with_extension("qcow2.part"), file] {
            match tokio::fs::remove_file(&f).await {
                Ok(()) => info!(volume = %id, file = %f.display(), "volume file removed"),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(BackendError::transient(format!("removing {}", f.display()), e)),
            }
        }
        Ok(Cleanup::Done)
    }
}
