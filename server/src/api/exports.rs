//! `GET …/export`: a stopped VM's disk, a volume not on a running VM, or a
//! snapshot's disk, streamed as one self-contained qcow2 file (the image
//! under it folded in, so `image import` takes it back), with its SHA-256
//! in `X-Checksum-Sha256` (and `Digest: sha-256=`, base64) before the body.
//! The body is sent only once the file is whole and hashed; a conversion
//! that fails is an error, never a 200. Each export holds a place among
//! its tenant's exports under way, and its file's bytes count against the
//! tenant's disk quota, until the body is sent or the client goes away
//! ([`crate::export_slots`]); a client that goes away stops the conversion
//! and its file is removed.

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use axum::{Router, routing::get};
use bytes::Bytes;
use tracing::info;
use vmaas_backend::{ExportFile, ExportSource};
use vmaas_model::{ComputeInstanceSnapshot, ComputeInstanceSnapshotState, PowerState, VmState, Volume};

use super::shared::scope;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::export_slots::ExportSlot;
use crate::state::AppState;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/virtual_machines/{id}/export", get(vm))
        .route("/volumes/{id}/export", get(volume))
        .route("/compute_instance_snapshots/{id}/export", get(snapshot))
}

/// Which of a snapshot's disks.
#[derive(Debug, Default, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(super) struct DiskQuery {
    /// The disk, as the snapshot's `status.disks` names it (default: its first, the boot disk).
    #[serde(default)]
    disk: Option<String>,
}

/// Export a stopped virtual machine's boot disk as qcow2.
#[utoipa::path(get, path = "/api/fulfillment/v1/virtual_machines/{id}/export", tag = "snapshots",
    params(("id" = String, Path, description = "VM id (UUID)")),
    responses((status = 200, description = "The disk, `application/octet-stream` (qcow2), `X-Checksum-Sha256`"),
        (status = 400, body = ApiError, description = "The VM is running"), (status = 404, body = ApiError),
        (status = 429, body = ApiError, description = "Past --exports-per-tenant or the disk quota"), (status = 503, body = ApiError, description = "The conversion failed")),
    security(("bearer" = [])))]
pub(super) async fn vm(State(s): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Response, ApiError> {
    let vm = s.store.get_vm(&id, &scope(&caller)).await?;
    if vm.power() != PowerState::Stopped || vm.status.state != VmState::Stopped {
        return Err(ApiError::field(
            "spec.state",
            format!("virtual machine {:?} is running (or stopping): stop it and wait until it is STOPPED to export its disk", vm.name),
        ));
    }
    let bytes = vm.machine.disks.first().and_then(|d| d.size.to_units_ceil()).unwrap_or(0);
    serve(&s, &caller, ExportSource::VmDisk(vm.id.clone()), &vm.name, bytes).await
}

/// Export a volume (not attached to a running VM) as qcow2.
#[utoipa::path(get, path = "/api/fulfillment/v1/volumes/{id}/export", tag = "snapshots",
    params(("id" = String, Path, description = "Volume id (UUID)")),
    responses((status = 200, description = "The volume, `application/octet-stream` (qcow2), `X-Checksum-Sha256`"),
        (status = 400, body = ApiError, description = "It is on a running VM"), (status = 404, body = ApiError),
        (status = 429, body = ApiError, description = "Past --exports-per-tenant or the disk quota"), (status = 503, body = ApiError, description = "The conversion failed")),
    security(("bearer" = [])))]
pub(super) async fn volume(State(s): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Response, ApiError> {
    let v = s.store.get_record::<Volume>(&id, &scope(&caller)).await?;
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
    serve(&s, &caller, ExportSource::Volume(v.id.clone()), &v.name, bytes).await
}

/// Export one disk of a snapshot as qcow2.
#[utoipa::path(get, path = "/api/fulfillment/v1/compute_instance_snapshots/{id}/export", tag = "snapshots",
    params(("id" = String, Path, description = "Snapshot id (UUID)"), DiskQuery),
    responses((status = 200, description = "The disk, `application/octet-stream` (qcow2), `X-Checksum-Sha256`"),
        (status = 400, body = ApiError, description = "Not READY, or no such disk"), (status = 404, body = ApiError),
        (status = 429, body = ApiError, description = "Past --exports-per-tenant or the disk quota"), (status = 503, body = ApiError, description = "The conversion failed")),
    security(("bearer" = [])))]
pub(super) async fn snapshot(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Query(q): Query<DiskQuery>,
) -> Result<Response, ApiError> {
    let snap = s.store.get_record::<ComputeInstanceSnapshot>(&id, &scope(&caller)).await?;
    if snap.status.state != ComputeInstanceSnapshotState::Ready {
        return Err(ApiError::field("status.state", format!("snapshot {:?} is {}, not READY", snap.name, snap.status.state)));
    }
    if let Some(d) = q.disk.as_deref().filter(|d| !snap.status.disks.iter().any(|x| x.name == *d)) {
        let names: Vec<&str> = snap.status.disks.iter().map(|x| x.name.as_str()).collect();
        return Err(ApiError::field("disk", format!("snapshot {:?} has no disk {d:?}; it has {}", snap.name, names.join(", "))));
    }
    let disk = q.disk.as_deref().or_else(|| snap.status.disks.first().map(|d| d.name.as_str()));
    let bytes = snap.status.disks.iter().find(|d| Some(d.name.as_str()) == disk).map_or(0, |d| d.size_bytes);
    serve(&s, &caller, ExportSource::Snapshot { id: snap.id.clone(), disk: q.disk }, &snap.name, bytes).await
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

/// Makes the export and streams it, removing a temporary file once sent
/// (or once the client is gone, the conversion's too).
async fn serve(s: &AppState, caller: &Caller, what: ExportSource, name: &str, bytes: u64) -> Result<Response, ApiError> {
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
    let digest = base64_of_hex(&sha256);
    let mut resp = Response::new(Body::from_stream(chunks(f, file, slot)));
    *resp.status_mut() = StatusCode::OK;
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(size));
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{name}.qcow2\"")) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    if let Ok(v) = HeaderValue::from_str(&sha256) {
        h.insert("x-checksum-sha256", v);
    }
    if let Ok(v) = HeaderValue::from_str(&format!("sha-256={digest}")) {
        h.insert("digest", v);
    }
    Ok(resp)
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

/// `hex` (a SHA-256 in hex) in base64, as `Digest` carries it.
fn base64_of_hex(hex: &str) -> String {
    let bytes: Vec<u8> = (0..hex.len() / 2).filter_map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()).collect();
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16) | (u32::from(*c.get(1).unwrap_or(&0)) << 8) | u32::from(*c.get(2).unwrap_or(&0));
        for k in 0..4 {
            if k <= c.len() {
                out.push(A[((n >> (18 - 6 * k)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn digests_are_base64() {
        // SHA-256 of the empty string.
        let hex = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        assert_eq!(super::base64_of_hex(hex), "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=");
    }
}
