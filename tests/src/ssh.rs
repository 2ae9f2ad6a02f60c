//! SSH into guests of the Debian image as the tenant's user `debian`, with
//! a key pair the test makes; only to addresses the server forwards on
//! loopback.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// A fresh ed25519 key pair in `dir`: (private key path, public key line).
pub fn keypair(dir: &Path) -> (PathBuf, String) {
    let key = dir.join("id_ed25519");
    let out =
        Command::new("ssh-keygen").args(["-q", "-t", "ed25519", "-N", "", "-C", "tenant@vmaas-test", "-f"]).arg(&key).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    (key, public.trim().to_owned())
}

/// Runs `command` on the VM at `ip` over SSH as `debian` with `key`.
pub fn ssh(ip: &str, key: &Path, command: &str) -> Output {
    Command::new("ssh")
        .args(["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "ConnectTimeout=5"])
        .args(["-o", "LogLevel=ERROR", "-i"])
        .arg(key)
        .arg(format!("debian@{ip}"))
        .arg(command)
        .output()
        .unwrap()
}

/// Runs `command` over SSH once the guest lets the key in and cloud-init
/// is done (retried for 5 minutes at most); the last attempt's output.
pub async fn ssh_once_up(ip: &str, key: &Path, command: &str) -> Output {
    let deadline = Instant::now() + Duration::from_secs(300);
    let command = format!("cloud-init status --wait >/dev/null; {command}");
    loop {
        let out = ssh(ip, key, &command);
        if out.status.success() || Instant::now() > deadline {
            return out;
        }
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
}
