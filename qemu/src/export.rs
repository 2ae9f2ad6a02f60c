//! Exports on this host. A stopped VM's disk is composed as it is read
//! ([`crate::export_map`]): no file, the VM kept from booting until the
//! export ends. Otherwise (a volume, a snapshot's disk, a chain with
//! compressed clusters) the disk asked for is converted by `qemu-img
//! convert` into one qcow2 file without a backing file (the image under the
//! disk folded in), under `DATA_DIR/exports/`. A volume (or a VM's disk
//! not composed) is converted for each export, not hashed (the server hashes the bytes as it
//! sends them), and the file is the server's to remove once streamed; a
//! snapshot never changes, so its export is hashed once and kept beside it
//! with its digest, and served again.
//!
//! Every conversion writes a file of its own (`<out>.<nonce>.part`),
//! renamed into place only once whole (and, kept, hashed); exports of one snapshot
//! disk at once wait for the first (one conversion, then each finds it
//! kept). A conversion whose caller goes away (the client left) kills its
//! `qemu-img` and removes its file.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use async_trait::async_trait;
use tracing::info;
use vmaas_backend::export::Partial;
use vmaas_backend::{BackendError, ExportFile, ExportSource, ExportStream, Exports};

use crate::Vms;
use crate::volumes::Volumes;

/// The number of the next export file (the directory is emptied at start).
static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Removes the exports a previous run left (streams cut by a restart).
pub(crate) fn clean_up(data: &Path) {
    let _ = std::fs::remove_dir_all(data.join("exports"));
}

/// The conversions of kept exports under way, by the file they make: the
/// second export of a snapshot disk waits for the first instead of
/// converting into the same file.
static FLIGHTS: LazyLock<Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>> = LazyLock::new(Mutex::default);

/// The single-flight lock of the kept export `out`.
fn flight(out: &Path) -> Arc<tokio::sync::Mutex<()>> {
    let mut f = FLIGHTS.lock().unwrap_or_else(|p| p.into_inner());
    // Locks no one holds or waits for any more go.
    f.retain(|_, l| Arc::strong_count(l) > 1);
    f.entry(out.to_owned()).or_default().clone()
}

/// The exporter of the qemu backend.
pub(crate) struct Exporter(pub(crate) Arc<Vms>);

impl Exporter {
    /// Converts `source` into `out` (through a temporary name); a kept
    /// export is hashed, its digest written beside it.
    async fn convert(&self, source: &Path, out: PathBuf, temporary: bool) -> Result<ExportFile, BackendError> {
        if !tokio::fs::try_exists(source).await.unwrap_or(false) {
            return Err(BackendError::invalid("exporting a disk", "the disk is not made yet: its VM has never started"));
        }
        if let Some(dir) = out.parent() {
            tokio::fs::create_dir_all(dir).await.map_err(|e| BackendError::transient("creating the exports directory", e))?;
        }
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let part = out.with_extension(format!("{n}.part"));
        let guard = Partial::new(&part);
        let args = ["convert".as_ref(), "-U".as_ref(), "-O".as_ref(), "qcow2".as_ref(), source.as_os_str(), part.as_os_str()];
        crate::volumes::qemu_img(&self.0.cfg.qemu_img, &args).await.map_err(|e| BackendError::transient("converting the disk", e))?;
        let (sha256, size) = if temporary {
            let size = tokio::fs::metadata(&part).await.map_err(|e| BackendError::transient("reading the export's size", e))?.len();
            (None, size)
        } else {
            let (sha256, size) = vmaas_backend::export::sha256_of(&part).await?;
            // Written first: a kept export is whole once its file is in place.
            tokio::fs::write(out.with_extension("sha256"), &sha256)
                .await
                .map_err(|e| BackendError::transient("writing the export's digest", e))?;
            (Some(sha256), size)
        };
        tokio::fs::rename(&part, &out).await.map_err(|e| BackendError::transient("moving the export into place", e))?;
        guard.keep();
        info!(source = %source.display(), bytes = size, sha256 = sha256.as_deref().unwrap_or("(hashed as sent)"), "disk exported");
        Ok(ExportFile { path: out, size, sha256, temporary })
    }

    /// The stopped VM `id`, locked.
    async fn stopped(&self, id: &str) -> Result<tokio::sync::OwnedMutexGuard<crate::vm::Vm>, BackendError> {
        let Some(h) = self.0.handle(id) else {
            return Err(BackendError::invalid("exporting a disk", "the disk is not made yet: its VM has never started"));
        };
        let vm = h.lock_owned().await;
        if vm.running().is_some() {
            return Err(BackendError::invalid("exporting a disk", "the VM is running: stop it first"));
        }
        Ok(vm)
    }

    /// A snapshot's export kept from before, if whole.
    async fn kept(out: &Path) -> Option<ExportFile> {
        let sha256 = tokio::fs::read_to_string(out.with_extension("sha256")).await.ok()?;
        let size = tokio::fs::metadata(out).await.ok()?.len();
        Some(ExportFile { path: out.to_owned(), size, sha256: Some(sha256.trim().to_owned()), temporary: false })
    }
}

#[async_trait]
impl Exports for Exporter {
    async fn made(&self, what: &ExportSource) -> Result<bool, BackendError> {
        Ok(match what {
            ExportSource::VmDisk(id) => match self.0.handle(id) {
                Some(h) => tokio::fs::try_exists(h.lock().await.path(crate::vm::BOOT_DISK)).await.unwrap_or(false),
                None => false,
            },
            _ => true,
        })
    }

    /// A stopped VM's disk is composed as it is read, the VM kept from
    /// booting (and from a restore) until the export ends; a volume or a
    /// snapshot's disk is converted into a file.
    async fn stream(&self, what: &ExportSource) -> Result<Option<ExportStream>, BackendError> {
        let ExportSource::VmDisk(id) = what else { return Ok(None) };
        let vm = self.stopped(id).await?;
        let disk = vm.path(crate::vm::BOOT_DISK);
        if !tokio::fs::try_exists(&disk).await.unwrap_or(false) {
            return Err(BackendError::invalid("exporting a disk", "the disk is not made yet: its VM has never started"));
        }
        let Some(image) = crate::export_map::composed(&self.0.cfg.qemu_img, &disk).await? else { return Ok(None) };
        info!(vm = %id, bytes = image.size(), "disk exported as it is read");
        Ok(Some(ExportStream { image: Arc::new(image), held: Box::new(vm.exporting.clone()) }))
    }

    async fn export(&self, what: &ExportSource) -> Result<ExportFile, BackendError> {
        let vms = &self.0;
        let temp = || vms.data_dir().join("exports").join(format!("{}.qcow2", NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)));
        match what {
            ExportSource::VmDisk(id) => {
                // Held while converting: the VM is not started meanwhile.
                let vm = self.stopped(id).await?;
                self.convert(&vm.path(crate::vm::BOOT_DISK), temp(), true).await
            }
            ExportSource::Volume(id) => self.convert(&Volumes::path(&vms.volume_dir(), id), temp(), true).await,
            ExportSource::Snapshot { id, disk } => {
                let taken = vms.snapshots.taken(id).await.ok_or_else(|| BackendError::invalid("exporting a snapshot", "it is not here"))?;
                let name = match disk {
                    Some(d) => taken.disks.iter().find(|x| &x.name == d).map(|x| x.name.clone()),
                    None => taken.disks.first().map(|x| x.name.clone()),
                }
                .ok_or_else(|| {
                    BackendError::invalid("exporting a snapshot", format!("it has no disk {:?}", disk.clone().unwrap_or_default()))
                })?;
                let (file, out) = vms.snapshots.export_paths(id, &name);
                let lock = flight(&out);
                let _one = lock.lock().await;
                match Self::kept(&out).await {
                    Some(e) => Ok(e),
                    None => self.convert(&file, out, false).await,
                }
            }
        }
    }
}
