//! Supervision of one QEMU process through a pidfd: no polling of `/proc`
//! to see it exit, and signals that cannot reach a recycled pid.

use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::process::{Pid, PidfdFlags, Signal, pidfd_open, pidfd_send_signal};
use tokio::io::unix::AsyncFd;

/// A live QEMU process of one VM.
#[derive(Debug)]
pub struct Process {
    pid: i32,
    fd: AsyncFd<OwnedFd>,
}

impl Process {
    /// Takes hold of process `pid` if it is alive and runs QEMU for VM `id`
    /// (its command line names the VM). Reads `/proc` once, off the runtime.
    pub async fn adopt(pid: i32, id: &str) -> Option<Self> {
        let id = id.to_owned();
        let ours = tokio::task::spawn_blocking(move || {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            String::from_utf8_lossy(&cmdline).contains(&id)
        })
        .await
        .unwrap_or(false);
        if !ours {
            return None;
        }
        Self::hold(pid)
    }

    /// Takes hold of process `pid`, already known (from its command line) to
    /// be the VM's QEMU, if it is alive.
    pub fn hold(pid: i32) -> Option<Self> {
        let fd = pidfd_open(Pid::from_raw(pid)?, PidfdFlags::empty()).ok()?;
        // `AsyncFd::new` is deprecated for fds that may be closed behind its
        // back; an `OwnedFd` it owns cannot be, which is what its unsafe
        // successor asks the caller to promise.
        #[allow(deprecated)]
        let fd = AsyncFd::new(fd).ok()?;
        let p = Self { pid, fd };
        (!p.has_exited()).then_some(p)
    }

    /// The pid.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Whether the process has exited (its pidfd is readable).
    pub fn has_exited(&self) -> bool {
        let mut fds = [PollFd::new(self.fd.get_ref(), PollFlags::IN)];
        let zero = Timespec { tv_sec: 0, tv_nsec: 0 };
        match poll(&mut fds, Some(&zero)) {
            Ok(n) => n > 0,
            Err(_) => true,
        }
    }

    /// Resolves once the process has exited, however it exits.
    pub async fn exited(&self) {
        if let Ok(mut guard) = self.fd.readable().await {
            guard.retain_ready();
        }
    }

    /// Sends SIGKILL.
    pub fn kill(&self) {
        let _ = pidfd_send_signal(self.fd.get_ref(), Signal::KILL);
    }

    /// Kills the process and waits up to `wait` for it to be gone; false if it survives.
    pub async fn kill_and_wait(&self, wait: Duration) -> bool {
        self.kill();
        tokio::time::timeout(wait, self.exited()).await.is_ok() || self.has_exited()
    }
}

/// The pid in a pid file, if it holds one.
pub async fn read_pid(path: &Path) -> Option<i32> {
    tokio::fs::read_to_string(path).await.ok()?.trim().parse().ok()
}

/// QEMU's refusal (the whole message) if it refused a host forward: its
/// address or port was taken by another process.
pub(crate) fn forward_refused(e: &StartError) -> Option<String> {
    match e {
        StartError::Refused(said) if said.contains("host forwarding") || said.contains("hostfwd") => Some(e.to_string()),
        _ => None,
    }
}

/// Why a QEMU that daemonizes itself did not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartError {
    /// It could not be run at all.
    #[error("{0}")]
    Run(String),
    /// It refused to start, saying this.
    #[error("QEMU refused to start: {0}")]
    Refused(String),
    /// It started but wrote no pid file.
    #[error("QEMU started but wrote no pid file")]
    NoPidFile,
    /// It exited right after it started.
    #[error("QEMU (pid {0}) exited right after it started")]
    Exited(i32),
}

/// Runs `qemu` with `args`, which daemonize it and have it write
/// `pidfile`, and takes hold of the process it leaves for VM `id`.
pub async fn start_daemonized(qemu: &Path, args: &[std::ffi::OsString], pidfile: &Path, id: &str) -> Result<Process, StartError> {
    let out = tokio::process::Command::new(qemu)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .output()
        .await
        .map_err(|e| StartError::Run(format!("running {}: {e}", qemu.display())))?;
    if !out.status.success() {
        return Err(StartError::Refused(String::from_utf8_lossy(&out.stderr).trim().to_owned()));
    }
    let pid = read_pid(pidfile).await.ok_or(StartError::NoPidFile)?;
    Process::adopt(pid, id).await.ok_or(StartError::Exited(pid))
}

/// A TCP port free on 127.0.0.1 right now.
pub fn free_local_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sees_a_process_exit_without_polling() {
        let mut child = tokio::process::Command::new("sh")
            .args(["-c", "read line", "vmaas-test-marker"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id().unwrap() as i32;
        // Right after the fork the child may not have exec'd yet: its command line is still ours.
        let mut adopted = None;
        for _ in 0..100 {
            adopted = Process::adopt(pid, "vmaas-test-marker").await;
            if adopted.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let p = adopted.expect("the shell's command line names the marker");
        assert!(Process::adopt(pid, "someone-else").await.is_none(), "another VM's process is not adopted");
        assert!(!p.has_exited());
        assert!(p.kill_and_wait(Duration::from_secs(5)).await);
        assert!(p.has_exited());
        let _ = child.wait().await;
    }
}
