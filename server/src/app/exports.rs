//! Exports: a stopped VM's disk, a volume not on a running VM, or a
//! snapshot's disk, as one self-contained qcow2 (the image under it folded
//! in, so an image import takes it back). A backend that can compose it
//! as it is read ([`vmaas_backend::ExportStream`]: a stopped VM's disk on
//! this host) sends it from its first byte with no file of its own; else
//! it is converted into a file first, and a conversion that fails is an
//! error. Its checksum (SHA-256, or CRC-32 when the client asks:
//! [`Checksum`]) comes before the body when known (a snapshot's kept
//! export's SHA-256) or asked for first ([`DigestAt::First`]: the bytes
//! are hashed before the first is sent), else after it
//! ([`DigestAt::After`]: hashed as they are read and sent). Each export holds a place among its
//! tenant's exports under way, and a file made for it counts against the
//! tenant's disk quota, until it is sent or the stream is dropped
//! ([`crate::export_slots`]); dropping it removes a temporary file and
//! lets a disk held unchanged go.

use std::pin::Pin;

use bytes::Bytes;
use futures::Stream;
use tracing::info;
use vmaas_backend::{ExportFile, ExportSource, ExportStream};
use vmaas_model::checksum::{Checksum, Hasher};
use vmaas_model::{ComputeInstanceSnapshot, ComputeInstanceSnapshotState, PowerState, VmState, Volume};

use super::scope::scope;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::export_slots::ExportSlot;
use crate::state::AppState;

/// Where the caller takes an export's checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DigestAt {
    /// Before the body: a file not hashed yet is hashed before it is sent.
    First,
    /// After the body, when it is not known before: hashed as it is sent.
    After,
}

/// The checksum a client asks an export to come with, and where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Asked {
    /// Before the body or after it.
    pub at: DigestAt,
    /// Which.
    pub checksum: Checksum,
}

/// An export made: the file's name, size and checksum (hex) when known
/// before its bytes, and its bytes.
pub(crate) struct Export {
    /// What is exported (the file is `{name}.qcow2`).
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
    /// Which checksum it comes with.
    pub checksum: Checksum,
    /// That checksum, in hex, when known before the body; else the body's
    /// last piece is [`Piece::Digest`].
    pub digest: Option<String>,
    /// Its bytes, in chunks of 1 MiB.
    pub body: Pin<Box<dyn Stream<Item = std::io::Result<Piece>> + Send>>,
}

/// A piece of an export's body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece {
    /// Bytes of the file, in order.
    Bytes(Bytes),
    /// After the last bytes, the export's checksum (hex) of them all.
    Digest(String),
}

/// The boot disk of the caller's stopped VM `id`.
pub(crate) async fn vm(s: &AppState, caller: &Caller, id: &str, asked: Asked) -> Result<Export, ApiError> {
    let vm = s.store.get_vm(id, &scope(caller)).await?;
    if vm.power() != PowerState::Stopped || vm.status.state != VmState::Stopped {
        return Err(ApiError::field(
            "spec.state",
            format!("virtual machine {:?} is running (or stopping): stop it and wait until it is STOPPED to export its disk", vm.name),
        ));
    }
    let bytes = vm.machine.disks.first().and_then(|d| d.size.to_units_ceil()).unwrap_or(0);
    export(s, caller, ExportSource::VmDisk(vm.id.clone()), (&vm.name, bytes), asked).await
}

/// The caller's volume `id` (not attached to a running VM).
pub(crate) async fn volume(s: &AppState, caller: &Caller, id: &str, asked: Asked) -> Result<Export, ApiError> {
    let v = s.store.get_record::<Volume>(id, &scope(caller)).await?;
    if let Some(a) = s.store.volume_holder(&v.id).await? {
        let vm = s.store.get_vm(&a.spec.compute_instance, &crate::store::Scope::All).await?;
        if vm.status.state != VmState::Stopped {
            return Err(ApiError::field(
                "status.attached_to",
                format!(
                    "volume {:?} is on virtual machine {:?}, which is not STOPPED: stop the VM or detach the volume first",
                    v.name, vm.name
                ),
            ));
        }
    }
    let bytes = v.spec.size.to_units_ceil().unwrap_or(0);
    export(s, caller, ExportSource::Volume(v.id.clone()), (&v.name, bytes), asked).await
}

/// One disk of the caller's snapshot `id` (`wanted`: as its `status.disks`
/// names it; by default its first, the boot disk).
pub(crate) async fn snapshot(s: &AppState, caller: &Caller, id: &str, wanted: Option<String>, asked: Asked) -> Result<Export, ApiError> {
    let snap = s.store.get_record::<ComputeInstanceSnapshot>(id, &scope(caller)).await?;
    if snap.status.state != ComputeInstanceSnapshotState::Ready {
        return Err(ApiError::field("status.state", format!("snapshot {:?} is {}, not READY", snap.name, snap.status.state)));
    }
    if let Some(d) = wanted.as_deref().filter(|d| !snap.status.disks.iter().any(|x| x.name == *d)) {
        let names: Vec<&str> = snap.status.disks.iter().map(|x| x.name.as_str()).collect();
        return Err(ApiError::field("disk", format!("snapshot {:?} has no disk {d:?}; it has {}", snap.name, names.join(", "))));
    }
    let disk = wanted.as_deref().or_else(|| snap.status.disks.first().map(|d| d.name.as_str()));
    let bytes = snap.status.disks.iter().find(|d| Some(d.name.as_str()) == disk).map_or(0, |d| d.size_bytes);
    export(s, caller, ExportSource::Snapshot { id: snap.id.clone(), disk: wanted }, (&snap.name, bytes), asked).await
}

/// A place among the caller's exports under way for one expected to hold
/// `bytes`, within its disk quota (what its VMs, volumes and images hold
/// plus its other exports' files).
async fn slot(s: &AppState, caller: &Caller, bytes: u64) -> Result<ExportSlot, ApiError> {
    let limit = crate::quota::limits(&s.store, &caller.tenant).await?.and_then(|(l, _)| l.disk.as_ref().and_then(|d| d.to_units_ceil()));
    let room = match limit {
        Some(limit) => Some(limit.saturating_sub(crate::quota::usage(&s.store, &caller.tenant).await?.disk_bytes)),
        None => None,
    };
    s.exports.take(&caller.tenant, bytes, room)
}

/// Makes the export of `what` (named `name`, expected to hold `bytes`)
/// in a place among the caller's exports, its checksum as `asked`:
/// composed as it is read when the backend can (no file, so nothing held
/// against the disk quota), else converted into a file first.
async fn export(s: &AppState, caller: &Caller, what: ExportSource, (name, bytes): (&str, u64), asked: Asked) -> Result<Export, ApiError> {
    let exports =
        s.backend.exports().ok_or_else(|| ApiError::precondition(format!("the {} backend does not export disks", s.backend.name())))?;
    let (held, slot) = match exports.stream(&what).await.map_err(failed)? {
        Some(stream) => (Held::Composed(stream), s.exports.take(&caller.tenant, 0, None)?),
        None => {
            let mut slot = slot(s, caller, bytes).await?;
            // Taken at once: dropped from here on (the client gone), the file goes.
            let file = Sent(exports.export(&what).await.map_err(failed)?);
            slot.resize(file.0.size);
            (Held::File(file), slot)
        }
    };
    let checksum = asked.checksum;
    let digest = match (held.known_sha256().filter(|_| checksum == Checksum::Sha256), asked.at) {
        (Some(known), _) => Some(known),
        (None, DigestAt::First) => Some(held.digest(checksum).await.map_err(ApiError::internal)?),
        (None, DigestAt::After) => None,
    };
    let size = held.size();
    info!(?what, bytes = size, %checksum, digest = digest.as_deref().unwrap_or("(after the body)"), "export streamed");
    let after = digest.is_none().then_some(checksum);
    Ok(Export { name: name.to_owned(), size, checksum, digest, body: Box::pin(pieces(held, slot, after)) })
}

/// The answer to a backend's failed export.
fn failed(e: vmaas_backend::BackendError) -> ApiError {
    match e.kind {
        vmaas_backend::ErrorKind::Invalid => ApiError::precondition(e.to_string()),
        _ => ApiError::unavailable(format!("the export failed: {e}; try again")),
    }
}

/// An export being sent: a temporary file is removed when dropped.
struct Sent(ExportFile);

impl Drop for Sent {
    fn drop(&mut self) {
        if self.0.temporary {
            let _ = std::fs::remove_file(&self.0.path);
        }
    }
}

/// What an export's bytes are read from, held until they are sent.
enum Held {
    /// A file made for it (or kept).
    File(Sent),
    /// An image composed as it is read (its disk held unchanged meanwhile).
    Composed(ExportStream),
}

impl Held {
    /// Its length.
    fn size(&self) -> u64 {
        match self {
            Self::File(f) => f.0.size,
            Self::Composed(c) => c.image.size(),
        }
    }

    /// Its SHA-256 (hex) if known before its bytes are read (a kept file's).
    fn known_sha256(&self) -> Option<String> {
        match self {
            Self::File(f) => f.0.sha256.clone(),
            Self::Composed(_) => None,
        }
    }

    /// Its checksum `c` (hex), read through once now.
    async fn digest(&self, c: Checksum) -> Result<String, vmaas_backend::BackendError> {
        match self {
            Self::File(f) => Ok(vmaas_backend::export::digest_of(&f.0.path, c).await?.0),
            Self::Composed(s) => s.digest(c).await,
        }
    }

    /// Its bytes from the first (blocking: it may open a file).
    fn open(&self) -> std::io::Result<Box<dyn std::io::Read + Send>> {
        Ok(match self {
            Self::File(f) => Box::new(std::fs::File::open(&f.0.path)?),
            Self::Composed(c) => Box::new(c.image.reader()),
        })
    }
}

/// The export's bytes in chunks of 1 MiB, each read (and, with
/// `digest_after`, hashed: then that checksum comes last) on the blocking
/// pool, up to four chunks ahead of the client: a task waits while the
/// client is slow, so a client reading slowly holds no thread. What is
/// held (a temporary file, a disk kept unchanged) and the export's place
/// go when the stream ends or is dropped (the client went away), or once
/// the client has taken nothing for the slot's stall time: then the body
/// ends in an error, cut short, never looking whole.
fn pieces(held: Held, slot: ExportSlot, digest_after: Option<Checksum>) -> impl Stream<Item = std::io::Result<Piece>> + Send {
    let hash = digest_after.map(Checksum::hasher);
    let stall = slot.stall();
    let mut reading = Reading { file: None, hash, done: false, held: (held, slot) };
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let whole = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let ended = whole.clone();
    tokio::spawn(async move {
        loop {
            let Ok((r, piece)) = tokio::task::spawn_blocking(move || {
                let piece = reading.next();
                (reading, piece)
            })
            .await
            else {
                return;
            };
            reading = r;
            // Nothing left, the client gone, or stalled: the file and place go.
            let Some(piece) = piece else {
                ended.store(true, std::sync::atomic::Ordering::SeqCst);
                return;
            };
            match tokio::time::timeout(stall, tx.send(piece)).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return,
                Err(_) => {
                    tracing::warn!(stall = ?stall, "an export's client took nothing for its stall time: the export is cut short");
                    return;
                }
            }
        }
    });
    futures::stream::unfold(Some((rx, whole)), |state| async move {
        let (mut rx, whole) = state?;
        match rx.recv().await {
            Some(p) => Some((p, Some((rx, whole)))),
            None if whole.load(std::sync::atomic::Ordering::SeqCst) => None,
            None => Some((Err(std::io::Error::other("the export was cut short: its client took nothing for too long")), None)),
        }
    })
}

/// An export's bytes being read out.
struct Reading {
    /// Its bytes, opened at the first read.
    file: Option<Box<dyn std::io::Read + Send>>,
    /// The digest of what was read so far, if it is to be sent last.
    hash: Option<Hasher>,
    /// Whether the last piece went.
    done: bool,
    /// What its bytes come from and the export's place, both let go with this.
    held: (Held, ExportSlot),
}

impl Reading {
    /// The next piece (blocking: file reads): up to 1 MiB, or the digest
    /// after the last bytes, or an error; `None` at the end.
    fn next(&mut self) -> Option<std::io::Result<Piece>> {
        if self.done {
            return None;
        }
        match self.read() {
            Ok(Some(b)) => {
                if let Some(h) = self.hash.as_mut() {
                    h.update(&b);
                }
                Some(Ok(Piece::Bytes(b)))
            }
            Ok(None) => {
                self.done = true;
                self.hash.take().map(|h| Ok(Piece::Digest(h.hex())))
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }

    /// Up to 1 MiB of the file, `None` at its end.
    fn read(&mut self) -> std::io::Result<Option<Bytes>> {
        use std::io::Read;
        let f = match &mut self.file {
            Some(f) => f,
            None => self.file.insert(self.held.0.open()?),
        };
        let mut buf = vec![0u8; 1 << 20];
        let mut n = 0;
        while n < buf.len() {
            match f.read(&mut buf[n..])? {
                0 => break,
                k => n += k,
            }
        }
        buf.truncate(n);
        Ok((n > 0).then(|| Bytes::from(buf)))
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use sha2::Digest;

    use super::*;

    /// A temporary export of `bytes`, its place taken among `slots`.
    fn sent(
        dir: &std::path::Path,
        bytes: &[u8],
        sha256: Option<String>,
    ) -> (Sent, ExportSlot, std::sync::Arc<crate::export_slots::ExportSlots>) {
        stalling(dir, bytes, sha256, std::time::Duration::from_secs(300))
    }

    /// As [`sent`], its export waiting at most `stall` for its client.
    fn stalling(
        dir: &std::path::Path,
        bytes: &[u8],
        sha256: Option<String>,
        stall: std::time::Duration,
    ) -> (Sent, ExportSlot, std::sync::Arc<crate::export_slots::ExportSlots>) {
        let path = dir.join("e.qcow2");
        std::fs::write(&path, bytes).expect("write");
        let slots = crate::export_slots::ExportSlots::new(4, stall);
        let slot = slots.take("acme", bytes.len() as u64, None).expect("a place");
        (Sent(ExportFile { path, size: bytes.len() as u64, sha256, temporary: true }), slot, slots)
    }

    #[tokio::test]
    async fn an_unhashed_export_comes_in_mib_chunks_then_its_digest_and_its_file_and_place_go() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bytes: Vec<u8> = (0..(2 << 20) + 12345u32).map(|i| (i % 251) as u8).collect();
        let (file, slot, slots) = sent(dir.path(), &bytes, None);
        let path = file.0.path.clone();
        let got: Vec<Piece> = pieces(Held::File(file), slot, Some(Checksum::Sha256)).map(|p| p.expect("a piece")).collect().await;
        let sizes: Vec<usize> = got.iter().filter_map(|p| if let Piece::Bytes(b) = p { Some(b.len()) } else { None }).collect();
        assert_eq!(sizes, [1 << 20, 1 << 20, 12345]);
        let body: Vec<u8> = got.iter().filter_map(|p| if let Piece::Bytes(b) = p { Some(b.to_vec()) } else { None }).flatten().collect();
        assert_eq!(body, bytes);
        assert_eq!(got.last(), Some(&Piece::Digest(format!("{:x}", sha2::Sha256::digest(&bytes)))));
        assert!(!path.exists(), "a temporary export's file goes once sent");
        assert_eq!(slots.bytes_of("acme"), 0, "and its place");
    }

    #[tokio::test]
    async fn a_client_asking_for_crc32_gets_it_after_the_body_or_before_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bytes: Vec<u8> = (0..(1 << 20) + 7u32).map(|i| (i % 253) as u8).collect();
        let crc = format!("{:08x}", crc32fast::hash(&bytes));
        let (file, slot, _slots) = sent(dir.path(), &bytes, Some("a kept SHA-256".into()));
        let got: Vec<Piece> = pieces(Held::File(file), slot, Some(Checksum::Crc32)).map(|p| p.expect("a piece")).collect().await;
        assert_eq!(got.last(), Some(&Piece::Digest(crc.clone())));
        let (file, _slot, _slots) = sent(dir.path(), &bytes, None);
        assert_eq!(Held::File(file).digest(Checksum::Crc32).await.expect("read through"), crc);
    }

    #[tokio::test]
    async fn a_hashed_export_sends_no_digest_after_it_and_one_dropped_early_lets_go_too() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bytes = vec![7u8; 3 << 20];
        let (file, slot, _slots) = sent(dir.path(), &bytes, Some("known".into()));
        let got: Vec<Piece> = pieces(Held::File(file), slot, None).map(|p| p.expect("a piece")).collect().await;
        assert_eq!(got.len(), 3, "three MiB, nothing after them");
        assert!(got.iter().all(|p| matches!(p, Piece::Bytes(_))));
        let (file, slot, slots) = sent(dir.path(), &bytes, None);
        let path = file.0.path.clone();
        let mut stream = Box::pin(pieces(Held::File(file), slot, Some(Checksum::Sha256)));
        assert!(matches!(stream.next().await, Some(Ok(Piece::Bytes(_)))));
        drop(stream);
        // The read under way when the client left ends on the blocking pool.
        for _ in 0..100 {
            if !path.exists() && slots.bytes_of("acme") == 0 {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("an export dropped half sent keeps its file or its place");
    }

    #[tokio::test]
    async fn an_export_its_client_stops_taking_is_cut_short_with_an_error_and_lets_go() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bytes = vec![9u8; 12 << 20];
        let (file, slot, slots) = stalling(dir.path(), &bytes, None, std::time::Duration::from_millis(200));
        let path = file.0.path.clone();
        let mut stream = Box::pin(pieces(Held::File(file), slot, Some(Checksum::Sha256)));
        assert!(matches!(stream.next().await, Some(Ok(Piece::Bytes(_)))));
        // The client takes nothing for longer than the stall time.
        tokio::time::sleep(std::time::Duration::from_millis(800)).await;
        assert!(!path.exists() && slots.bytes_of("acme") == 0, "a stalled export keeps its file or its place");
        let rest: Vec<std::io::Result<Piece>> = stream.collect().await;
        let taken = 1 + rest.iter().filter(|p| matches!(p, Ok(Piece::Bytes(_)))).count();
        assert!(taken < 12, "all {taken} MiB came: nothing was cut");
        let last = rest.last().expect("the stream ends with something");
        assert!(last.as_ref().is_err_and(|e| e.to_string().contains("cut short")), "it ends in an error, not whole: {last:?}");
        assert!(!rest.iter().any(|p| matches!(p, Ok(Piece::Digest(_)))), "no digest for a body cut short");
    }
}
