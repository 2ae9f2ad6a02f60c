//! The guest agent: QEMU's guest agent protocol (JSON lines) over the
//! virtio-serial port `org.qemu.guest_agent.0` every VM has, the unix
//! socket [`SOCKET`] in the VM's directory on this side. A snapshot asks
//! it to freeze the guest's file systems just before the instant is fixed
//! and to thaw them just after, so the snapshot holds them as after a
//! clean unmount. A guest without an agent does not answer `guest-sync`
//! within [`PRESENT`]: its snapshot is crash-consistent, as before.
//!
//! Any agent speaking the protocol serves: Debian's `qemu-guest-agent`, or
//! the test guest's few lines of shell (`guest/init`).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tracing::{info, warn};

/// The agent's socket, in the VM's directory.
pub const SOCKET: &str = "qga.sock";
/// How long an agent has to answer `guest-sync` to count as there.
const PRESENT: Duration = Duration::from_secs(1);
/// How long a freeze or a thaw may take.
const FREEZING: Duration = Duration::from_secs(10);

/// Why the agent did not do what was asked.
#[derive(Debug, thiserror::Error)]
enum AgentError {
    #[error("guest agent socket: {0}")]
    Io(#[from] std::io::Error),
    #[error("the guest agent did not answer within {0:?}")]
    Timeout(Duration),
    #[error("the guest agent refused {command}: {error}")]
    Refused { command: String, error: Value },
    #[error("the guest agent closed the connection")]
    Closed,
}

/// A session with a guest's agent.
struct Agent {
    stream: BufReader<UnixStream>,
}

impl Agent {
    /// Connects and synchronises (`guest-sync` with a fresh id, skipping
    /// whatever an earlier session left unread); none when no agent answers.
    async fn connect(socket: &Path) -> Option<Self> {
        let stream = tokio::time::timeout(PRESENT, UnixStream::connect(socket)).await.ok()?.ok()?;
        let mut agent = Self { stream: BufReader::new(stream) };
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
        let id = u64::from(std::process::id()) << 30 | u64::from(nanos);
        let sync = agent.call("guest-sync", Some(json!({ "id": id })), PRESENT, |r| r.as_u64() == Some(id)).await;
        sync.ok().map(|_| agent)
    }

    /// Sends `command` and waits up to `wait` for the answer `matches` accepts.
    async fn call(
        &mut self,
        command: &str,
        args: Option<Value>,
        wait: Duration,
        matches: impl Fn(&Value) -> bool,
    ) -> Result<Value, AgentError> {
        let mut msg = json!({ "execute": command });
        if let Some(a) = args {
            msg["arguments"] = a;
        }
        let mut bytes = msg.to_string().into_bytes();
        bytes.push(b'\n');
        self.stream.get_mut().write_all(&bytes).await?;
        let deadline = Instant::now() + wait;
        loop {
            let mut line = String::new();
            let left = deadline.saturating_duration_since(Instant::now());
            let n = tokio::time::timeout(left, self.stream.read_line(&mut line)).await.map_err(|_| AgentError::Timeout(wait))??;
            if n == 0 {
                return Err(AgentError::Closed);
            }
            // Bytes that are not a JSON object (a delimiter, noise) are skipped.
            let Ok(answer) = serde_json::from_str::<Value>(line.trim_start_matches('\u{ff}').trim()) else { continue };
            if let Some(error) = answer.get("error") {
                return Err(AgentError::Refused { command: command.to_owned(), error: error.clone() });
            }
            if let Some(r) = answer.get("return").filter(|r| matches(r)) {
                return Ok(r.clone());
            }
        }
    }
}

/// File systems frozen by a guest's agent, to be thawed.
pub struct Frozen {
    agent: Agent,
    /// How many file systems the agent froze.
    pub count: u64,
    since: Instant,
}

/// Asks the agent on `socket` to freeze the guest's file systems: none when
/// no agent answers, or it froze none (nothing to thaw then).
pub async fn freeze(socket: &Path) -> Option<Frozen> {
    if !socket.exists() {
        return None;
    }
    let mut agent = Agent::connect(socket).await?;
    let since = Instant::now();
    match agent.call("guest-fsfreeze-freeze", None, FREEZING, Value::is_u64).await {
        Ok(n) if n.as_u64().unwrap_or(0) > 0 => Some(Frozen { count: n.as_u64().unwrap_or(0), agent, since }),
        Ok(_) => None,
        Err(e) => {
            warn!(socket = %socket.display(), error = %e, "the guest agent did not freeze; thawing to be safe");
            let _ = agent.call("guest-fsfreeze-thaw", None, FREEZING, Value::is_u64).await;
            None
        }
    }
}

impl Frozen {
    /// Thaws what was frozen; how long the file systems stayed frozen.
    pub async fn thaw(mut self) -> Duration {
        if let Err(e) = self.agent.call("guest-fsfreeze-thaw", None, FREEZING, Value::is_u64).await {
            warn!(error = %e, "the guest agent did not say it thawed the file systems");
        }
        let held = self.since.elapsed();
        info!(file_systems = self.count, frozen_ms = held.as_secs_f64() * 1000.0, "guest file systems frozen and thawed");
        held
    }
}
