//! A minimal QMP client: connect, negotiate capabilities, run commands.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

/// Why a QMP exchange failed.
#[derive(Debug, thiserror::Error)]
pub enum QmpError {
    /// The socket could not be reached or broke.
    #[error("QMP socket: {0}")]
    Io(#[from] std::io::Error),
    /// QEMU answered with an error.
    #[error("QMP {command} failed: {class}: {desc}")]
    Command {
        /// The command sent.
        command: String,
        /// QEMU's error class.
        class: String,
        /// QEMU's description.
        desc: String,
    },
    /// QEMU closed the connection or sent something that is not QMP.
    #[error("QMP protocol: {0}")]
    Protocol(String),
    /// No answer in time.
    #[error("QMP: no answer within {0:?}")]
    Timeout(Duration),
}

/// A QMP session on QEMU's control socket.
pub struct Qmp {
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
    /// Events received while waiting for answers.
    pub events: Vec<Value>,
}

const TIMEOUT: Duration = Duration::from_secs(5);

impl Qmp {
    /// Connects to `socket` and leaves capabilities negotiation mode.
    pub async fn connect(socket: &Path) -> Result<Self, QmpError> {
        let stream = tokio::time::timeout(TIMEOUT, UnixStream::connect(socket)).await.map_err(|_| QmpError::Timeout(TIMEOUT))??;
        let (r, w) = stream.into_split();
        let mut q = Self { reader: BufReader::new(r), writer: w, events: Vec::new() };
        let greeting = q.read_message().await?;
        if greeting.get("QMP").is_none() {
            return Err(QmpError::Protocol(format!("expected the QMP greeting, got {greeting}")));
        }
        q.execute("qmp_capabilities", None).await?;
        Ok(q)
    }

    async fn read_message(&mut self) -> Result<Value, QmpError> {
        let mut line = String::new();
        let n = tokio::time::timeout(TIMEOUT, self.reader.read_line(&mut line)).await.map_err(|_| QmpError::Timeout(TIMEOUT))??;
        if n == 0 {
            return Err(QmpError::Protocol("QEMU closed the connection".into()));
        }
        serde_json::from_str(&line).map_err(|e| QmpError::Protocol(format!("{e}: {line}")))
    }

    /// Runs `command` with `arguments` and returns its `return` value.
    pub async fn execute(&mut self, command: &str, arguments: Option<Value>) -> Result<Value, QmpError> {
        let mut msg = json!({ "execute": command });
        if let Some(a) = arguments {
            msg["arguments"] = a;
        }
        let mut bytes = serde_json::to_vec(&msg).map_err(|e| QmpError::Protocol(e.to_string()))?;
        bytes.push(b'\n');
        self.writer.write_all(&bytes).await?;
        loop {
            let m = self.read_message().await?;
            if let Some(r) = m.get("return") {
                return Ok(r.clone());
            }
            if let Some(e) = m.get("error") {
                return Err(QmpError::Command {
                    command: command.into(),
                    class: e["class"].as_str().unwrap_or("?").into(),
                    desc: e["desc"].as_str().unwrap_or("?").into(),
                });
            }
            if m.get("event").is_some() {
                self.events.push(m);
            }
        }
    }

    /// Waits, however long it takes, for QEMU's next event (an answer
    /// cannot come: nothing is asked meanwhile); `None` once QEMU closes
    /// the socket.
    pub async fn next_event(&mut self) -> Result<Option<Value>, QmpError> {
        loop {
            let mut line = String::new();
            if self.reader.read_line(&mut line).await? == 0 {
                return Ok(None);
            }
            let m: Value = serde_json::from_str(&line).map_err(|e| QmpError::Protocol(format!("{e}: {line}")))?;
            if m.get("event").is_some() {
                return Ok(Some(m));
            }
        }
    }

    /// `query-status`: e.g. `running`, `paused`, `shutdown`.
    pub async fn status(&mut self) -> Result<String, QmpError> {
        let r = self.execute("query-status", None).await?;
        Ok(r["status"].as_str().unwrap_or("unknown").to_owned())
    }
}

/// How a migration (out or in) ended without completing.
pub(crate) enum Unfinished {
    /// QEMU said it failed or was cancelled, and why.
    Failed(String),
    /// It went on past its time limit.
    TimedOut,
    /// QEMU could not be asked.
    Unasked(String),
}

/// Asks QMP `query-migrate` every `every` until QEMU reports the migration
/// (out or in) over, for `limit` at most; its last answer.
pub(crate) async fn migration_over(q: &mut Qmp, limit: Duration, every: Duration) -> Result<Value, Unfinished> {
    migration_at(q, "completed", limit, every).await
}

/// Asks QMP `query-migrate` every `every` until the migration's status is
/// `status` (or it ended without completing), for `limit` at most; its
/// last answer.
pub(crate) async fn migration_at(q: &mut Qmp, status: &str, limit: Duration, every: Duration) -> Result<Value, Unfinished> {
    let start = Instant::now();
    loop {
        let r = q.execute("query-migrate", None).await.map_err(|e| Unfinished::Unasked(e.to_string()))?;
        match r["status"].as_str().unwrap_or("") {
            s if s == status => return Ok(r),
            "failed" | "cancelled" => {
                return Err(Unfinished::Failed(r["error-desc"].as_str().unwrap_or("the migration failed").to_owned()));
            }
            _ if start.elapsed() > limit => return Err(Unfinished::TimedOut),
            _ => tokio::time::sleep(every).await,
        }
    }
}
