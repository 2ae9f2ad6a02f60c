//! Downloading an export (a VM's disk, a volume or a snapshot as qcow2)
//! into a file, checked against the SHA-256 the server sends: before the
//! body, or (asked with `TE: trailers`) as a trailer after it. The bytes
//! are hashed on a thread of their own while they are written.

use std::path::Path;

use bytes::Bytes;
use http_body_util::BodyExt;
use reqwest::Method;
use sha2::Digest;

use crate::{Client, Error, PREFIX};

/// A finished download.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Download {
    /// Bytes written.
    pub bytes: u64,
    /// Their SHA-256, in lowercase hex (the server's, checked).
    pub sha256: String,
}

/// The header (or trailer) carrying an export's SHA-256 in hex.
const CHECKSUM: &str = "x-checksum-sha256";

/// Work on each chunk sent into it (hashing, writing), done on a thread of
/// the blocking pool while the caller goes on receiving.
struct Behind<T> {
    tx: tokio::sync::mpsc::Sender<Bytes>,
    done: tokio::task::JoinHandle<std::io::Result<T>>,
}

impl<T: Send + 'static> Behind<T> {
    /// Runs `each` on `state` and every chunk, then `end` on `state`; the
    /// first error ends it.
    fn new<S: Send + 'static>(
        mut state: S,
        mut each: impl FnMut(&mut S, &[u8]) -> std::io::Result<()> + Send + 'static,
        end: impl FnOnce(S) -> std::io::Result<T> + Send + 'static,
    ) -> Self {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Bytes>(8);
        let done = tokio::task::spawn_blocking(move || {
            while let Some(b) = rx.blocking_recv() {
                each(&mut state, &b)?;
            }
            end(state)
        });
        Self { tx, done }
    }

    /// Hands `chunk` over: `false` once the work ended early (an error).
    async fn send(&self, chunk: Bytes) -> bool {
        self.tx.send(chunk).await.is_ok()
    }

    /// Waits for the work on every chunk sent.
    async fn finish(self) -> std::io::Result<T> {
        drop(self.tx);
        self.done.await.map_err(std::io::Error::other)?
    }
}

/// The SHA-256 (lowercase hex) of what is sent into it.
fn hasher() -> Behind<String> {
    let hex = |h: sha2::Sha256| Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect());
    let each = |h: &mut sha2::Sha256, b: &[u8]| {
        h.update(b);
        Ok(())
    };
    Behind::new(sha2::Sha256::new(), each, hex)
}

/// Writes what is sent into it to `file`.
fn writer(file: std::fs::File) -> Behind<()> {
    Behind::new(file, std::io::Write::write_all, |mut f| std::io::Write::flush(&mut f))
}

impl Client {
    /// Streams the export at `path` (e.g. `/virtual_machines/ID/export`)
    /// into `dest` (through `dest.part`, renamed once whole and checked),
    /// calling `progress(written, total)` as it goes.
    pub async fn download_export(&self, path: &str, dest: &Path, mut progress: impl FnMut(u64, u64)) -> Result<Download, Error> {
        let url = format!("{}{}{}", self.endpoint, PREFIX, path);
        let mut req = self.http.request(Method::GET, &url).header(reqwest::header::TE, "trailers");
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        let transport = |e| Error::transport(&self.endpoint, &e);
        let resp = req.send().await.map_err(transport)?;
        if !resp.status().is_success() {
            return Err(self.error_of(resp).await);
        }
        let header = |name: &str| resp.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let total = resp.content_length().or_else(|| header("x-export-length").and_then(|n| n.parse().ok())).unwrap_or(0);
        let mut said = header(CHECKSUM);
        let part = dest.with_extension("part");
        let io = |e: std::io::Error| Error::Decode(format!("writing {}: {e}", part.display()));
        let out = writer(std::fs::File::create(&part).map_err(io)?);
        let (hash, mut written) = (hasher(), 0u64);
        let mut body = reqwest::Body::from(resp);
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(transport)?;
            let frame = match frame.into_data() {
                Ok(chunk) => {
                    written += chunk.len() as u64;
                    if !(hash.send(chunk.clone()).await && out.send(chunk).await) {
                        break;
                    }
                    progress(written, total);
                    continue;
                }
                Err(frame) => frame,
            };
            if let Some(v) = frame.trailers_ref().and_then(|t| t.get(CHECKSUM)).and_then(|v| v.to_str().ok()) {
                said = Some(v.to_owned());
            }
        }
        out.finish().await.map_err(io)?;
        let sha256 = hash.finish().await.map_err(|e| Error::Decode(format!("hashing the export: {e}")))?;
        let damaged = match said.as_deref() {
            None => Some("the server sent no SHA-256, neither before the body nor after it (a proxy between may drop trailers)".to_owned()),
            Some(s) if s != sha256 || (total > 0 && written != total) => {
                Some(format!("the export arrived damaged: {written} of {total} bytes, SHA-256 {sha256}, the server said {s}"))
            }
            Some(_) => None,
        };
        if let Some(why) = damaged {
            let _ = tokio::fs::remove_file(&part).await;
            return Err(Error::Decode(why));
        }
        tokio::fs::rename(&part, dest).await.map_err(|e| Error::Decode(format!("moving {} into place: {e}", dest.display())))?;
        Ok(Download { bytes: written, sha256 })
    }
}
