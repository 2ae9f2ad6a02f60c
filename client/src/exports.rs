//! Downloading an export (a VM's disk, a volume or a snapshot as qcow2)
//! into a file, checked against the checksum the server sends (SHA-256,
//! or CRC-32 when asked: [`Checksum`]): before the body, or (asked with
//! `TE: trailers`) as a trailer after it. The bytes are written and
//! hashed on threads behind the one receiving them, handed over a MiB at
//! a time.

use std::path::Path;

use bytes::Bytes;
use http_body_util::BodyExt;
use reqwest::Method;
use vmaas_model::checksum::Checksum;

use crate::{Client, Error, PREFIX};

/// A finished download.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Download {
    /// Bytes written.
    pub bytes: u64,
    /// Which checksum they came with.
    pub checksum: Checksum,
    /// That checksum, in lowercase hex (the server's, checked).
    pub digest: String,
}

/// Work on each batch of chunks sent into it (hashing, writing), done on
/// a thread of the blocking pool while the caller goes on receiving.
struct Behind<T> {
    tx: tokio::sync::mpsc::Sender<Vec<Bytes>>,
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
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<Bytes>>(4);
        let done = tokio::task::spawn_blocking(move || {
            while let Some(batch) = rx.blocking_recv() {
                batch.iter().try_for_each(|b| each(&mut state, b))?;
            }
            end(state)
        });
        Self { tx, done }
    }

    /// Hands `batch` over: `false` once the work ended early (an error).
    async fn send(&self, batch: Vec<Bytes>) -> bool {
        self.tx.send(batch).await.is_ok()
    }

    /// Waits for the work on every batch sent.
    async fn finish(self) -> std::io::Result<T> {
        drop(self.tx);
        self.done.await.map_err(std::io::Error::other)?
    }
}

/// Chunks handed to the threads behind in batches of this much at least:
/// a thread woken per MiB, not per socket read (tens of KiB).
const BATCH: usize = 1 << 20;

/// Where the bytes received go: written to the file and hashed. A CRC-32
/// costs a tenth of the write, so one thread does both; a SHA-256 costs
/// more than the write, so it has a thread of its own beside the writer's.
struct Sinks {
    /// Writes (and, for a cheap checksum, hashes): that checksum, if it hashed.
    out: Behind<Option<String>>,
    /// Hashes, for a costly checksum.
    hash: Option<Behind<String>>,
    /// Chunks not yet handed over, and their length.
    batch: (Vec<Bytes>, usize),
}

impl Sinks {
    fn new(file: std::fs::File, c: Checksum) -> Self {
        let inline = (c == Checksum::Crc32).then(|| c.hasher());
        let hash = inline.is_none().then(|| {
            let each = |h: &mut vmaas_model::checksum::Hasher, b: &[u8]| {
                h.update(b);
                Ok(())
            };
            Behind::new(c.hasher(), each, |h| Ok(h.hex()))
        });
        let each = |(f, h): &mut (std::fs::File, Option<vmaas_model::checksum::Hasher>), b: &[u8]| {
            if let Some(h) = h {
                h.update(b);
            }
            std::io::Write::write_all(f, b)
        };
        let end = |(mut f, h): (std::fs::File, Option<vmaas_model::checksum::Hasher>)| {
            std::io::Write::flush(&mut f)?;
            Ok(h.map(vmaas_model::checksum::Hasher::hex))
        };
        Self { out: Behind::new((file, inline), each, end), hash, batch: (Vec::new(), 0) }
    }

    /// Takes `chunk`, handing the batch over once it is large enough:
    /// `false` once the work behind ended early (an error).
    async fn take(&mut self, chunk: Bytes) -> bool {
        self.batch.1 += chunk.len();
        self.batch.0.push(chunk);
        self.batch.1 < BATCH || self.hand_over().await
    }

    /// Hands the chunks held over.
    async fn hand_over(&mut self) -> bool {
        let batch = std::mem::take(&mut self.batch).0;
        if batch.is_empty() {
            return true;
        }
        let hashed = match &self.hash {
            Some(h) => h.send(batch.clone()).await,
            None => true,
        };
        hashed && self.out.send(batch).await
    }

    /// Waits for the last byte to be written and hashed: the checksum (hex).
    async fn finish(mut self) -> std::io::Result<String> {
        self.hand_over().await;
        let inline = self.out.finish().await?;
        match (inline, self.hash) {
            (Some(hex), _) => Ok(hex),
            (None, Some(h)) => h.finish().await,
            (None, None) => Err(std::io::Error::other("nothing hashed the export")),
        }
    }
}

impl Client {
    /// Streams the export at `path` (e.g. `/virtual_machines/ID/export`)
    /// into `dest` (through `dest.part`, renamed once whole and checked
    /// against its SHA-256), calling `progress(written, total)` as it goes.
    pub async fn download_export(&self, path: &str, dest: &Path, progress: impl FnMut(u64, u64)) -> Result<Download, Error> {
        self.download_export_checked(path, dest, Checksum::Sha256, progress).await
    }

    /// [`Self::download_export`], checked against the checksum `c`.
    pub async fn download_export_checked(
        &self,
        path: &str,
        dest: &Path,
        c: Checksum,
        mut progress: impl FnMut(u64, u64),
    ) -> Result<Download, Error> {
        let url = format!("{}{}{}", self.endpoint, PREFIX, path);
        let mut req = self.http.request(Method::GET, &url).header(reqwest::header::TE, "trailers");
        if c != Checksum::Sha256 {
            req = req.query(&[("checksum", c.as_str())]);
        }
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
        let mut said = header(c.header());
        let part = dest.with_extension("part");
        let io = |e: std::io::Error| Error::Decode(format!("writing {}: {e}", part.display()));
        let mut sinks = Sinks::new(std::fs::File::create(&part).map_err(io)?, c);
        let mut written = 0u64;
        let mut body = reqwest::Body::from(resp);
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(transport)?;
            let frame = match frame.into_data() {
                Ok(chunk) => {
                    written += chunk.len() as u64;
                    if !sinks.take(chunk).await {
                        break;
                    }
                    progress(written, total);
                    continue;
                }
                Err(frame) => frame,
            };
            if let Some(v) = frame.trailers_ref().and_then(|t| t.get(c.header())).and_then(|v| v.to_str().ok()) {
                said = Some(v.to_owned());
            }
        }
        let digest = sinks.finish().await.map_err(io)?;
        let damaged = match said.as_deref() {
            None => Some(format!("the server sent no {c}, neither before the body nor after it (a proxy between may drop trailers)")),
            Some(s) if s != digest || (total > 0 && written != total) => {
                Some(format!("the export arrived damaged: {written} of {total} bytes, {c} {digest}, the server said {s}"))
            }
            Some(_) => None,
        };
        if let Some(why) = damaged {
            let _ = tokio::fs::remove_file(&part).await;
            return Err(Error::Decode(why));
        }
        tokio::fs::rename(&part, dest).await.map_err(|e| Error::Decode(format!("moving {} into place: {e}", dest.display())))?;
        Ok(Download { bytes: written, checksum: c, digest })
    }
}
