//! The audit log: one JSON line per mutating request (who, what, when,
//! and the result), written by a task of its own to a file that is
//! rotated by size (`audit.log` → `audit.log.1` → … → `audit.log.N`).
//! Requests wait for room in its queue rather than go unrecorded.

use axum::extract::Request;
use axum::http::Method;
use chrono::{SecondsFormat, Utc};
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};
use tokio::sync::mpsc;
use tracing::warn;

use crate::auth::CallerSlot;

/// Lines queued for the writer before requests wait.
const QUEUE: usize = 4096;

/// Where and how big the audit log is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditConfig {
    /// The file written to.
    pub path: PathBuf,
    /// Size at which it is rotated, in bytes.
    pub max_bytes: u64,
    /// Rotated files kept (`path.1` is the newest).
    pub keep: u32,
}

impl AuditConfig {
    /// Whether the log goes to the standard output (`--audit-log -`).
    pub fn to_stdout(&self) -> bool {
        self.path.as_os_str() == "-"
    }
}

/// One audited request.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Entry {
    /// When it was answered (RFC 3339, UTC).
    pub time: String,
    /// Who: the token's subject (absent when the token was refused or missing).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// The tenant acted in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// `admin` or `tenant`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
    /// The HTTP method.
    pub method: String,
    /// The path asked for (ids included).
    pub path: String,
    /// The answer's HTTP status.
    pub status: u16,
    /// `ok` for a 2xx answer, else `refused` (4xx) or `failed` (5xx).
    pub result: &'static str,
    /// Time taken, in milliseconds.
    pub duration_ms: f64,
    /// The client's address as the connection saw it, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
}

/// The audit log's writer.
#[derive(Debug, Clone)]
pub struct AuditLog {
    tx: mpsc::Sender<Entry>,
}

impl AuditLog {
    /// Starts the writer task on `config`'s file (created if absent).
    pub fn start(config: AuditConfig) -> std::io::Result<Self> {
        let file = Rotating::open(config)?;
        let (tx, rx) = mpsc::channel(QUEUE);
        tokio::task::spawn_blocking(move || file.run(rx));
        Ok(Self { tx })
    }

    /// Queues `entry`, waiting for room.
    pub async fn record(&self, entry: Entry) {
        if self.tx.send(entry).await.is_err() {
            warn!("the audit log writer has stopped");
        }
    }
}

/// A file rotated by size, or the standard output (`-`, never rotated:
/// the server's own log goes to the standard error).
struct Rotating {
    config: AuditConfig,
    file: std::fs::File,
    size: u64,
}

impl Rotating {
    fn open(config: AuditConfig) -> std::io::Result<Self> {
        if config.to_stdout() {
            use std::os::fd::AsFd;
            let file = std::fs::File::from(std::io::stdout().as_fd().try_clone_to_owned()?);
            return Ok(Self { config, file, size: 0 });
        }
        if let Some(dir) = config.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let file = open_append(&config.path)?;
        let size = file.metadata()?.len();
        Ok(Self { config, file, size })
    }

    /// Writes entries until every sender is gone.
    fn run(mut self, mut rx: mpsc::Receiver<Entry>) {
        while let Some(entry) = rx.blocking_recv() {
            let mut line = serde_json::to_vec(&entry).unwrap_or_default();
            line.push(b'\n');
            if let Err(e) = self.write(&line) {
                warn!(error = %e, path = %self.config.path.display(), "writing the audit log");
            }
        }
        let _ = self.file.sync_all();
    }

    fn write(&mut self, line: &[u8]) -> std::io::Result<()> {
        if !self.config.to_stdout() && self.size > 0 && self.size + line.len() as u64 > self.config.max_bytes {
            self.rotate()?;
        }
        self.file.write_all(line)?;
        self.size += line.len() as u64;
        Ok(())
    }

    /// `path.{keep-1}` → `path.{keep}`, …, `path` → `path.1`; a new `path`.
    fn rotate(&mut self) -> std::io::Result<()> {
        self.file.sync_all()?;
        let numbered = |n: u32| PathBuf::from(format!("{}.{n}", self.config.path.display()));
        if self.config.keep == 0 {
            std::fs::remove_file(&self.config.path)?;
        } else {
            for n in (1..self.config.keep).rev() {
                if numbered(n).exists() {
                    std::fs::rename(numbered(n), numbered(n + 1))?;
                }
            }
            std::fs::rename(&self.config.path, numbered(1))?;
        }
        self.file = open_append(&self.config.path)?;
        self.size = 0;
        Ok(())
    }
}

fn open_append(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new().create(true).append(true).mode(0o600).open(path)
}

/// Whether requests of `method` change something.
fn mutating(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// A mutating request being answered, to be recorded once it is.
pub struct Pending {
    log: AuditLog,
    slot: CallerSlot,
    method: String,
    path: String,
    remote: Option<String>,
}

impl Pending {
    /// Starts recording `req` if it changes something and there is an audit
    /// log: leaves a slot in it for the [`Caller`] extractor.
    pub fn start(log: Option<&AuditLog>, req: &mut Request) -> Option<Self> {
        let changes = mutating(req.method());
        Self::start_if(log, changes, req)
    }

    /// Starts recording `req` if `changes` (it changes something: a gRPC
    /// call says so by its method's name) and there is an audit log.
    pub fn start_if(log: Option<&AuditLog>, changes: bool, req: &mut Request) -> Option<Self> {
        let log = log.cloned().filter(|_| changes)?;
        let slot = CallerSlot::default();
        req.extensions_mut().insert(slot.clone());
        let remote = req.extensions().get::<axum::extract::ConnectInfo<std::net::SocketAddr>>().map(|c| c.0.to_string());
        Some(Self { log, slot, method: req.method().to_string(), path: req.uri().path().to_owned(), remote })
    }

    /// Records the request with its answer's `status`, `elapsed` after it came.
    pub async fn finish(self, status: u16, elapsed: std::time::Duration) {
        let caller = self.slot.take();
        let entry = Entry {
            time: Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true),
            subject: caller.as_ref().map(|c| c.subject.clone()),
            tenant: caller.as_ref().map(|c| c.tenant.clone()),
            role: caller.as_ref().map(|c| if c.is_admin() { "admin" } else { "tenant" }),
            method: self.method,
            path: self.path,
            status,
            result: match status {
                200..=299 => "ok",
                400..=499 => "refused",
                _ => "failed",
            },
            duration_ms: elapsed.as_secs_f64() * 1000.0,
            remote: self.remote,
        };
        self.log.record(entry).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(n: usize) -> Entry {
        Entry {
            time: "2026-01-01T00:00:00.000Z".into(),
            subject: Some(format!("user{n}")),
            tenant: Some("acme".into()),
            role: Some("tenant"),
            method: "POST".into(),
            path: "/api/fulfillment/v1/virtual_machines".into(),
            status: 201,
            result: "ok",
            duration_ms: 1.0,
            remote: None,
        }
    }

    #[test]
    fn the_log_rotates_by_size_and_keeps_n_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let mut r = Rotating::open(AuditConfig { path: path.clone(), max_bytes: 600, keep: 2 }).unwrap();
        for n in 0..40 {
            let mut line = serde_json::to_vec(&entry(n)).unwrap();
            line.push(b'\n');
            r.write(&line).unwrap();
        }
        let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
        let (now, one, two) = (read(&path), read(&dir.path().join("audit.log.1")), read(&dir.path().join("audit.log.2")));
        assert!(!dir.path().join("audit.log.3").exists(), "only two rotated files are kept");
        for text in [&now, &one, &two] {
            assert!(!text.is_empty() && text.len() <= 600, "{text}");
            for line in text.lines() {
                let v: serde_json::Value = serde_json::from_str(line).unwrap();
                assert_eq!(v["result"], "ok");
            }
        }
        assert!(now.contains("\"user39\""), "the newest line is in the current file");
        assert!(!format!("{now}{one}{two}").contains("\"user0\""), "the oldest lines went with the oldest file");
    }

    #[test]
    fn reads_are_not_audited() {
        assert!(!mutating(&Method::GET) && mutating(&Method::POST) && mutating(&Method::DELETE) && mutating(&Method::PATCH));
    }
}
