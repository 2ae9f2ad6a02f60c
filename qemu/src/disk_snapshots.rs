//! Snapshots of VMs' disks on this host: `DATA_DIR/disk-snapshots/<id>/`,
//! one qcow2 file per disk and a `snapshot.json` that says what was taken.
//!
//! Each disk's file is the top layer of the VM's disk, with the same
//! backing file (the image the disk starts as, which stays shared): what
//! the guest wrote, not the image again.
//!
//! - **Online** (the guest runs): one QMP `transaction` starts a
//!   `blockdev-backup` with `sync: top` per disk, so that every disk is
//!   taken at the same instant; copy-before-write keeps that instant while
//!   the guest goes on writing, and the guest is never paused. The files
//!   are then as after a power cut at that instant (crash-consistent).
//! - **Offline** (the VM is stopped): each disk file is copied.
//!
//! A snapshot is made under `<id>.part` and renamed once whole, so a
//! directory with a snapshot's id always holds all of it. A restore copies
//! each file back over the disk it was taken from, the VM being stopped.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chrono::Utc;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tracing::info;
use vmaas_backend::Taken;
use vmaas_model::SnapshotDisk;
use vmaas_model::snapshot::SnapshotConsistency;

use crate::qmp::{Qmp, QmpError};
use crate::volumes::DiskError;

/// The manifest in each snapshot's directory.
const MANIFEST: &str = "snapshot.json";
/// How long the copy of one snapshot's disks may take.
const COPY_LIMIT: Duration = Duration::from_secs(1800);
/// How often a running copy is looked at.
const POLL: Duration = Duration::from_millis(10);

/// Why a snapshot could not be taken, restored or removed.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// A file could not be read or written.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Why.
        source: std::io::Error,
    },
    /// `qemu-img` failed.
    #[error(transparent)]
    Disk(#[from] DiskError),
    /// QEMU refused or failed a command.
    #[error("{what}: {source}")]
    Qmp {
        /// What was being done.
        what: &'static str,
        /// Why.
        source: QmpError,
    },
    /// QEMU's copy of a disk failed.
    #[error("copying disk {disk}: {reason}")]
    Copy {
        /// The disk.
        disk: String,
        /// QEMU's words.
        reason: String,
    },
    /// The snapshot's files are not here.
    #[error("snapshot {0} is not on this host")]
    Missing(String),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> SnapshotError {
    let what = what.into();
    move |source| SnapshotError::Io { what, source }
}

fn qmp(what: &'static str) -> impl FnOnce(QmpError) -> SnapshotError {
    move |source| SnapshotError::Qmp { what, source }
}

/// One disk of a VM, as a snapshot takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Source {
    /// Its name in the snapshot: the machine's disk name, or `volume:ID`.
    pub(crate) name: String,
    /// Its file.
    pub(crate) file: PathBuf,
    /// Its block node in the running QEMU.
    pub(crate) node: String,
}

/// A running guest's QEMU, as an online copy reaches it.
#[derive(Debug, Clone)]
pub(crate) struct Online {
    /// Its QMP socket.
    pub(crate) qmp: PathBuf,
    /// Its guest agent's socket.
    pub(crate) agent: PathBuf,
}

/// What a copy at one instant did.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Copied {
    /// How consistent the copies are.
    pub(crate) consistency: SnapshotConsistency,
    /// How long the transaction held the guest's disks (online).
    pub(crate) held: Option<Duration>,
    /// How long the guest's agent kept its file systems frozen, if it did.
    pub(crate) frozen: Option<Duration>,
}

/// What `snapshot.json` says.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Manifest {
    online: bool,
    consistency: SnapshotConsistency,
    taken_at: chrono::DateTime<Utc>,
    disks: Vec<SnapshotDisk>,
    /// How long the guest's disks were held for the instant (online), in
    /// microseconds: the QMP transaction's time.
    #[serde(default)]
    held_us: u64,
    /// How long the guest's file systems stayed frozen by its agent, in
    /// microseconds (none: no agent froze them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    frozen_us: Option<u64>,
}

impl From<Manifest> for Taken {
    fn from(m: Manifest) -> Self {
        Taken { online: m.online, consistency: m.consistency, disks: m.disks, taken_at: m.taken_at }
    }
}

/// The snapshots on this host.
#[derive(Debug, Clone)]
pub(crate) struct DiskSnapshots {
    dir: PathBuf,
    qemu_img: PathBuf,
}

/// A disk's file name in a snapshot's directory.
fn file_name(disk: &str) -> String {
    format!("{}.qcow2", disk.replace(':', "-"))
}

impl DiskSnapshots {
    /// Snapshots kept under `dir`.
    pub(crate) fn new(dir: PathBuf, qemu_img: PathBuf) -> Self {
        Self { dir, qemu_img }
    }

    fn path(&self, id: &str) -> PathBuf {
        self.dir.join(id)
    }

    /// Whether snapshot `id` is whole here (its manifest written).
    pub(crate) fn holds(&self, id: &str) -> bool {
        self.path(id).join(MANIFEST).is_file()
    }

    /// Snapshot `id` as taken, if it is whole here.
    pub(crate) async fn taken(&self, id: &str) -> Option<Taken> {
        let bytes = tokio::fs::read(self.path(id).join(MANIFEST)).await.ok()?;
        serde_json::from_slice::<Manifest>(&bytes).ok().map(Taken::from)
    }

    /// The file of disk `disk` of snapshot `id`, and where its export is kept.
    pub(crate) fn export_paths(&self, id: &str, disk: &str) -> (PathBuf, PathBuf) {
        let dir = self.path(id);
        (dir.join(file_name(disk)), dir.join(format!("export-{}", file_name(disk))))
    }

    /// Takes snapshot `id` of `sources`: online through the running guest's
    /// QEMU (`online`: its QMP and agent sockets), else by copying the files.
    pub(crate) async fn take(&self, id: &str, sources: &[Source], online: Option<&Online>) -> Result<Taken, SnapshotError> {
        let part = self.dir.join(format!("{id}.part"));
        let _ = tokio::fs::remove_dir_all(&part).await;
        tokio::fs::create_dir_all(&part).await.map_err(io(format!("creating {}", part.display())))?;
        let targets: Vec<PathBuf> = sources.iter().map(|s| part.join(file_name(&s.name))).collect();
        let copied = self.copy(sources, &targets, online).await?;
        let mut disks = Vec::new();
        for (s, t) in sources.iter().zip(&targets) {
            disks.push(SnapshotDisk { name: s.name.clone(), size_bytes: allocated(t).await? });
        }
        let micros = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let held_us = copied.held.map(micros).unwrap_or(0);
        let (consistency, frozen_us) = (copied.consistency, copied.frozen.map(micros));
        let manifest = Manifest { online: online.is_some(), consistency, taken_at: Utc::now(), disks, held_us, frozen_us };
        let body = serde_json::to_vec_pretty(&manifest).map_err(|e| io("writing the manifest")(e.into()))?;
        tokio::fs::write(part.join(MANIFEST), body).await.map_err(io("writing the manifest"))?;
        tokio::fs::rename(&part, self.path(id)).await.map_err(io(format!("moving {} into place", part.display())))?;
        info!(snapshot = %id, online = manifest.online, disks = manifest.disks.len(), held_us, "snapshot taken");
        Ok(manifest.into())
    }

    /// Copies the disks of `sources` to `targets`, at one instant: online
    /// through the running guest's QEMU (`online`), else by copying the files.
    pub(crate) async fn copy(&self, sources: &[Source], targets: &[PathBuf], online: Option<&Online>) -> Result<Copied, SnapshotError> {
        match online {
            Some(on) => {
                for (s, t) in sources.iter().zip(targets) {
                    self.create_like(&s.file, t).await?;
                }
                backup(on, sources, targets).await
            }
            None => {
                for (s, t) in sources.iter().zip(targets) {
                    tokio::fs::copy(&s.file, t).await.map_err(io(format!("copying {}", s.file.display())))?;
                }
                Ok(Copied { consistency: SnapshotConsistency::Stopped, held: None, frozen: None })
            }
        }
    }

    /// A new qcow2 file at `target` of `source`'s size and with its
    /// backing file: what a `sync: top` copy fills.
    async fn create_like(&self, source: &Path, target: &Path) -> Result<(), SnapshotError> {
        let info = qemu_img_info(&self.qemu_img, source).await?;
        let size = info["virtual-size"].as_u64().unwrap_or(0).to_string();
        let mut args: Vec<String> = vec!["create".into(), "-q".into(), "-f".into(), "qcow2".into()];
        if let Some(backing) = info["full-backing-filename"].as_str().or_else(|| info["backing-filename"].as_str()) {
            let format = info["backing-filename-format"].as_str().unwrap_or("qcow2");
            args.extend(["-F".into(), format.into(), "-b".into(), backing.into()]);
        }
        args.extend([target.to_string_lossy().into_owned(), size]);
        let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_ref()).collect();
        crate::volumes::qemu_img(&self.qemu_img, &args).await?;
        Ok(())
    }

    /// Copies the disks of snapshot `id` named in `dests` back over their
    /// files (each through a temporary file, renamed once whole); returns
    /// the names of the disks restored.
    pub(crate) async fn restore(&self, id: &str, dests: &[(String, PathBuf)]) -> Result<Vec<String>, SnapshotError> {
        let taken = self.taken(id).await.ok_or_else(|| SnapshotError::Missing(id.to_owned()))?;
        let mut done = Vec::new();
        for d in &taken.disks {
            let Some((_, dest)) = dests.iter().find(|(n, _)| *n == d.name) else { continue };
            let tmp = dest.with_extension("qcow2.restoring");
            let from = self.path(id).join(file_name(&d.name));
            tokio::fs::copy(&from, &tmp).await.map_err(io(format!("copying {}", from.display())))?;
            tokio::fs::rename(&tmp, dest).await.map_err(io(format!("replacing {}", dest.display())))?;
            done.push(d.name.clone());
        }
        info!(snapshot = %id, disks = ?done, "disks restored from a snapshot");
        Ok(done)
    }

    /// Removes snapshot `id` (and a half-made one).
    pub(crate) async fn remove(&self, id: &str) -> Result<(), SnapshotError> {
        for p in [self.dir.join(format!("{id}.part")), self.path(id)] {
            match tokio::fs::remove_dir_all(&p).await {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io(format!("removing {}", p.display()))(e)),
            }
        }
        Ok(())
    }

    /// Removes every snapshot here that is not in `known`.
    pub(crate) async fn retain(&self, known: &[String]) -> Result<(), SnapshotError> {
        let Ok(mut entries) = tokio::fs::read_dir(&self.dir).await else { return Ok(()) };
        while let Some(e) = entries.next_entry().await.map_err(io("listing snapshots"))? {
            let name = e.file_name().to_string_lossy().into_owned();
            let id = name.strip_suffix(".part").unwrap_or(&name);
            if !known.iter().any(|k| k == id) {
                info!(snapshot = %id, "removing the files of a snapshot that is gone");
                self.remove(id).await?;
            }
        }
        Ok(())
    }
}

/// What `qemu-img info` says of `file` (shared: QEMU may have it open).
async fn qemu_img_info(bin: &Path, file: &Path) -> Result<Value, SnapshotError> {
    let out = crate::volumes::qemu_img(bin, &["info".as_ref(), "-U".as_ref(), "--output=json".as_ref(), file.as_os_str()]).await?;
    serde_json::from_slice(&out).map_err(|e| DiskError::QemuImg(format!("reading qemu-img info: {e}")).into())
}

/// The bytes `file` holds on disk.
async fn allocated(file: &Path) -> Result<u64, SnapshotError> {
    use std::os::unix::fs::MetadataExt;
    let m = tokio::fs::metadata(file).await.map_err(io(format!("reading {}", file.display())))?;
    Ok(m.blocks() * 512)
}

/// The job of disk `i` of a snapshot.
fn job(i: usize) -> String {
    format!("snap-job-{i}")
}

/// Copies the top layer of every source into its target at one instant
/// (one transaction, the guest's file systems frozen around it if its
/// agent answers), waits for the copies, and lets go of the targets.
async fn backup(on: &Online, sources: &[Source], targets: &[PathBuf]) -> Result<Copied, SnapshotError> {
    let mut q = Qmp::connect(&on.qmp).await.map_err(qmp("connecting to QMP"))?;
    let nodes: Vec<String> = (0..sources.len()).map(|i| format!("snap-target-{i}")).collect();
    for (node, target) in nodes.iter().zip(targets) {
        let args = json!({"driver": "qcow2", "node-name": node, "file": {"driver": "file", "filename": target}});
        q.execute("blockdev-add", Some(args)).await.map_err(qmp("opening a snapshot file"))?;
    }
    let actions: Vec<Value> = sources
        .iter()
        .zip(&nodes)
        .enumerate()
        .map(|(i, (s, node))| {
            json!({"type": "blockdev-backup", "data": {"job-id": job(i), "device": s.node, "target": node, "sync": "top", "auto-dismiss": false}})
        })
        .collect();
    let frozen = crate::agent::freeze(&on.agent).await;
    let started = Instant::now();
    let begun = q.execute("transaction", Some(json!({"actions": actions}))).await.map_err(qmp("starting the copies"));
    let held = started.elapsed();
    // The instant is fixed: the guest writes on while the copies run.
    let consistency = if frozen.is_some() { SnapshotConsistency::FilesystemFrozen } else { SnapshotConsistency::CrashConsistent };
    let frozen = match frozen {
        Some(f) => Some(f.thaw().await),
        None => None,
    };
    let copied = match begun {
        Ok(_) => wait_for_jobs(&mut q, sources).await,
        Err(e) => Err(e),
    };
    for node in &nodes {
        let _ = q.execute("blockdev-del", Some(json!({"node-name": node}))).await;
    }
    copied.map(|()| Copied { consistency, held: Some(held), frozen })
}

/// Waits until every copy of `sources` has concluded, dismissing each;
/// the first failure is the error.
async fn wait_for_jobs(q: &mut Qmp, sources: &[Source]) -> Result<(), SnapshotError> {
    let deadline = Instant::now() + COPY_LIMIT;
    let mut pending: Vec<usize> = (0..sources.len()).collect();
    let mut failed = None;
    while !pending.is_empty() {
        let jobs = q.execute("query-jobs", None).await.map_err(qmp("watching the copies"))?;
        let mut still = Vec::new();
        for i in pending {
            let id = job(i);
            let me = jobs.as_array().and_then(|a| a.iter().find(|j| j["id"] == id.as_str()));
            match me {
                Some(j) if j["status"] == "concluded" => {
                    if let Some(reason) = j["error"].as_str() {
                        failed.get_or_insert(SnapshotError::Copy { disk: sources[i].name.clone(), reason: reason.to_owned() });
                    }
                    let _ = q.execute("job-dismiss", Some(json!({"id": id}))).await;
                }
                Some(_) => still.push(i),
                None => {
                    let reason = "the copy vanished".to_owned();
                    failed.get_or_insert(SnapshotError::Copy { disk: sources[i].name.clone(), reason });
                }
            }
        }
        pending = still;
        if !pending.is_empty() {
            if Instant::now() > deadline {
                for i in &pending {
                    let _ = q.execute("job-cancel", Some(json!({"id": job(*i), "force": true}))).await;
                }
                return Err(SnapshotError::Copy { disk: sources[pending[0]].name.clone(), reason: "it took too long".into() });
            }
            tokio::time::sleep(POLL).await;
        }
    }
    failed.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_volume_disk_has_a_plain_file_name() {
        assert_eq!(file_name("root"), "root.qcow2");
        assert_eq!(file_name("volume:0b3c"), "volume-0b3c.qcow2");
    }
}
