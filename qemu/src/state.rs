//! What is kept on disk for each VM (`vm.json`), written crash-consistently:
//! a temporary file, fsynced, then renamed over the old one.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use vmaas_backend::BackendError;

use crate::atomic::write_atomic;

/// A volume the running QEMU has, as kept in `vm.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PluggedVolume {
    /// The volume's id.
    pub volume: String,
    /// Its serial (its device is `vol-SERIAL`).
    pub serial: String,
    /// The size QEMU has for it.
    pub size_bytes: u64,
}

/// Name of the state file in a VM's directory.
pub const STATE_FILE: &str = "vm.json";

/// One VM's state file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VmFile {
    /// The VM's id.
    pub id: String,
    /// Its tenant.
    pub tenant: String,
    /// Its name.
    pub name: String,
    /// Its external IP, once allocated.
    pub external_ip: Option<Ipv4Addr>,
    /// The host port forwarded to the guest's probe port in the current boot.
    #[serde(default)]
    pub probe_port: Option<u16>,
    /// The restart generation acted on.
    #[serde(default)]
    pub restarts: u64,
    /// The QEMU process whose guest passed its readiness probe: a server
    /// that re-adopts that process reports it ready at once.
    #[serde(default)]
    pub ready_pid: Option<i32>,
    /// The forwards applied beyond its own (external IPs attached, ports
    /// its load balancers reach), as QEMU has them now.
    #[serde(default)]
    pub forwards: Vec<crate::argv::Forward>,
    /// The CPUs, memory and disk sizes the running QEMU was started with.
    #[serde(default)]
    pub booted: Option<vmaas_model::boot_shape::BootShape>,
    /// The volumes the running QEMU has (from its command line or plugged since).
    #[serde(default)]
    pub volumes: Vec<PluggedVolume>,
    /// The migration generation acted on.
    #[serde(default)]
    pub migrations: u64,
    /// The restore generation acted on.
    #[serde(default)]
    pub restores: u64,
    /// How long the last restore took to put the disks back, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_ms: Option<u64>,
    /// The directory of its TPM's state, if not [`crate::platform::TPM_DIR`]
    /// (a live migration's new swtpm writes the other one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpm_state: Option<String>,
    /// How far its running QEMU can be resized live (what it started with).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live: Option<crate::live::LiveArgs>,
    /// The host GPUs (PCI addresses) the running QEMU has.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<String>,
    /// The loopback TCP ports of its NICs on subnets, in order: a restarted
    /// server serves each NIC on the port its QEMU reconnects to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nic_ports: Vec<u16>,
    /// The template snapshot the running QEMU was restored from, if any:
    /// kept while a clone may need it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
    /// The devices plugged into a clone after its restore, as QEMU
    /// arguments: a live migration's target has them on its command line.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plugged: Vec<String>,
}

impl VmFile {
    /// Reads `dir/vm.json`; `None` when there is none or it does not decode.
    pub async fn load(dir: &Path) -> Option<Result<Self, serde_json::Error>> {
        let text = tokio::fs::read(dir.join(STATE_FILE)).await.ok()?;
        Some(serde_json::from_slice(&text))
    }

    /// Writes `dir/vm.json` atomically, off the async runtime.
    pub async fn save(&self, dir: &Path) -> Result<(), BackendError> {
        save_json(dir.join(STATE_FILE), self).await
    }
}

/// Writes `value` as JSON to `path` atomically, off the async runtime; a
/// failure is transient (the next reconcile writes it again). The directory
/// must exist: a VM's is not made again by a late save after its removal.
pub async fn save_json<T: Serialize>(path: PathBuf, value: &T) -> Result<(), BackendError> {
    let context = format!("saving {}", path.display());
    let data = serde_json::to_vec_pretty(value).map_err(|e| BackendError::transient(context.clone(), e))?;
    tokio::task::spawn_blocking(move || write_atomic(&path, &data))
        .await
        .map_err(|e| BackendError::transient(context.clone(), e))?
        .map_err(|e| BackendError::transient(context, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn saves_atomically_and_reads_back() {
        let d = tempfile::tempdir().unwrap();
        let f = VmFile {
            id: "a".into(),
            tenant: "t".into(),
            name: "n".into(),
            external_ip: None,
            probe_port: Some(4),
            restarts: 2,
            ready_pid: Some(7),
            forwards: Vec::new(),
            booted: None,
            volumes: Vec::new(),
            gpus: vec!["0000:65:00.0".into()],
            migrations: 1,
            restores: 0,
            restore_ms: None,
            nic_ports: vec![40001],
            snapshot: Some("0a1b2c".into()),
            plugged: vec!["-device".into(), "virtio-blk-pci,drive=cidata,id=dev-cidata,addr=0x1e".into()],
            tpm_state: Some("tpm-b".into()),
            live: Some(crate::live::LiveArgs { max_cpus: 4, boot_memory_mib: 256, region_mib: 768 }),
        };
        f.save(d.path()).await.unwrap();
        assert_eq!(VmFile::load(d.path()).await.unwrap().unwrap(), f);
        assert!(!d.path().join("vm.tmp").exists());
        std::fs::write(d.path().join(STATE_FILE), b"{").unwrap();
        assert!(VmFile::load(d.path()).await.unwrap().is_err());
    }
}
