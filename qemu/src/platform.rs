//! A guest's platform on qemu, from its [`Platform`]:
//! - EFI: OVMF's code (read-only, Debian's `ovmf`) and a variable store of
//!   the VM's own (`efi-vars.fd` in its directory, copied once from OVMF's
//!   template: Microsoft's keys enrolled when Secure Boot is on);
//! - Secure Boot: OVMF's Secure Boot build, SMM and a q35 machine (OVMF's
//!   SMM build runs on q35 only), the variable store writable in SMM alone;
//! - TPM 2.0: a `swtpm` of the VM's own (Debian's `swtpm`), its state in
//!   `tpm/` in the VM's directory, started before QEMU and ending with it
//!   (`--terminate`: it exits when QEMU closes its control socket);
//! - Windows: Hyper-V enlightenments and an RTC in local time.
//!
//! The variable store and the TPM state live in the VM's directory, so they
//! survive a stop and start and a restart of the server (QEMU and swtpm are
//! daemons of their own).

use std::path::{Path, PathBuf};
use std::time::Duration;

use vmaas_model::Platform;

/// Where the platform's programs and firmware are.
#[derive(Debug, Clone)]
pub struct PlatformPaths {
    /// OVMF's firmware files (`OVMF_CODE_4M*.fd`, `OVMF_VARS_4M*.fd`).
    pub ovmf_dir: PathBuf,
    /// `swtpm`.
    pub swtpm: PathBuf,
}

impl Default for PlatformPaths {
    fn default() -> Self {
        Self { ovmf_dir: "/usr/share/OVMF".into(), swtpm: "swtpm".into() }
    }
}

/// Why a VM's platform could not be made ready.
#[derive(Debug, thiserror::Error)]
pub enum PlatformError {
    /// A firmware file is missing or unreadable.
    #[error("EFI firmware {path}: {source} (install Debian's ovmf; scripts/deps.sh does)")]
    Firmware {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The VM's variable store or TPM state could not be written.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The cause.
        source: std::io::Error,
    },
    /// swtpm did not start.
    #[error("swtpm did not start: {0} (install Debian's swtpm; scripts/deps.sh does)")]
    Swtpm(String),
}

impl PlatformError {
    /// The reason a VM's status gives.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Firmware { .. } => "FirmwareMissing",
            Self::Io { .. } => "DiskError",
            Self::Swtpm(_) => "TpmFailed",
        }
    }
}

/// The firmware's two files.
#[derive(Debug, Clone, PartialEq)]
pub struct EfiFiles {
    /// OVMF's code, read-only.
    pub code: PathBuf,
    /// The VM's own variable store.
    pub vars: PathBuf,
    /// Whether the store is still OVMF's template, byte for byte (the
    /// guest never wrote to it): only then may the VM start as a clone of
    /// a template snapshot, whose store replaces it (see `clone.rs`).
    pub fresh: bool,
}

/// The platform's part of a QEMU command line.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PlatformArgs {
    /// What the guest gets.
    pub platform: Platform,
    /// Its firmware, when it boots EFI.
    pub efi: Option<EfiFiles>,
    /// swtpm's control socket, when it has a TPM.
    pub tpm: Option<PathBuf>,
}

/// The file names of a VM's platform state, in its directory.
pub const EFI_VARS: &str = "efi-vars.fd";
/// The TPM's state directory.
pub const TPM_DIR: &str = "tpm";
/// The TPM's state directory a live migration's new swtpm writes when the
/// running one writes [`TPM_DIR`] (swtpm locks its directory), and back.
pub const TPM_DIR_B: &str = "tpm-b";

/// The TPM state directory a live migration moves the state to from `current`.
pub fn other_tpm_dir(current: &str) -> &'static str {
    if current == TPM_DIR { TPM_DIR_B } else { TPM_DIR }
}
/// swtpm's control socket.
pub const TPM_SOCKET: &str = "swtpm.sock";
/// swtpm's pid file.
pub const TPM_PID: &str = "swtpm.pid";

/// Hyper-V enlightenments a Windows guest runs better with.
const HYPERV: &str = "hv-relaxed=on,hv-vapic=on,hv-spinlocks=0x1fff,hv-time=on,hv-vpindex=on,hv-synic=on,hv-stimer=on";

impl PlatformArgs {
    /// The machine type and its options: q35 with SMM for Secure Boot, else
    /// i440fx (`pc`); without an HPET either way (QEMU's emulated HPET wakes
    /// its main loop 250 times a second while the guest idles; guests keep
    /// time with the TSC and the local APIC's timer).
    pub fn machine(&self) -> &'static str {
        if self.platform.smm() { "q35,smm=on,hpet=off" } else { "pc,hpet=off" }
    }

    /// The `-cpu` model's options beyond the model (Hyper-V for Windows).
    pub fn cpu_options(&self) -> Option<&'static str> {
        self.platform.windows().then_some(HYPERV)
    }

    /// The arguments after the machine's: firmware, TPM, clock.
    pub fn args(&self) -> Vec<String> {
        let mut a = Vec::new();
        if let Some(efi) = &self.efi {
            if self.platform.smm() {
                a.extend(["-global".into(), "driver=cfi.pflash01,property=secure,value=on".into()]);
            }
            a.extend(["-drive".into(), format!("if=pflash,format=raw,unit=0,readonly=on,file={}", efi.code.display())]);
            a.extend(["-drive".into(), format!("if=pflash,format=raw,unit=1,file={}", efi.vars.display())]);
        }
        if let Some(sock) = &self.tpm {
            a.extend(["-chardev".into(), format!("socket,id=chrtpm,path={}", sock.display())]);
            a.extend(["-tpmdev".into(), "emulator,id=tpm0,chardev=chrtpm".into(), "-device".into(), "tpm-crb,tpmdev=tpm0".into()]);
        }
        if self.platform.windows() {
            a.extend(["-rtc".into(), "base=localtime".into()]);
        }
        a
    }
}

impl PlatformPaths {
    /// OVMF's code and variable-store template for `secure_boot`.
    fn ovmf(&self, secure_boot: bool) -> (PathBuf, PathBuf) {
        let (code, vars) =
            if secure_boot { ("OVMF_CODE_4M.secboot.fd", "OVMF_VARS_4M.ms.fd") } else { ("OVMF_CODE_4M.fd", "OVMF_VARS_4M.fd") };
        (self.ovmf_dir.join(code), self.ovmf_dir.join(vars))
    }

    /// Makes VM `dir`'s platform ready for a QEMU to start: its variable
    /// store (kept if it has one) and its swtpm (started afresh, on the
    /// TPM state in `tpm_state`).
    pub async fn prepare(&self, platform: Platform, dir: &Path, tpm_state: &str) -> Result<PlatformArgs, PlatformError> {
        let mut out = PlatformArgs { platform, ..PlatformArgs::default() };
        if platform.efi() {
            out.efi = Some(self.efi_files(platform.secure_boot, dir).await?);
        }
        if platform.tpm {
            stop_swtpm(dir).await;
            out.tpm = Some(self.spawn_swtpm(dir, tpm_state, TPM_SOCKET, TPM_PID).await?);
        }
        Ok(out)
    }

    async fn efi_files(&self, secure_boot: bool, dir: &Path) -> Result<EfiFiles, PlatformError> {
        let (code, template) = self.ovmf(secure_boot);
        tokio::fs::metadata(&code).await.map_err(|e| PlatformError::Firmware { path: code.clone(), source: e })?;
        let vars = dir.join(EFI_VARS);
        let pristine = tokio::fs::read(&template).await.map_err(|e| PlatformError::Firmware { path: template.clone(), source: e })?;
        let fresh = match tokio::fs::read(&vars).await {
            Ok(own) => own == pristine,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let path = vars.clone();
                let written = tokio::task::spawn_blocking(move || crate::atomic::write_atomic(&path, &pristine)).await;
                let io = |e| PlatformError::Io { context: format!("writing {}", vars.display()), source: e };
                written.map_err(std::io::Error::other).and_then(|r| r).map_err(io)?;
                true
            }
            Err(e) => return Err(PlatformError::Io { context: format!("reading {}", vars.display()), source: e }),
        };
        Ok(EfiFiles { code, vars, fresh })
    }

    /// Starts a second swtpm for a live migration's new QEMU (control
    /// socket and pid file `*.next`), on an empty `tpm_state` (swtpm locks
    /// the running one's): QEMU moves the TPM's state to it with the guest's.
    pub async fn start_target_swtpm(&self, dir: &Path, tpm_state: &str) -> Result<PathBuf, PlatformError> {
        let _ = tokio::fs::remove_file(dir.join(format!("{TPM_PID}.next"))).await;
        let state = dir.join(tpm_state);
        if let Err(e) = tokio::fs::remove_dir_all(&state).await
            && e.kind() != std::io::ErrorKind::NotFound
        {
            return Err(PlatformError::Io { context: format!("emptying {}", state.display()), source: e });
        }
        self.spawn_swtpm(dir, tpm_state, &format!("{TPM_SOCKET}.next"), &format!("{TPM_PID}.next")).await
    }

    async fn spawn_swtpm(&self, dir: &Path, tpm_state: &str, socket: &str, pid: &str) -> Result<PathBuf, PlatformError> {
        let state = dir.join(tpm_state);
        let io = |context: String| move |e| PlatformError::Io { context, source: e };
        tokio::fs::create_dir_all(&state).await.map_err(io(format!("creating {}", state.display())))?;
        let sock = dir.join(socket);
        let _ = tokio::fs::remove_file(&sock).await;
        let out = tokio::process::Command::new(&self.swtpm)
            .arg("socket")
            .arg("--tpm2")
            .arg("--tpmstate")
            .arg(format!("dir={}", state.display()))
            .arg("--ctrl")
            .arg(format!("type=unixio,path={}", sock.display()))
            .arg("--pid")
            .arg(format!("file={}", dir.join(pid).display()))
            .arg("--log")
            .arg(format!("file={},level=1", dir.join("swtpm.log").display()))
            .args(["--terminate", "--daemon"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .output()
            .await
            .map_err(|e| PlatformError::Swtpm(format!("running {}: {e}", self.swtpm.display())))?;
        if !out.status.success() {
            return Err(PlatformError::Swtpm(String::from_utf8_lossy(&out.stderr).trim().to_owned()));
        }
        for _ in 0..100 {
            if tokio::fs::try_exists(&sock).await.unwrap_or(false) {
                return Ok(sock);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Err(PlatformError::Swtpm(format!("{} did not appear", sock.display())))
    }
}

/// Stops the swtpm of VM `dir` if one runs (its pid file names it, and its
/// command line names the VM's directory).
pub async fn stop_swtpm(dir: &Path) {
    stop_swtpm_of(dir, TPM_PID).await;
}

/// Stops the swtpm a failed live migration started for its new QEMU.
pub async fn stop_target_swtpm(dir: &Path) {
    stop_swtpm_of(dir, &format!("{TPM_PID}.next")).await;
}

async fn stop_swtpm_of(dir: &Path, pid_file: &str) {
    let Some(pid) = crate::process::read_pid(&dir.join(pid_file)).await else { return };
    let marker = format!("dir={}/", dir.display());
    if let Some(p) = crate::process::Process::adopt(pid, &marker).await {
        p.kill_and_wait(Duration::from_secs(2)).await;
    }
    let _ = tokio::fs::remove_file(dir.join(pid_file)).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use vmaas_model::GuestProfile;

    fn platform(json: &str) -> Platform {
        serde_json::from_str::<GuestProfile>(json).unwrap().platform()
    }

    #[test]
    fn secure_boot_is_q35_with_smm_and_a_locked_variable_store() {
        let p = PlatformArgs {
            platform: platform(r#"{"firmware":"efi","secure_boot":true,"tpm":true}"#),
            efi: Some(EfiFiles { code: "/o/OVMF_CODE_4M.secboot.fd".into(), vars: "/v/efi-vars.fd".into(), fresh: true }),
            tpm: Some("/v/swtpm.sock".into()),
        };
        assert_eq!(p.machine(), "q35,smm=on,hpet=off");
        assert_eq!(
            p.args(),
            [
                "-global",
                "driver=cfi.pflash01,property=secure,value=on",
                "-drive",
                "if=pflash,format=raw,unit=0,readonly=on,file=/o/OVMF_CODE_4M.secboot.fd",
                "-drive",
                "if=pflash,format=raw,unit=1,file=/v/efi-vars.fd",
                "-chardev",
                "socket,id=chrtpm,path=/v/swtpm.sock",
                "-tpmdev",
                "emulator,id=tpm0,chardev=chrtpm",
                "-device",
                "tpm-crb,tpmdev=tpm0"
            ]
        );
        assert_eq!(p.cpu_options(), None);
    }

    #[test]
    fn windows_gets_hyperv_a_local_clock_and_by_default_secure_boot_and_a_tpm() {
        let p = PlatformArgs { platform: platform(r#"{"guest_os_family":"windows"}"#), ..PlatformArgs::default() };
        assert!(p.platform.secure_boot && p.platform.tpm && p.platform.efi());
        assert!(p.cpu_options().unwrap().contains("hv-relaxed=on") && p.cpu_options().unwrap().contains("hv-time=on"));
        assert!(p.args().windows(2).any(|w| w == ["-rtc", "base=localtime"]));
        let bios = PlatformArgs::default();
        assert_eq!((bios.machine(), bios.args().len(), bios.cpu_options()), ("pc,hpet=off", 0, None));
    }

    #[test]
    fn ovmf_files_follow_secure_boot() {
        let paths = PlatformPaths::default();
        assert_eq!(paths.ovmf(true).1, Path::new("/usr/share/OVMF/OVMF_VARS_4M.ms.fd"));
        assert_eq!(paths.ovmf(false).0, Path::new("/usr/share/OVMF/OVMF_CODE_4M.fd"));
    }
}
