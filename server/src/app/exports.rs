//! Exports: a stopped VM's disk, a volume not on a running VM, or a
//! snapshot's disk, made into one self-contained qcow2 file (the image
//! under it folded in, so an image import takes it back) and hashed before
//! anything is sent; a conversion that fails is an error. Each export
//! holds a place among its tenant's exports under way, and its file's
//! bytes count against the tenant's disk quota, until the file is sent or
//! the stream is dropped ([`crate::export_slots`]); dropping it removes a
//! temporary file.

use std::pin::Pin;

use bytes::Bytes;
use futures::Stream;
use tracing::info;
use vmaas_backend::{ExportFile, ExportSource};
use vmaas_model::{ComputeInstanceSnapshot, ComputeInstanceSnapshotState, PowerState, VmState, Volume};

use super::scope::scope;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::export_slots::ExportSlot;
use crate::state::AppState;

/// An export made: the file's name, size and SHA-256 (hex), and its bytes.
pub(crate) struct Export {
    /// What is exported (the file is `{name}.qcow2`).
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
    /// Its SHA-256, in hex.
    pub sha256: String,
    /// Its bytes, in chunks of 1 MiB.
    pub body: Pin<Box<dyn Stream<Item = std::io::Result<Bytes>> + Send>>,
}

/// The boot disk of the caller's stopped VM `id`.
pub(crate) async fn vm(s: &AppState, caller: &Caller, id: &str) -> Result<Export, ApiError> {
    let vm = s.store.get_vm(id, &scope(caller)).await?;
    if vm.power() != PowerState::Stopped || vm.status.state != VmState::Stopped {
        return Err(ApiError::field(
            "spec.state",
            format!("virtual machine {:?} is running (or stopping): stop it and wait until it is STOPPED to export its disk", vm.name),
        ));
    }
    let bytes = vm.machine.disks.first().and_then(|d| d.size.to_units_ceil()).unwrap_or(0);
    export(s, caller, ExportSource::VmDisk(vm.id.clone()), &vm.name, bytes).await
}

/// The caller's volume `id` (not attached to a running VM).
pub(crate) async fn volume(s: &AppState, caller: &Caller, id: &str) -> Result<Export, ApiError> {
    let v = s.store.get_record::<Volume>(id, &scope(caller)).await?;
    if let Some(a) = s.store.volume_holder(&v.id).await? {
        let vm = s.store.get_vm(&a.spec.compute_instance, &crate::store::Scope::All).await?;
        if vm.status.state != VmState::Stopped {
            return Err(ApiError::field(
                "status.attached_to",
                format!(
                    "volume {:?} is on virtual machine {:?}, which is not STOPPED: stop the VM or detach the volume first",
                    v.name, vm.name
                ),
            ));
        }
    }
    let bytes = v.spec.size.to_units_ceil().unwrap_or(0);
    export(s, caller, ExportSource::Volume(v.id.clone()), &v.name, bytes).await
}

/// One disk of the caller's snapshot `id` (`wanted`: as its `status.disks`
/// names it; by default its first, the boot disk).
pub(crate) async fn snapshot(s: &AppState, caller: &Caller, id: &str, wanted: Option<String>) -> Result<Export, ApiError> {
    let snap = s.store.get_record::<ComputeInstanceSnapshot>(id, &scope(caller)).await?;
    if snap.status.state != ComputeInstanceSnapshotState::Ready {
        return Err(ApiError::field("status.state", format!("snapshot {:?} is {}, not READY", snap.name, snap.status.state)));
    }
    if let Some(d) = wanted.as_deref().filter(|d| !snap.status.disks.iter().any(|x| x.name == *d)) {
        let names: Vec<&str> = snap.status.disks.iter().map(|x| x.name.as_str()).collect();
        return Err(ApiError::field("disk", format!("snapshot {:?} has no disk {d:?}; it has {}", snap.name, names.join(", "))));
    }
    let disk = wanted.as_deref().or_else(|| snap.status.disks.first().map(|d| d.name.as_str()));
    let bytes = snap.status.disks.iter().find(|d| Some(d.name.as_str()) == disk).map_or(0, |d| d.size_bytes);
    export(s, caller, ExportSource::Snapshot { id: snap.id.clone(), disk: wanted }, &snap.name, bytes).await
}

/// A place among the caller's exports under way for one expected to hold
/// `bytes`, within its disk quota (what its VMs, volumes and images hold
/// plus its other exports' files).
async fn slot(s: &AppState, caller: &Caller, bytes: u64) -> Result<ExportSlot, ApiError> {
    let limit = crate::quota::limits(&s.store, &caller.tenant).await?.and_then(|(l, _)| l.disk.as_ref().and_then(|d| d.to_units_ceil()));
    let room = match limit {
        Some(limit) => Some(limit.saturating_sub(crate::quota::usage(&s.store, &caller.tenant).await?.disk_bytes)),
        None => None,
    };
    s.exports.take(&caller.tenant, bytes, room)
}

/// Makes the export of `what` (expected to hold `bytes`) in a place among
/// the caller's exports.
async fn export(s: &AppState, caller: &Caller, what: ExportSource, name: &str, bytes: u64) -> Result<Export, ApiError> {
    let exports =
        s.backend.exports().ok_or_else(|| ApiError::precondition(format!("the {} backend does not export disks", s.backend.name())))?;
    let mut slot = slot(s, caller, bytes).await?;
    let file = exports.export(&what).await.map_err(|e| match e.kind {
        vmaas_backend::ErrorKind::Invalid => ApiError::precondition(e.to_string()),
        _ => ApiError::unavailable(format!("the export failed: {e}; try again")),
    })?;
    // Taken at once: dropped from here on (the client gone), the file goes.
    let file = Sent(file);
    slot.resize(file.0.size);
    info!(?what, bytes = file.0.size, sha256 = %file.0.sha256, "export streamed");
    let f = tokio::fs::File::open(&file.0.path).await.map_err(ApiError::internal)?;
    let (size, sha256) = (file.0.size, file.0.sha256.clone());
    Ok(Export { name: name.to_owned(), size, sha256, body: Box::pin(chunks(f, file, slot)) })
}

/// An export being sent: a temporary file is removed when dropped.
struct Sent(ExportFile);

impl Drop for Sent {
    fn drop(&mut self) {
        if self.0.temporary {
            let _ = std::fs::remove_file(&self.0.path);
        }
    }
}

/// The file in chunks of 1 MiB; the file (if temporary) and the export's
/// place go when the stream ends or is dropped (the client went away).
fn chunks(f: tokio::fs::File, file: Sent, slot: ExportSlot) -> impl futures::Stream<Item = std::io::Result<Bytes>> + Send {
    futures::stream::unfold((f, (file, slot)), |(mut f, guard)| async move {
        use tokio::io::AsyncReadExt;
        let mut buf = vec![0u8; 1 << 20];
        match f.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(Bytes::from(buf)), (f, guard)))
            }
            Err(e) => Some((Err(e), (f, guard))),
        }
    })
}
