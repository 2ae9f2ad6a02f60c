//! Exports on this host: the disk asked for, converted by `qemu-img
//! convert` into one qcow2 file without a backing file (the image under the
//! disk folded in), hashed, under `DATA_DIR/exports/`. A VM's disk and a
//! volume are converted for each export and the file is the server's to
//! remove once streamed; a snapshot never changes, so its export is kept
//! beside it and served again.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use tracing::info;
use vmaas_backend::{BackendError, ExportFile, ExportSource, Exports};

use crate::Vms;
use crate::volumes::Volumes;

/// The number of the next export file (the directory is emptied at start).
static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Removes the exports a previous run left (streams cut by a restart).
pub(crate) fn clean_up(data: &Path) {
    let _ = std::fs::remove_dir_all(data.join("exports"));
}

/// The exporter of the qemu backend.
pub(crate) struct Exporter(pub(crate) Arc<Vms>);

impl Exporter {
    /// Converts `source` into `out` (through a temporary name) and hashes it.
    async fn convert(&self, source: &Path, out: PathBuf, temporary: bool) -> Result<ExportFile, BackendError> {
        if !tokio::fs::try_exists(source).await.unwrap_or(false) {
            return Err(BackendError::invalid("exporting a disk", "the disk is not made yet: its VM has never started"));
        }
        if let Some(dir) = out.parent() {
            tokio::fs::create_dir_all(dir).await.map_err(|e| BackendError::transient("creating the exports directory", e))?;
        }
        let part = out.with_extension("part");
        let args = ["convert".as_ref(), "-U".as_ref(), "-O".as_ref(), "qcow2".as_ref(), source.as_os_str(), part.as_os_str()];
        crate::volumes::qemu_img(&self.0.cfg.qemu_img, &args).await.map_err(|e| BackendError::transient("converting the disk", e))?;
        let (sha256, size) = vmaas_backend::export::sha256_of(&part).await?;
        tokio::fs::rename(&part, &out).await.map_err(|e| BackendError::transient("moving the export into place", e))?;
        if !temporary {
            let _ = tokio::fs::write(out.with_extension("sha256"), &sha256).await;
        }
        info!(source = %source.display(), bytes = size, %sha256, "disk exported");
        Ok(ExportFile { path: out, size, sha256, temporary })
    }

    /// A snapshot's export kept from before, if whole.
    async fn kept(out: &Path) -> Option<ExportFile> {
        let sha256 = tokio::fs::read_to_string(out.with_extension("sha256")).await.ok()?;
        let size = tokio::fs::metadata(out).await.ok()?.len();
        Some(ExportFile { path: out.to_owned(), size, sha256: sha256.trim().to_owned(), temporary: false })
    }
}

#[async_trait]
impl Exports for Exporter {
    async fn export(&self, what: &ExportSource) -> Result<ExportFile, BackendError> {
        let vms = &self.0;
        let temp = || vms.data_dir().join("exports").join(format!("{}.qcow2", NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)));
        match what {
            ExportSource::VmDisk(id) => {
                let Some(h) = vms.handle(id) else {
                    return Err(BackendError::invalid("exporting a disk", "the disk is not made yet: its VM has never started"));
                };
                // Held while converting: the VM is not started meanwhile.
                let vm = h.lock().await;
                if vm.running().is_some() {
                    return Err(BackendError::invalid("exporting a disk", "the VM is running: stop it first"));
                }
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
                match Self::kept(&out).await {
                    Some(e) => Ok(e),
                    None => self.convert(&file, out, false).await,
                }
            }
        }
    }
}
