//! `GET …/export`: a stopped VM's disk, a volume not on a running VM, or a
//! snapshot's disk, streamed as one self-contained qcow2 file (the image
//! under it folded in, so `image import` takes it back), with its SHA-256
//! in `X-Checksum-Sha256` (and `Digest: sha-256=`, base64). A client that
//! says `TE: trailers` gets them as trailers after the body when they are
//! not known before it (the file hashed as it is sent, chunked, its length
//! in `X-Export-Length`); any other gets them before the body, the file
//! hashed first. A disk the backend composes as it is read (a stopped
//! VM's on the qemu backend) is sent from its first byte with no file of
//! its own, and a read failing mid-way cuts the body short (never a
//! whole-looking body with a wrong digest); any other is sent only once
//! its file is whole, and a conversion that fails is an error, never a
//! 200. Each export holds a place among its tenant's exports under way,
//! and a file made for it counts against the tenant's disk quota, until
//! the body is sent or the client goes away ([`crate::export_slots`]); a
//! client that goes away stops the conversion and its file is removed.

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::Response;
use axum::{Router, routing::get};
use futures::StreamExt;
use hyper::body::Frame;

use crate::app::exports::{self, DigestAt, Export, Piece};
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
    responses((status = 200, description = "The disk, `application/octet-stream` (qcow2), `X-Checksum-Sha256` before the body, or after it as a trailer (with `TE: trailers`)"),
        (status = 400, body = ApiError, description = "The VM is running"), (status = 404, body = ApiError),
        (status = 429, body = ApiError, description = "Past --exports-per-tenant or the disk quota"), (status = 503, body = ApiError, description = "The conversion failed")),
    security(("bearer" = [])))]
pub(super) async fn vm(State(s): State<AppState>, caller: Caller, h: HeaderMap, Path(id): Path<String>) -> Result<Response, ApiError> {
    Ok(streamed(exports::vm(&s, &caller, &id, digest_at(&h)).await?))
}

/// Export a volume (not attached to a running VM) as qcow2.
#[utoipa::path(get, path = "/api/fulfillment/v1/volumes/{id}/export", tag = "snapshots",
    params(("id" = String, Path, description = "Volume id (UUID)")),
    responses((status = 200, description = "The volume, `application/octet-stream` (qcow2), `X-Checksum-Sha256` before the body, or after it as a trailer (with `TE: trailers`)"),
        (status = 400, body = ApiError, description = "It is on a running VM"), (status = 404, body = ApiError),
        (status = 429, body = ApiError, description = "Past --exports-per-tenant or the disk quota"), (status = 503, body = ApiError, description = "The conversion failed")),
    security(("bearer" = [])))]
pub(super) async fn volume(State(s): State<AppState>, caller: Caller, h: HeaderMap, Path(id): Path<String>) -> Result<Response, ApiError> {
    Ok(streamed(exports::volume(&s, &caller, &id, digest_at(&h)).await?))
}

/// Export one disk of a snapshot as qcow2.
#[utoipa::path(get, path = "/api/fulfillment/v1/compute_instance_snapshots/{id}/export", tag = "snapshots",
    params(("id" = String, Path, description = "Snapshot id (UUID)"), DiskQuery),
    responses((status = 200, description = "The disk, `application/octet-stream` (qcow2), `X-Checksum-Sha256` before the body, or after it as a trailer (with `TE: trailers`)"),
        (status = 400, body = ApiError, description = "Not READY, or no such disk"), (status = 404, body = ApiError),
        (status = 429, body = ApiError, description = "Past --exports-per-tenant or the disk quota"), (status = 503, body = ApiError, description = "The conversion failed")),
    security(("bearer" = [])))]
pub(super) async fn snapshot(
    State(s): State<AppState>,
    caller: Caller,
    h: HeaderMap,
    Path(id): Path<String>,
    Query(q): Query<DiskQuery>,
) -> Result<Response, ApiError> {
    Ok(streamed(exports::snapshot(&s, &caller, &id, q.disk, digest_at(&h)).await?))
}

/// Where the client takes the digest: after the body if it says
/// `TE: trailers`, else before it.
fn digest_at(h: &HeaderMap) -> DigestAt {
    let trailers = h
        .get_all(header::TE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case("trailers"));
    if trailers { DigestAt::After } else { DigestAt::First }
}

/// The header naming the export's length when the body is chunked.
const EXPORT_LENGTH: HeaderName = HeaderName::from_static("x-export-length");
/// The header (or trailer) of the SHA-256 in hex.
const CHECKSUM: HeaderName = HeaderName::from_static("x-checksum-sha256");
/// The header (or trailer) of the SHA-256 in base64.
const DIGEST: HeaderName = HeaderName::from_static("digest");

/// The export as the answer: its bytes, with its file name and length,
/// and its SHA-256 (`X-Checksum-Sha256`, and `Digest: sha-256=` in
/// base64) before the body when known, else as trailers after it.
fn streamed(e: Export) -> Response {
    let body = e.body.map(|p| {
        p.map(|piece| match piece {
            Piece::Bytes(b) => Frame::data(b),
            Piece::Digest(hex) => Frame::trailers(digest_headers(&hex)),
        })
    });
    let mut resp = Response::new(Body::new(http_body_util::StreamBody::new(body)));
    *resp.status_mut() = StatusCode::OK;
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{}.qcow2\"", e.name)) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    match &e.sha256 {
        Some(hex) => {
            h.insert(header::CONTENT_LENGTH, HeaderValue::from(e.size));
            h.extend(digest_headers(hex));
        }
        None => {
            // Trailers need a chunked body: the length is said apart.
            h.insert(EXPORT_LENGTH, HeaderValue::from(e.size));
            h.insert(header::TRAILER, HeaderValue::from_static("x-checksum-sha256, digest"));
        }
    }
    resp
}

/// `X-Checksum-Sha256` and `Digest` of the SHA-256 `hex`.
fn digest_headers(hex: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    if let Ok(v) = HeaderValue::from_str(hex) {
        h.insert(CHECKSUM, v);
    }
    if let Ok(v) = HeaderValue::from_str(&format!("sha-256={}", base64_of_hex(hex))) {
        h.insert(DIGEST, v);
    }
    h
}

/// `hex` (a SHA-256 in hex) in base64, as `Digest` carries it.
fn base64_of_hex(hex: &str) -> String {
    use base64::Engine;
    let bytes: Vec<u8> = (0..hex.len() / 2).filter_map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()).collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
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
