//! Template snapshots: a VM of an image whose init has the clone hook
//! (`clone_hook` in `image.json`) starts from a snapshot of a guest that
//! booted once with the same image and shape, instead of booting.
//!
//! The template is booted with `vmaas.template` on its kernel command line
//! (an image its firmware boots gets it as an SMBIOS OEM string instead),
//! its RAM in a file mapped shared (`memory-backend-file,share=on`), a
//! blank seed disk at [`SEED_SLOT`] and a NIC on the user network at
//! [`USER_NIC_SLOT`] (restricted, a placeholder MAC). Once its init prints
//! `vmaas-guest: template settled` (drivers up, both devices probed, no
//! identity taken, no disk mounted), QMP `migrate` with `x-ignore-shared`
//! writes the device state to `state` (the RAM is already in `ram`, the
//! file itself), and the template QEMU quits.
//!
//! A clone's command line is the template's with its own files: `ram`
//! opened read-only and mapped private (`share=off,readonly=on,rom=off`:
//! pages it never writes stay shared with every other clone through the
//! page cache, and QEMU cannot punch the pages its guest frees out of the
//! file, as it does to a writable one), its own seed (of the blank one's
//! size) at the same slot, its own user network (its host name, its
//! forwards) behind the same NIC. It loads `state` with `migrate-incoming`,
//! gets its other NICs (on subnets) plugged in, and resumes. Nothing is
//! hotplugged for a clone with one NIC. Once the server watches the clone's
//! console it sends a line down it (see `lifecycle.rs`): the guest, waiting
//! for that line (and looking each second anyway), drops its cached blocks
//! of the blank seed, mounts the clone's, takes its host name, keys and
//! MACs (the NIC's device state is the template's, so the guest sets the
//! MAC the seed names), waits for every NIC the seed names and asks DHCP on
//! each. The `vmgenid` device gives each clone a new generation id, from
//! which the guest kernel reseeds its RNG.
//!
//! An EFI template's variable store (`efi-vars.fd`) stays in the snapshot:
//! QEMU saves the flash's contents with the device state and writes them
//! back to a clone's store when it resumes, and the firmware in the saved
//! RAM knows the store as it was, so a clone's store starts as a copy of
//! it (only while the VM's own is still OVMF's template: `clone.rs`).
//!
//! A snapshot's key hashes what makes two VMs' first moments the same: the
//! image's files (sizes and times), its manifest, QEMU's version, the
//! accelerator, CPUs, memory, the root disk's and the seed's sizes,
//! whether there is a user-network NIC, the platform and OVMF's code. A
//! changed image or QEMU makes a new key; when its snapshot is made, the
//! older ones of the same image and shape (its lineage) that no running
//! clone was restored from are pruned. Snapshots of other shapes stay.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::json;
use sha2::{Digest, Sha256};
use tracing::info;

use crate::argv::{QemuArgs, SEGMENT_NIC_SLOT, SegmentNicArg, USER_NIC_SLOT, UserNicArg, nic_device_arg};
use crate::console::SerialConsole;
use crate::images::Image;
use crate::process::Process;
use crate::qmp::Qmp;
use crate::qmp::Unfinished;

/// Bumped when what a snapshot holds changes shape (3: the guest agent's
/// virtio-serial port, a device the saved state must have; 4: the VGA;
/// 5: no HPET).
const FORMAT: u32 = 5;
/// What the template's init prints once it may be saved.
const SETTLED: &str = "vmaas-guest: template settled";
/// How long a template may take to settle (a cold boot under TCG).
const BOOT_LIMIT: Duration = Duration::from_secs(180);
/// How long saving or loading the device state may take.
const STATE_LIMIT: Duration = Duration::from_secs(60);
/// The MAC of a template's NIC: every clone's guest replaces it with its own.
pub(crate) const PLACEHOLDER_MAC: &str = "52:54:00:00:00:01";

/// One snapshot on disk: `DIR/snapshots/KEY/{ram,state}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Snapshot {
    /// Its key.
    pub(crate) key: String,
    /// Its directory.
    pub(crate) dir: PathBuf,
}

impl Snapshot {
    /// The guest's RAM.
    pub(crate) fn ram(&self) -> PathBuf {
        self.dir.join("ram")
    }

    /// The device state.
    fn state(&self) -> PathBuf {
        self.dir.join("state")
    }
}

/// What a snapshot is made of: the shape of the VMs that may use it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Shape {
    /// CPUs.
    pub(crate) cpus: u32,
    /// Memory in MiB.
    pub(crate) memory_mib: u64,
    /// The root disk's size in bytes.
    pub(crate) disk_bytes: u64,
    /// The seed disk's size in bytes (a clone's is the template's).
    pub(crate) seed_bytes: u64,
    /// Whether it has a NIC on the user network.
    pub(crate) user_nic: bool,
    /// Its firmware, TPM and OS family (the machine type and CPU model
    /// follow from them).
    pub(crate) platform: vmaas_model::Platform,
    /// OVMF's code, when it boots EFI.
    pub(crate) firmware: Option<PathBuf>,
}

/// The snapshots of one host, and who is making which.
pub(crate) struct Snapshots {
    dir: PathBuf,
    building: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Keys whose template could not be made, when and why: not tried
    /// again for [`RETRY_AFTER`] (every VM of that shape boots cold).
    failed: Mutex<HashMap<String, (Instant, String)>>,
}

/// How long a template that could not be made is not tried again.
const RETRY_AFTER: Duration = Duration::from_secs(600);

/// What a snapshot of `image` in `shape` is of, whatever the image's files
/// and QEMU's version: a new snapshot replaces those of the same lineage.
pub(crate) fn lineage(image: &Image, shape: &Shape) -> String {
    format!("{} {shape:?}", image.dir.display())
}

/// A file's size and modification time, for the key.
fn stamp(path: &Path) -> String {
    match std::fs::metadata(path) {
        Ok(m) => format!("{}:{:?}", m.len(), m.modified().ok()),
        Err(_) => "absent".into(),
    }
}

/// The key of a snapshot of `image` in `shape`, under QEMU `qemu_version`
/// and accelerator `accel`. Blocking (reads file times).
pub(crate) fn key(image: &Image, shape: &Shape, qemu_version: &str, accel: &str) -> String {
    let mut h = Sha256::new();
    let files = [
        image.dir.join("image.json"),
        image.disk(),
        image.kernel().unwrap_or_default(),
        image.initrd().unwrap_or_default(),
        shape.firmware.clone().unwrap_or_default(),
    ];
    let parts = [
        format!("format {FORMAT}"),
        format!("image {}", image.dir.display()),
        files.iter().map(|f| stamp(f)).collect::<Vec<_>>().join(","),
        format!("qemu {qemu_version}"),
        format!("accel {accel}"),
        format!("shape {} {} {} {} {}", shape.cpus, shape.memory_mib, shape.disk_bytes, shape.seed_bytes, shape.user_nic),
        format!("platform {:?}", shape.platform),
    ];
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    h.finalize().iter().take(12).map(|b| format!("{b:02x}")).collect()
}

impl Snapshots {
    /// Snapshots kept under `dir`.
    pub(crate) fn new(dir: PathBuf) -> Self {
        Self { dir, building: Mutex::new(HashMap::new()), failed: Mutex::new(HashMap::new()) }
    }

    /// Why `key`'s template could not be made, if it failed lately.
    pub(crate) fn failed_lately(&self, key: &str) -> Option<String> {
        let failed = self.failed.lock().unwrap_or_else(PoisonError::into_inner);
        failed.get(key).filter(|(at, _)| at.elapsed() < RETRY_AFTER).map(|(_, why)| why.clone())
    }

    /// Records that `key`'s template could not be made.
    pub(crate) fn record_failure(&self, key: &str, why: &str) {
        self.failed.lock().unwrap_or_else(PoisonError::into_inner).insert(key.to_owned(), (Instant::now(), why.to_owned()));
    }

    /// The snapshot of `key`, if it is complete on disk.
    pub(crate) fn find(&self, key: &str) -> Option<Snapshot> {
        let dir = self.dir.join(key);
        dir.join("done").is_file().then(|| Snapshot { key: key.to_owned(), dir })
    }

    /// The lock held while `key` is made: one template per key at a time.
    pub(crate) fn lock_for(&self, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut b = self.building.lock().unwrap_or_else(PoisonError::into_inner);
        b.entry(key.to_owned()).or_default().clone()
    }

    /// Where a snapshot of `key` is made before it is complete.
    pub(crate) fn staging(&self, key: &str) -> PathBuf {
        self.dir.join(format!(".{key}.new"))
    }
}

/// What a server killed while it made a template left in the snapshot
/// directory `dir`: the template's QEMU (its command line names a staging
/// directory) is killed and the staging directories removed. Blocking.
pub(crate) fn clean_up_after_crash(dir: &Path) {
    let staging = format!("{}/.", dir.display());
    let templates = crate::recover::processes().filter(|(_, args)| args.iter().any(|a| a.contains(&staging)));
    for (pid, _) in templates.collect::<Vec<_>>() {
        if let Some(p) = Process::hold(pid) {
            p.kill();
            info!(pid, "killed the QEMU of a template left by a crash");
        }
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten().filter(|e| e.file_name().to_string_lossy().starts_with('.')) {
        let _ = std::fs::remove_dir_all(e.path());
    }
}

/// Why a template snapshot could not be made or restored.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// A file of it could not be written.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// Why.
        source: std::io::Error,
    },
    /// QMP refused or did not answer.
    #[error("{context}: {source}")]
    Qmp {
        /// What was being done.
        context: &'static str,
        /// Why.
        source: crate::qmp::QmpError,
    },
    /// The template's guest panicked.
    #[error("the template's kernel panicked: {0}")]
    Panicked(String),
    /// The template's QEMU exited; its last lines.
    #[error("the template's QEMU exited before it settled: {0}")]
    Exited(String),
    /// The template's guest did not settle in time.
    #[error("the template did not print {what:?} within {limit:?}: {last}")]
    Silent {
        /// What it should have printed.
        what: String,
        /// How long it had.
        limit: Duration,
        /// Its last lines.
        last: String,
    },
    /// QEMU failed to save or load the device state.
    #[error("QEMU: {0}")]
    StateFailed(String),
    /// QEMU could not be asked how the device state moves.
    #[error("asking how the state moves: {0}")]
    StateUnasked(String),
    /// The device state did not move in time.
    #[error("the device state did not move within {:?}", STATE_LIMIT)]
    StateTimedOut,
    /// QEMU could not be started.
    #[error(transparent)]
    Start(#[from] crate::process::StartError),
    /// A blocking task died.
    #[error("{0}")]
    Task(#[from] tokio::task::JoinError),
}

impl SnapshotError {
    fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io { context: context.into(), source }
    }

    fn qmp(context: &'static str) -> impl Fn(crate::qmp::QmpError) -> Self {
        move |source| Self::Qmp { context, source }
    }
}

impl Snapshots {
    /// Makes the snapshot made in `staging` the one of `key`, a snapshot
    /// of `image` in `shape` (the `done` file says which: see [`lineage`]).
    pub(crate) async fn publish(&self, key: &str, staging: &Path, lineage: &str) -> Result<Snapshot, SnapshotError> {
        let dir = self.dir.join(key);
        let _ = tokio::fs::remove_dir_all(&dir).await;
        tokio::fs::rename(staging, &dir).await.map_err(|e| SnapshotError::io(format!("keeping the snapshot in {}", dir.display()), e))?;
        tokio::fs::write(dir.join("done"), lineage).await.map_err(|e| SnapshotError::io("marking the snapshot done", e))?;
        Ok(Snapshot { key: key.to_owned(), dir })
    }

    /// Removes the snapshots `lineage`'s new one replaces (of the same
    /// image and shape: an older image or QEMU), but those in `keep` (keys
    /// in use: of a running clone, or just made). Snapshots of other images
    /// or shapes stay: VMs of several shapes take turns without remaking
    /// each other's.
    pub(crate) async fn prune(&self, keep: &[String], lineage: &str) {
        let Ok(mut entries) = tokio::fs::read_dir(&self.dir).await else { return };
        while let Ok(Some(e)) = entries.next_entry().await {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || keep.contains(&name) {
                continue;
            }
            // A snapshot of an older format (an empty `done`) is replaced too.
            let of = tokio::fs::read_to_string(e.path().join("done")).await.unwrap_or_default();
            if (of.is_empty() || of == lineage) && tokio::fs::remove_dir_all(e.path()).await.is_ok() {
                info!(snapshot = %name, "snapshot pruned");
            }
        }
    }
}

/// Waits until `console` has printed `what`, while `process` runs.
async fn until_printed(console: &SerialConsole, process: &Process, what: &str, limit: Duration) -> Result<(), SnapshotError> {
    let start = Instant::now();
    loop {
        let out = String::from_utf8_lossy(&console.history()).into_owned();
        if out.contains(what) {
            return Ok(());
        }
        if let Some(line) = crate::probe::panic_line(&out) {
            return Err(SnapshotError::Panicked(line.to_string()));
        }
        if process.has_exited() {
            return Err(SnapshotError::Exited(console.last_lines(5)));
        }
        if start.elapsed() > limit {
            return Err(SnapshotError::Silent { what: what.to_owned(), limit, last: console.last_lines(5) });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until QEMU reports the device state saved or loaded.
async fn until_migrated(q: &mut Qmp) -> Result<(), SnapshotError> {
    match crate::qmp::migration_over(q, STATE_LIMIT, Duration::from_millis(2)).await {
        Ok(_) => Ok(()),
        Err(Unfinished::Failed(why)) => Err(SnapshotError::StateFailed(why)),
        Err(Unfinished::Unasked(e)) => Err(SnapshotError::StateUnasked(e)),
        Err(Unfinished::TimedOut) => Err(SnapshotError::StateTimedOut),
    }
}

/// Turns `x-ignore-shared` on (RAM in a shared file is not in the
/// stream) or off (a clone's later live migration sends all of it).
async fn ignore_shared(q: &mut Qmp, on: bool) -> Result<(), SnapshotError> {
    let caps = json!({"capabilities": [{"capability": "x-ignore-shared", "state": on}]});
    q.execute("migrate-set-capabilities", Some(caps)).await.map(|_| ()).map_err(SnapshotError::qmp("migrate-set-capabilities"))
}

/// Starts QEMU with `args`, daemonized; its process.
pub(crate) async fn spawn(qemu: &Path, args: &QemuArgs, id: &str) -> Result<Process, SnapshotError> {
    Ok(crate::process::start_daemonized(qemu, &args.to_args(), &args.pidfile, id).await?)
}

/// Boots the template QEMU of `args` (whose RAM is `staging/ram`, shared)
/// until it settles, and saves its device state to `staging/state`.
pub(crate) async fn make(qemu: &Path, args: &QemuArgs, staging: &Path) -> Result<(), SnapshotError> {
    let process = spawn(qemu, args, "template").await?;
    let result = save(args, &process, staging).await;
    process.kill_and_wait(Duration::from_secs(5)).await;
    result?;
    for f in ["ram", "state"] {
        let path = staging.join(f);
        tokio::task::spawn_blocking(move || std::fs::File::open(&path).and_then(|f| f.sync_all()))
            .await?
            .map_err(|e| SnapshotError::io(format!("syncing the snapshot's {f}"), e))?;
    }
    Ok(())
}

async fn save(args: &QemuArgs, process: &Process, staging: &Path) -> Result<(), SnapshotError> {
    let console = SerialConsole::attach(&args.serial, staging.join("console.log"))
        .await
        .map_err(|e| SnapshotError::io("the template's serial", e))?;
    until_printed(&console, process, SETTLED, BOOT_LIMIT).await?;
    let mut q = Qmp::connect(&args.qmp).await.map_err(SnapshotError::qmp("connecting to the template's QMP"))?;
    ignore_shared(&mut q, true).await?;
    let uri = format!("file:{}", staging.join("state").display());
    q.execute("migrate", Some(json!({"uri": uri}))).await.map_err(SnapshotError::qmp("saving the template's state"))?;
    until_migrated(&mut q).await?;
    let _ = q.execute("quit", None).await;
    Ok(())
}

/// What a clone gets plugged in after its restore: the devices its
/// template had none of.
pub(crate) struct Identity<'a> {
    /// Its NICs on QEMU's user network: the first is on its command line
    /// (the template's NIC), the others are plugged in.
    pub(crate) nics: &'a [UserNicArg],
    /// Its NICs on subnets.
    pub(crate) segment_nics: &'a [SegmentNicArg],
}

/// Loads `snap` into the clone QEMU waiting on `qmp` (`-incoming
/// defer`), plugs in what `id` has beyond the template, and resumes the
/// guest.
pub(crate) async fn restore(qmp: &Path, snap: &Snapshot, id: &Identity<'_>) -> Result<(), SnapshotError> {
    let mut q = Qmp::connect(qmp).await.map_err(SnapshotError::qmp("connecting to the clone's QMP"))?;
    ignore_shared(&mut q, true).await?;
    let uri = format!("file:{}", snap.state().display());
    q.execute("migrate-incoming", Some(json!({"uri": uri}))).await.map_err(SnapshotError::qmp("loading the snapshot"))?;
    until_migrated(&mut q).await?;
    ignore_shared(&mut q, false).await?;
    for cmd in plugs(id) {
        let (name, arguments) = (cmd["execute"].as_str().unwrap_or_default().to_owned(), cmd["arguments"].clone());
        q.execute(&name, Some(arguments)).await.map_err(SnapshotError::qmp("plugging in the clone's devices"))?;
    }
    q.execute("cont", None).await.map_err(SnapshotError::qmp("resuming the clone"))?;
    Ok(())
}

/// The NICs after the first, with their slots.
fn plugged_nics<'a>(id: &'a Identity<'_>) -> impl Iterator<Item = (u32, &'a UserNicArg)> {
    id.nics.iter().enumerate().skip(1).map(|(i, n)| (USER_NIC_SLOT + i as u32, n))
}

/// The same devices as QEMU arguments, for a QEMU that takes the running
/// clone over (a live migration's target), without host forwards (the
/// target adds them once it runs).
pub(crate) fn plugged_args(id: &Identity<'_>) -> Vec<String> {
    let mut out = Vec::new();
    let mut nic = |netdev: String, id: &str, mac: &str, slot: u32| {
        out.extend(["-netdev".to_owned(), netdev, "-device".to_owned(), nic_device_arg(id, mac, Some(slot))]);
    };
    for (slot, n) in plugged_nics(id) {
        nic(n.netdev_arg(false), &n.id, &n.mac, slot);
    }
    for (i, n) in id.segment_nics.iter().enumerate() {
        nic(n.netdev_arg(), &n.id, &n.mac, SEGMENT_NIC_SLOT + i as u32);
    }
    out
}

/// The QMP commands that plug a clone's further NICs in, in order.
fn plugs(id: &Identity<'_>) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    let nic = |netdev: &str, mac: &str, slot: u32| {
        json!({"execute": "device_add", "arguments": {
            "driver": "virtio-net-pci", "netdev": netdev, "id": format!("dev-{netdev}"), "mac": mac, "addr": format!("{slot:#x}"),
        }})
    };
    for (slot, n) in plugged_nics(id) {
        let hostfwd: Vec<_> = n.forwards.iter().map(|f| json!({"str": f.rule()})).collect();
        out.push(json!({"execute": "netdev_add", "arguments": {
            "type": "user", "id": n.id, "net": crate::argv::USER_NET, "dhcpstart": crate::argv::GUEST_IP,
            "hostname": n.hostname, "restrict": !n.egress, "hostfwd": hostfwd,
        }}));
        out.push(nic(&n.id, &n.mac, slot));
    }
    for (i, n) in id.segment_nics.iter().enumerate() {
        let addr = match &n.addr {
            vmaas_switch::PortAddr::Tcp(port) => json!({"type": "inet", "host": "127.0.0.1", "port": port.to_string()}),
            vmaas_switch::PortAddr::Unix(path) => json!({"type": "unix", "path": path}),
        };
        out.push(json!({"execute": "netdev_add", "arguments": {
            "type": "stream", "id": n.id, "server": false, "addr": addr, "reconnect-ms": 1000,
        }}));
        out.push(nic(&n.id, &n.mac, SEGMENT_NIC_SLOT + i as u32));
    }
    out
}

#[cfg(test)]
mod tests {
    use vmaas_model::Protocol;

    use super::*;
    use crate::argv::Forward;

    #[test]
    fn a_clone_gets_the_nics_its_template_has_not_at_fixed_slots() {
        let fwd = Forward { protocol: Protocol::Tcp, host: std::net::Ipv4Addr::LOCALHOST, host_port: 40001, guest_port: 80 };
        let user = |id: &str, mac: &str, forwards: Vec<Forward>| UserNicArg {
            id: id.into(),
            mac: mac.into(),
            hostname: "web".into(),
            forwards,
            egress: false,
            model: vmaas_model::NicModel::Virtio,
        };
        let nics = [user("nic-default", "52:54:00:12:34:56", vec![fwd.clone()]), user("nic-other", "52:54:00:12:34:57", vec![fwd])];
        let seg = [SegmentNicArg { id: "nic-subnet0".into(), addr: vmaas_switch::PortAddr::Tcp(40007), mac: "02:00:00:00:00:07".into() }];
        let p = plugs(&Identity { nics: &nics, segment_nics: &seg });
        let names: Vec<&str> = p.iter().map(|c| c["execute"].as_str().unwrap()).collect();
        assert_eq!(names, ["netdev_add", "device_add", "netdev_add", "device_add"], "the first NIC is the template's");
        assert_eq!((p[0]["arguments"]["id"].as_str(), p[0]["arguments"]["restrict"].as_bool()), (Some("nic-other"), Some(true)));
        assert_eq!(p[0]["arguments"]["hostfwd"], json!([{"str": "tcp:127.0.0.1:40001-:80"}]));
        assert_eq!((p[1]["arguments"]["mac"].as_str(), p[1]["arguments"]["addr"].as_str()), (Some("52:54:00:12:34:57"), Some("0x11")));
        assert_eq!(p[2]["arguments"]["addr"], json!({"type": "inet", "host": "127.0.0.1", "port": "40007"}));
        assert_eq!(p[3]["arguments"]["addr"], "0x14");
        let a = plugged_args(&Identity { nics: &nics, segment_nics: &seg });
        assert_eq!(a[1], "user,id=nic-other,net=10.0.2.0/24,dhcpstart=10.0.2.15,hostname=web,restrict=on");
        assert_eq!(a[3], "virtio-net-pci,netdev=nic-other,id=dev-nic-other,mac=52:54:00:12:34:57,addr=0x11");
        assert_eq!(a[5], "stream,id=nic-subnet0,server=off,addr.type=inet,addr.host=127.0.0.1,addr.port=40007,reconnect-ms=1000");
        assert_eq!(
            a[7], "virtio-net-pci,netdev=nic-subnet0,id=dev-nic-subnet0,mac=02:00:00:00:00:07,addr=0x14",
            "the same slots as plugged"
        );
        assert_eq!(a.len(), 8);
        assert!(plugs(&Identity { nics: &nics[..1], segment_nics: &[] }).is_empty(), "one NIC: nothing is plugged");
    }

    #[test]
    fn the_key_changes_with_the_image_and_the_shape() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("image.json"), "{}").unwrap();
        std::fs::write(d.path().join("disk.qcow2"), "a").unwrap();
        let manifest: crate::images::ImageManifest = serde_json::from_str(r#"{"name": "t", "disk": "disk.qcow2"}"#).unwrap();
        let image = Image { manifest, dir: d.path().to_owned() };
        let shape = Shape {
            cpus: 1,
            memory_mib: 256,
            disk_bytes: 1 << 30,
            seed_bytes: 2 << 20,
            user_nic: true,
            platform: vmaas_model::Platform::default(),
            firmware: None,
        };
        let k = key(&image, &shape, "10.0.2", "tcg");
        assert_eq!(k, key(&image, &shape, "10.0.2", "tcg"), "stable");
        assert_ne!(k, key(&image, &Shape { memory_mib: 512, ..shape.clone() }, "10.0.2", "tcg"));
        assert_ne!(k, key(&image, &Shape { seed_bytes: 3 << 20, ..shape.clone() }, "10.0.2", "tcg"), "a seed of another size");
        assert_ne!(k, key(&image, &Shape { user_nic: false, ..shape.clone() }, "10.0.2", "tcg"), "no NIC");
        assert_ne!(k, key(&image, &shape, "10.1.0", "tcg"), "another QEMU");
        let efi = vmaas_model::Platform { firmware: vmaas_model::Firmware::Efi, ..vmaas_model::Platform::default() };
        assert_ne!(k, key(&image, &Shape { platform: efi, ..shape.clone() }, "10.0.2", "tcg"), "another firmware");
        std::fs::write(d.path().join("disk.qcow2"), "changed").unwrap();
        assert_ne!(k, key(&image, &shape, "10.0.2", "tcg"), "a changed image");
    }
}
