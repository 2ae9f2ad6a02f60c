//! Downloading an export (a VM's disk, a volume or a snapshot as qcow2)
//! into a file, checked against the SHA-256 the server sends first.

use std::path::Path;

use futures::StreamExt;
use reqwest::Method;
use sha2::Digest;
use tokio::io::AsyncWriteExt;

use crate::{Client, Error, PREFIX};

/// A finished download.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Download {
    /// Bytes written.
    pub bytes: u64,
    /// Their SHA-256, in lowercase hex (the server's, checked).
    pub sha256: String,
}

impl Client {
    /// Streams the export at `path` (e.g. `/virtual_machines/ID/export`)
    /// into `dest` (through `dest.part`, renamed once whole and checked),
    /// calling `progress(written, total)` as it goes.
    pub async fn download_export(&self, path: &str, dest: &Path, mut progress: impl FnMut(u64, u64)) -> Result<Download, Error> {
        let url = format!("{}{}{}", self.endpoint, PREFIX, path);
        let mut req = self.http.request(Method::GET, &url);
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        let transport = |e| Error::transport(&self.endpoint, &e);
        let resp = req.send().await.map_err(transport)?;
        if !resp.status().is_success() {
            return Err(self.error_of(resp).await);
        }
        let total = resp.content_length().unwrap_or(0);
        let said = resp.headers().get("x-checksum-sha256").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let part = dest.with_extension("part");
        let io = |e: std::io::Error| Error::Decode(format!("writing {}: {e}", part.display()));
        let mut out = tokio::fs::File::create(&part).await.map_err(io)?;
        let (mut hash, mut written) = (sha2::Sha256::new(), 0u64);
        let mut body = resp.bytes_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(transport)?;
            hash.update(&chunk);
            out.write_all(&chunk).await.map_err(io)?;
            written += chunk.len() as u64;
            progress(written, total);
        }
        out.flush().await.map_err(io)?;
        let sha256: String = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
        if said.as_deref().is_some_and(|s| s != sha256) || (total > 0 && written != total) {
            let _ = tokio::fs::remove_file(&part).await;
            return Err(Error::Decode(format!(
                "the export arrived damaged: {written} of {total} bytes, SHA-256 {sha256}, the server said {}",
                said.unwrap_or_default()
            )));
        }
        tokio::fs::rename(&part, dest).await.map_err(|e| Error::Decode(format!("moving {} into place: {e}", dest.display())))?;
        Ok(Download { bytes: written, sha256 })
    }
}
