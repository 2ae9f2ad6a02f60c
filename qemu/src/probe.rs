//! Readiness probes: the template's check, run through a private host
//! forward until the guest answers, in a task of its own.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::{AbortHandle, JoinHandle};
use tokio::time::Instant;
use vmaas_model::{MachineSpec, Probe, ProbeCheck, Protocol};

use crate::qmp::Qmp;

/// The probe a VM is checked with: the template's, else a TCP check of the
/// first exposed TCP port, else none (ready once the guest prints on its console).
pub fn effective_probe(spec: &MachineSpec) -> Option<Probe> {
    spec.readiness_probe.clone().or_else(|| {
        spec.exposed_ports.iter().find(|p| p.protocol == Protocol::Tcp).map(|p| Probe {
            check: ProbeCheck::Tcp { port: p.port },
            period_seconds: 1,
            timeout_seconds: 300,
        })
    })
}

/// What a probe task needs.
pub struct ProbeJob {
    /// The check, if any.
    pub probe: Option<Probe>,
    /// The host port forwarded to the probed guest port.
    pub port: Option<u16>,
    /// The VM's QMP socket.
    pub qmp: PathBuf,
    /// The console log (readiness without a probe).
    pub console_log: PathBuf,
}

/// Checks in flight at once at most: a check through QEMU's user network
/// may wait seconds for a guest whose NIC is not up yet (its first packet
/// lost, the user network retrying after seconds), so new ones start each
/// pause while up to this many wait; beyond it, the oldest is given up
/// once it is [`MIN_AGE`] old. The guest is seen ready when it is, not
/// when a stale check gives up.
const IN_FLIGHT: usize = 32;

/// How long a check runs at least before a newer one may take its place:
/// a guest that answers, but slowly (busy booting, under an emulated CPU),
/// is given this long for each answer.
const MIN_AGE: Duration = Duration::from_secs(1);

/// Runs `job` until the guest answers, then sets `ready` and calls `on_ready`.
pub fn spawn(job: ProbeJob, ready: Arc<AtomicBool>, on_ready: impl FnOnce() + Send + 'static) -> JoinHandle<()> {
    tokio::spawn(async move {
        let job = Arc::new(job);
        let period = job.probe.as_ref().map(|p| p.period_seconds).unwrap_or(1);
        let pause = Duration::from_millis(u64::from(period) * 20).clamp(Duration::from_millis(20), Duration::from_millis(200));
        let mut checks = tokio::task::JoinSet::new();
        let mut started = std::collections::VecDeque::new();
        loop {
            make_room(&mut started);
            if started.len() < IN_FLIGHT {
                let job = job.clone();
                started.push_back((Instant::now(), checks.spawn(async move { check(&job).await })));
            }
            let next = tokio::time::sleep(pause);
            tokio::pin!(next);
            loop {
                tokio::select! {
                    done = checks.join_next(), if !checks.is_empty() => if let Some(Ok(true)) = done {
                        ready.store(true, Ordering::SeqCst);
                        on_ready();
                        return;
                    },
                    _ = &mut next => break,
                }
            }
        }
    })
}

/// Forgets the checks that ended and, with [`IN_FLIGHT`] still waiting,
/// gives up the oldest if it is at least [`MIN_AGE`] old.
fn make_room(started: &mut std::collections::VecDeque<(Instant, AbortHandle)>) {
    started.retain(|(_, check)| !check.is_finished());
    if started.len() >= IN_FLIGHT
        && started.front().is_some_and(|(at, _)| at.elapsed() >= MIN_AGE)
        && let Some((_, oldest)) = started.pop_front()
    {
        oldest.abort();
    }
}

/// One readiness check of `job`: its probe, or without one a console that
/// has printed something.
pub async fn check(job: &ProbeJob) -> bool {
    match (&job.probe, job.port) {
        (Some(p), Some(port)) => probe_once(&p.check, port, &job.qmp).await,
        _ => tokio::fs::metadata(&job.console_log).await.map(|m| m.len() > 0).unwrap_or(false),
    }
}

/// One readiness check through the probe forward on 127.0.0.1:`port`.
async fn probe_once(check: &ProbeCheck, port: u16, qmp: &Path) -> bool {
    let connect = tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(("127.0.0.1", port)));
    let Ok(Ok(mut s)) = connect.await else { return false };
    match check {
        ProbeCheck::Http { path, .. } => {
            let req = format!("GET {path} HTTP/1.0\r\nHost: localhost\r\nUser-Agent: vmaas-probe\r\n\r\n");
            if s.write_all(req.as_bytes()).await.is_err() {
                return false;
            }
            let mut buf = [0u8; 32];
            let read = tokio::time::timeout(Duration::from_secs(3), s.read(&mut buf)).await;
            let Ok(Ok(n)) = read else { return false };
            let line = String::from_utf8_lossy(&buf[..n]);
            let code = line.split_whitespace().nth(1).and_then(|c| c.parse::<u16>().ok());
            matches!(code, Some(200..=399))
        }
        ProbeCheck::Tcp { .. } => {
            // QEMU's user network accepts on the host side at once, whether or
            // not the guest listens. Ask QEMU whether its side of this
            // connection reached ESTABLISHED with the guest (a banner, or
            // the end of a refused connection, may come first), after a
            // short wait for either.
            let mut buf = [0u8; 1];
            match tokio::time::timeout(Duration::from_millis(50), s.read(&mut buf)).await {
                Ok(Ok(n)) if n > 0 => return true,
                Ok(_) => return false,
                Err(_) => {}
            }
            let Ok(mut q) = Qmp::connect(qmp).await else { return false };
            let cmd = serde_json::json!({"command-line": "info usernet"});
            let Ok(table) = q.execute("human-monitor-command", Some(cmd)).await else { return false };
            let established = usernet_established(table.as_str().unwrap_or(""), port);
            drop(s);
            established
        }
    }
}

/// Whether QEMU's user-network table shows an established TCP connection
/// through the host forward on 127.0.0.1:`port`.
fn usernet_established(table: &str, port: u16) -> bool {
    table.lines().any(|l| {
        let cols: Vec<&str> = l.split_whitespace().collect();
        cols.len() >= 4 && cols[0] == "TCP[ESTABLISHED]" && cols[2] == "127.0.0.1" && cols[3] == port.to_string()
    })
}

/// The first line of `console` that reports a kernel panic, if any.
pub fn panic_line(console: &str) -> Option<String> {
    console.lines().find(|l| l.contains("Kernel panic") || l.contains("PANIC: early exception")).map(|l| l.trim().to_owned())
}

/// What a probe waits for, for messages.
pub fn describe(probe: Option<&Probe>) -> String {
    match probe.map(|p| &p.check) {
        Some(ProbeCheck::Http { port, path }) => format!("an HTTP GET of port {port}{path}"),
        Some(ProbeCheck::Tcp { port }) => format!("a TCP connection to port {port}"),
        None => "console output".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks that wait are given up oldest first, and only once they are
    /// a second old and the room is full; ended ones are forgotten.
    #[tokio::test]
    async fn slow_checks_keep_their_second() {
        let mut tasks = tokio::task::JoinSet::new();
        let mut started = std::collections::VecDeque::new();
        let done = tasks.spawn(async {});
        while !done.is_finished() {
            tokio::task::yield_now().await;
        }
        started.push_back((Instant::now(), done));
        for _ in 0..IN_FLIGHT {
            started.push_back((Instant::now(), tasks.spawn(std::future::pending::<()>())));
        }
        make_room(&mut started);
        assert_eq!(started.len(), IN_FLIGHT, "the ended one is forgotten, no waiting one given up before its second");
        let oldest = started[0].1.id();
        started[0].0 = Instant::now() - MIN_AGE;
        make_room(&mut started);
        assert_eq!(started.len(), IN_FLIGHT - 1);
        assert!(started.iter().all(|(_, c)| c.id() != oldest), "the oldest one went");
        started[0].0 = Instant::now() - MIN_AGE;
        make_room(&mut started);
        assert_eq!(started.len(), IN_FLIGHT - 1, "with room, nothing more is given up");
    }

    #[test]
    fn reads_the_usernet_table() {
        let table = "Hub -1 (net0):\n  Protocol[State]    FD  Source Address  Port   Dest. Address  Port RecvQ SendQ\n  TCP[ESTABLISHED]   19       127.0.0.1 45269       10.0.2.15    22     0     0\n  TCP[SYN_SYNC]      20       127.0.0.1 45270       10.0.2.15    22     0     0\n  TCP[HOST_FORWARD]  14       127.0.0.1 45269       10.0.2.15    22     0     0\n";
        assert!(usernet_established(table, 45269));
        assert!(!usernet_established(table, 45270));
        assert!(!usernet_established(table, 1));
        assert!(panic_line("ok\n[ 0.1] Kernel panic - not syncing: VFS\n").unwrap().starts_with("[ 0.1] Kernel panic"));
    }
}
