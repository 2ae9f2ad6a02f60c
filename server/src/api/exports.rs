//! `GET …/export`: a stopped VM's disk, a volume not on a running VM, or a
//! snapshot's disk, streamed as one self-contained qcow2 file (the image
//! under it folded in, so `image import` takes it back), with its SHA-256
//! in `X-Checksum-Sha256` (and `Digest: sha-256=`, base64), or with
//! `?checksum=crc32` its CRC-32 in `X-Checksum-Crc32` (a sixth of the
//! cost on both sides). A client that says `TE: trailers` gets them as
//! trailers after the body when they are not known before it (the file hashed as it is sent, chunked, its length
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
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::Response;
use axum::{Router, routing::get};
use futures::StreamExt;
use hyper::body::Frame;

use vmaas_model::checksum::Checksum;

use super::ApiQuery;
use crate::app::exports::{self, Asked, DigestAt, Export, Piece};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/virtual_machines/{id}/export", get(vm))
        .route("/volumes/{id}/export", get(volume))
        .route("/compute_instance_snapshots/{id}/export", get(snapshot))
}

/// Which checksum an export comes with.
#[derive(Debug, Default, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(super) struct ChecksumQuery {
    /// `sha256` (the default: `X-Checksum-Sha256` and `Digest`) or `crc32` (`X-Checksum-Crc32`).
    #[serde(default)]
    #[param(inline)]
    checksum: Option<Checksum>,
}

/// Which of a snapshot's disks, and which checksum it comes with.
#[derive(Debug, Default, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(super) struct DiskQuery {
    /// The disk, as the snapshot's `status.disks` names it (default: its first, the boot disk).
    #[serde(default)]
    disk: Option<String>,
    /// `sha256` (the default: `X-Checksum-Sha256` and `Digest`) or `crc32` (`X-Checksum-Crc32`).
    #[serde(default)]
    #[param(inline)]
    checksum: Option<Checksum>,
}

/// Export a stopped virtual machine's boot disk as qcow2.
#[utoipa::path(get, path = "/api/fulfillment/v1/virtual_machines/{id}/export", tag = "snapshots",
    params(("id" = String, Path, description = "VM id (UUID)"), ChecksumQuery),
    responses((status = 200, description = "The disk, `application/octet-stream` (qcow2), `X-Checksum-Sha256` (or with `checksum=crc32` `X-Checksum-Crc32`) before the body, or after it as a trailer (with `TE: trailers`)"),
        (status = 400, body = ApiError, description = "The VM is running"), (status = 404, body = ApiError),
        (status = 429, body = ApiError, description = "Past --exports-per-tenant or the disk quota"), (status = 503, body = ApiError, description = "The conversion failed")),
    security(("bearer" = [])))]
pub(super) async fn vm(State(s): State<AppState>, caller: Caller, Path(id): Path<String>, w: Wanted) -> Result<Response, ApiError> {
    Ok(streamed(exports::vm(&s, &caller, &id, w.0).await?))
}

/// Export a volume (not attached to a running VM) as qcow2.
#[utoipa::path(get, path = "/api/fulfillment/v1/volumes/{id}/export", tag = "snapshots",
    params(("id" = String, Path, description = "Volume id (UUID)"), ChecksumQuery),
    responses((status = 200, description = "The volume, `application/octet-stream` (qcow2), `X-Checksum-Sha256` (or with `checksum=crc32` `X-Checksum-Crc32`) before the body, or after it as a trailer (with `TE: trailers`)"),
        (status = 400, body = ApiError, description = "It is on a running VM"), (status = 404, body = ApiError),
        (status = 429, body = ApiError, description = "Past --exports-per-tenant or the disk quota"), (status = 503, body = ApiError, description = "The conversion failed")),
    security(("bearer" = [])))]
pub(super) async fn volume(State(s): State<AppState>, caller: Caller, Path(id): Path<String>, w: Wanted) -> Result<Response, ApiError> {
    Ok(streamed(exports::volume(&s, &caller, &id, w.0).await?))
}

/// Export one disk of a snapshot as qcow2.
#[utoipa::path(get, path = "/api/fulfillment/v1/compute_instance_snapshots/{id}/export", tag = "snapshots",
    params(("id" = String, Path, description = "Snapshot id (UUID)"), DiskQuery),
    responses((status = 200, description = "The disk, `application/octet-stream` (qcow2), `X-Checksum-Sha256` (or with `checksum=crc32` `X-Checksum-Crc32`) before the body, or after it as a trailer (with `TE: trailers`)"),
        (status = 400, body = ApiError, description = "Not READY, or no such disk"), (status = 404, body = ApiError),
        (status = 429, body = ApiError, description = "Past --exports-per-tenant or the disk quota"), (status = 503, body = ApiError, description = "The conversion failed")),
    security(("bearer" = [])))]
pub(super) async fn snapshot(
    State(s): State<AppState>,
    caller: Caller,
    h: HeaderMap,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<DiskQuery>,
) -> Result<Response, ApiError> {
    Ok(streamed(exports::snapshot(&s, &caller, &id, q.disk, asked(&h, q.checksum)).await?))
}

/// What a client asks of an export with no other parameter: [`ChecksumQuery`] and `TE`.
pub(super) struct Wanted(Asked);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Wanted {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &S) -> Result<Self, ApiError> {
        let ApiQuery(q) = ApiQuery::<ChecksumQuery>::from_request_parts(parts, state).await?;
        Ok(Self(asked(&parts.headers, q.checksum)))
    }
}

/// The checksum the client asks for (SHA-256 unless `checksum` says),
/// and where: after the body if it says `TE: trailers`, else before it.
fn asked(h: &HeaderMap, checksum: Option<Checksum>) -> Asked {
    let trailers = h
        .get_all(header::TE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case("trailers"));
    let at = if trailers { DigestAt::After } else { DigestAt::First };
    Asked { at, checksum: checksum.unwrap_or_default() }
}

/// The header naming the export's length when the body is chunked.
const EXPORT_LENGTH: HeaderName = HeaderName::from_static("x-export-length");
/// The header (or trailer) of the SHA-256 in base64.
const DIGEST: HeaderName = HeaderName::from_static("digest");

/// The export as the answer: its bytes, with its file name and length,
/// and its checksum (`X-Checksum-Sha256` and `Digest: sha-256=` in
/// base64, or `X-Checksum-Crc32`) before the body when known, else as
/// trailers after it.
fn streamed(e: Export) -> Response {
    let checksum = e.checksum;
    let body = e.body.map(move |p| {
        p.map(|piece| match piece {
            Piece::Bytes(b) => Frame::data(b),
            Piece::Digest(hex) => Frame::trailers(digest_headers(checksum, &hex)),
        })
    });
    let mut resp = Response::new(Body::new(http_body_util::StreamBody::new(body)));
    *resp.status_mut() = StatusCode::OK;
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{}.qcow2\"", e.name)) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    match &e.digest {
        Some(hex) => {
            h.insert(header::CONTENT_LENGTH, HeaderValue::from(e.size));
            h.extend(digest_headers(checksum, hex));
        }
        None => {
            // Trailers need a chunked body: the length is said apart.
            h.insert(EXPORT_LENGTH, HeaderValue::from(e.size));
            // The trailers to come are named by the headers they will be.
            let to_come = digest_headers(checksum, "");
            let names: Vec<&str> = to_come.keys().map(HeaderName::as_str).collect();
            if let Ok(v) = HeaderValue::from_str(&names.join(", ")) {
                h.insert(header::TRAILER, v);
            }
        }
    }
    resp
}

/// The headers of checksum `c`, `hex`: `X-Checksum-Sha256` and
/// `Digest` of a SHA-256, `X-Checksum-Crc32` of a CRC-32 (which `Digest`
/// has no name for).
fn digest_headers(c: Checksum, hex: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    if let Ok(v) = HeaderValue::from_str(hex) {
        h.insert(HeaderName::from_static(c.header()), v);
    }
    if c == Checksum::Sha256
        && let Ok(v) = HeaderValue::from_str(&format!("sha-256={}", base64_of_hex(hex)))
    {
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
