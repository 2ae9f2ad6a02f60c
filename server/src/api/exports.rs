//! `GET …/export`: a stopped VM's disk, a volume not on a running VM, or a
//! snapshot's disk, streamed as one self-contained qcow2 file (the image
//! under it folded in, so `image import` takes it back), with its SHA-256
//! in `X-Checksum-Sha256` (and `Digest: sha-256=`, base64) before the body.

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
        (status = 400, body = ApiError, description = "The VM is running"), (status = 404, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn vm(State(s): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Response, ApiError> {
    let vm = s.store.get_vm(&id, &scope(&caller)).await?;
    if vm.power() != PowerState::Stopped || vm.status.state != VmState::Stopped {
        return Err(ApiError::field(
            "spec.state",
            format!("virtual machine {:?} is running (or stopping): stop it and wait until it is STOPPED to export its disk", vm.name),
        ));
    }
    serve(&s, ExportSource::VmDisk(vm.id.clone()), &vm.name).await
}

/// Export a volume (not attached to a running VM) as qcow2.
#[utoipa::path(get, path = "/api/fulfillment/v1/volumes/{id}/export", tag = "snapshots",
    params(("id" = String, Path, description = "Volume id (UUID)")),
    responses((status = 200, description = "The volume, `application/octet-stream` (qcow2), `X-Checksum-Sha256`"),
        (status = 400, body = ApiError, description = "It is on a running VM"), (status = 404, body = ApiError)),
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
    serve(&s, ExportSource::Volume(v.id.clone()), &v.name).await
}

/// Export one disk of a snapshot as qcow2.
#[utoipa::path(get, path = "/api/fulfillment/v1/compute_instance_snapshots/{id}/export", tag = "snapshots",
    params(("id" = String, Path, description = "Snapshot id (UUID)"), DiskQuery),
    responses((status = 200, description = "The disk, `application/octet-stream` (qcow2), `X-Checksum-Sha256`"),
        (status = 400, body = ApiError, description = "Not READY, or no such disk"), (status = 404, body = ApiError)),
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
    serve(&s, ExportSource::Snapshot { id: snap.id.clone(), disk: q.disk }, &snap.name).await
}

/// Makes the export and streams it, removing a temporary file once sent.
async fn serve(s: &AppState, what: ExportSource, name: &str) -> Result<Response, ApiError> {
    let exports =
        s.backend.exports().ok_or_else(|| ApiError::precondition(format!("the {} backend does not export disks", s.backend.name())))?;
    let file = exports.export(&what).await.map_err(|e| match e.kind {
        vmaas_backend::ErrorKind::Invalid => ApiError::precondition(e.to_string()),
        _ => ApiError::internal(e),
    })?;
    info!(?what, bytes = file.size, sha256 = %file.sha256, "export streamed");
    let f = tokio::fs::File::open(&file.path).await.map_err(ApiError::internal)?;
    let digest = base64_of_hex(&file.sha256);
    let mut resp = Response::new(Body::from_stream(chunks(f, file.clone())));
    *resp.status_mut() = StatusCode::OK;
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(file.size));
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{name}.qcow2\"")) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    if let Ok(v) = HeaderValue::from_str(&file.sha256) {
        h.insert("x-checksum-sha256", v);
    }
    if let Ok(v) = HeaderValue::from_str(&format!("sha-256={digest}")) {
        h.insert("digest", v);
    }
    Ok(resp)
}

/// The file in chunks of 1 MiB; a temporary file is removed when the
/// stream ends or is dropped (the client went away).
fn chunks(f: tokio::fs::File, file: ExportFile) -> impl futures::Stream<Item = std::io::Result<Bytes>> + Send {
    struct Remove(ExportFile);
    impl Drop for Remove {
        fn drop(&mut self) {
            if self.0.temporary {
                let _ = std::fs::remove_file(&self.0.path);
            }
        }
    }
    futures::stream::unfold((f, Remove(file)), |(mut f, guard)| async move {
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
