//! Which accelerator to run guests with: KVM where it really works, else TCG.
//!
//! `/dev/kvm` can exist and still be useless: on this project's machines it is
//! a nested PVM device, where KVM aborts or runs guests far slower than
//! software emulation (a million port-I/O exits take 9 s under it and 0.06 s
//! under TCG). So KVM is used only when `/dev/kvm` opens, the KVM module is not
//! the nested `kvm_pvm` flavour, and a probe guest runs under it; otherwise TCG.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde::Serialize;
use tokio::process::Command;

/// The accelerator a guest runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Accel {
    /// Hardware virtualization.
    Kvm,
    /// Software emulation.
    Tcg,
}

impl Accel {
    /// `kvm` or `tcg`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Kvm => "kvm",
            Self::Tcg => "tcg",
        }
    }
}

/// What the operator asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccelChoice {
    /// Detect.
    Auto,
    /// Force one.
    Force(Accel),
}

/// The accelerator chosen, and why.
#[derive(Debug, Clone, Serialize)]
pub struct AccelDecision {
    /// The accelerator.
    pub accel: Accel,
    /// Why it was chosen.
    pub reason: String,
}

/// A 64 KiB BIOS whose reset vector writes 0x31 to the isa-debug-exit port:
/// QEMU then exits with status (0x31 << 1) | 1 = 99.
fn probe_bios() -> Vec<u8> {
    let mut bios = vec![0xf4u8; 65536]; // hlt
    let code = [0xb0, 0x31, 0xe6, 0xf4, 0xf4, 0xeb, 0xfe]; // mov al,0x31; out 0xf4,al; hlt; jmp $
    bios[0xfff0..0xfff0 + code.len()].copy_from_slice(&code);
    bios
}

/// Why KVM does not run guests here.
#[derive(Debug, thiserror::Error)]
pub enum KvmProbe {
    /// The probe guest's BIOS could not be written.
    #[error("writing {}: {source}", path.display())]
    Write {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The probe guest did not finish.
    #[error("the KVM probe guest did not finish in 10 s")]
    Slow,
    /// QEMU could not be run.
    #[error("running {}: {source}", qemu.display())]
    Run {
        /// The binary.
        qemu: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The probe guest did not report success.
    #[error("the KVM probe guest failed ({status}): {stderr}")]
    Failed {
        /// How QEMU exited.
        status: std::process::ExitStatus,
        /// What it said.
        stderr: String,
    },
}

async fn kvm_runs_a_guest(qemu: &Path, scratch: &Path) -> Result<(), KvmProbe> {
    let bios = scratch.join("accel-probe.bin");
    std::fs::write(&bios, probe_bios()).map_err(|e| KvmProbe::Write { path: bios.clone(), source: e })?;
    let run = Command::new(qemu)
        .args(["-accel", "kvm", "-machine", "pc", "-nodefaults", "-no-user-config", "-display", "none", "-m", "16"])
        .arg("-bios")
        .arg(&bios)
        .args(["-device", "isa-debug-exit,iobase=0xf4,iosize=0x01"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(10), run).await.map_err(|_| KvmProbe::Slow)?;
    let _ = std::fs::remove_file(&bios);
    let out = out.map_err(|e| KvmProbe::Run { qemu: qemu.to_owned(), source: e })?;
    if out.status.code() == Some(99) {
        Ok(())
    } else {
        Err(KvmProbe::Failed { status: out.status, stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned() })
    }
}

/// Decides the accelerator.
pub async fn detect(choice: AccelChoice, qemu: &Path, scratch: &Path) -> AccelDecision {
    if let AccelChoice::Force(accel) = choice {
        return AccelDecision { accel, reason: "chosen with --accel".into() };
    }
    let tcg = |reason: String| AccelDecision { accel: Accel::Tcg, reason };
    if let Err(e) = std::fs::OpenOptions::new().read(true).write(true).open("/dev/kvm") {
        return tcg(format!("/dev/kvm cannot be opened: {e}"));
    }
    if Path::new("/sys/module/kvm_pvm").exists() {
        return tcg("/dev/kvm is the nested kvm_pvm device, which runs guests slower than TCG".into());
    }
    match kvm_runs_a_guest(qemu, scratch).await {
        Ok(()) => AccelDecision { accel: Accel::Kvm, reason: "/dev/kvm runs guests".into() },
        Err(e) => tcg(e.to_string()),
    }
}
