//! A [`Fabric`] served by tokio: one task owns the fabric; each port has a
//! unix socket that its QEMU NIC connects to (`-netdev stream,server=off`,
//! which reconnects after a server restart), a reader task per connection
//! and a bounded queue of frames to send (full: the frame is dropped, as a
//! congested switch does, so one slow guest never stalls the segment).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use tokio::net::UnixListener;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tracing::{debug, warn};

use crate::fabric::{Fabric, PortId, PortKind, Stats, SubnetConfig, Verdict};
use crate::firewall::Firewall;
use tokio::io::AsyncWriteExt;

use crate::port::read_frame;

/// Frames queued towards one port before it drops.
const PORT_QUEUE: usize = 4096;

/// Why a segment could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum SegmentError {
    /// The port's socket could not be made.
    #[error("cannot listen on {path}: {source}")]
    Listen {
        /// The socket path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The segment's task is gone.
    #[error("the segment is stopped")]
    Stopped,
}

enum Command {
    Frame(PortId, Vec<u8>),
    Add(PortId, PortKind, mpsc::Sender<Vec<u8>>),
    Remove(PortId),
    Firewall(PortId, Option<Firewall>),
    Stats(oneshot::Sender<Stats>),
}

/// One running segment.
pub struct Segment {
    tx: mpsc::Sender<Command>,
    task: JoinHandle<()>,
    ports: std::sync::Mutex<HashMap<PortId, (JoinHandle<()>, PathBuf)>>,
}

impl Segment {
    /// Starts an empty segment for `subnet`.
    pub fn start(subnet: SubnetConfig) -> Self {
        let (tx, rx) = mpsc::channel(4096);
        let task = tokio::spawn(run(Fabric::new(subnet), rx));
        Self { tx, task, ports: std::sync::Mutex::new(HashMap::new()) }
    }

    /// Serves port `id` on a new unix socket at `path` (a stale socket
    /// there is replaced).
    pub async fn add_port(&self, id: PortId, kind: PortKind, path: &Path) -> Result<(), SegmentError> {
        let _ = std::fs::remove_file(path);
        let listener = UnixListener::bind(path).map_err(|source| SegmentError::Listen { path: path.to_owned(), source })?;
        let (out_tx, out_rx) = mpsc::channel(PORT_QUEUE);
        self.tx.send(Command::Add(id, kind, out_tx)).await.map_err(|_| SegmentError::Stopped)?;
        let task = tokio::spawn(serve(listener, id, self.tx.clone(), out_rx));
        if let Some((old, old_path)) = self.lock().insert(id, (task, path.to_owned())) {
            old.abort();
            if old_path != path {
                let _ = std::fs::remove_file(old_path);
            }
        }
        Ok(())
    }

    /// Whether port `id` is served.
    pub fn has_port(&self, id: PortId) -> bool {
        self.lock().contains_key(&id)
    }

    /// Stops serving port `id` and removes its socket.
    pub async fn remove_port(&self, id: PortId) -> Result<(), SegmentError> {
        if let Some((task, path)) = self.lock().remove(&id) {
            task.abort();
            let _ = std::fs::remove_file(path);
        }
        self.tx.send(Command::Remove(id)).await.map_err(|_| SegmentError::Stopped)
    }

    /// Replaces the firewall of guest port `id` at once (its security
    /// groups changed); no restart of anything.
    pub async fn set_firewall(&self, id: PortId, firewall: Option<Firewall>) -> Result<(), SegmentError> {
        self.tx.send(Command::Firewall(id, firewall)).await.map_err(|_| SegmentError::Stopped)
    }

    /// The segment's counters.
    pub async fn stats(&self) -> Result<Stats, SegmentError> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(Command::Stats(tx)).await.map_err(|_| SegmentError::Stopped)?;
        rx.await.map_err(|_| SegmentError::Stopped)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PortId, (JoinHandle<()>, PathBuf)>> {
        self.ports.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        for (_, (task, path)) in self.lock().drain() {
            task.abort();
            let _ = std::fs::remove_file(path);
        }
        self.task.abort();
    }
}

/// The fabric's task: frames in, frames out to the ports' queues.
async fn run(mut fabric: Fabric, mut rx: mpsc::Receiver<Command>) {
    let mut out: HashMap<PortId, mpsc::Sender<Vec<u8>>> = HashMap::new();
    while let Some(cmd) = rx.recv().await {
        match cmd {
            Command::Frame(from, frame) => match fabric.receive(from, &frame) {
                Verdict::Unicast(to) => send(&out, to, frame),
                Verdict::Flood => {
                    for (to, _) in out.iter().filter(|(p, _)| **p != from) {
                        send(&out, *to, frame.clone());
                    }
                }
                Verdict::Reply(r) => send(&out, from, r),
                Verdict::Drop(why) => debug!(port = from, ?why, "frame dropped"),
            },
            Command::Add(id, kind, tx) => {
                fabric.add_port(id, kind);
                out.insert(id, tx);
            }
            Command::Remove(id) => {
                fabric.remove_port(id);
                out.remove(&id);
            }
            Command::Firewall(id, firewall) => fabric.set_firewall(id, firewall),
            Command::Stats(reply) => {
                let _ = reply.send(fabric.stats().clone());
            }
        }
    }
}

fn send(out: &HashMap<PortId, mpsc::Sender<Vec<u8>>>, to: PortId, frame: Vec<u8>) {
    if let Some(tx) = out.get(&to) {
        // Full: dropped, as a congested switch would.
        let _ = tx.try_send(frame);
    }
}

/// Writes `first` and whatever else is queued (up to 64 KiB) in one write.
async fn write_batch(w: &mut tokio::net::unix::OwnedWriteHalf, first: Vec<u8>, out: &mut mpsc::Receiver<Vec<u8>>) -> std::io::Result<()> {
    let mut batch = Vec::with_capacity(1 << 16);
    let mut next = Some(first);
    while let Some(f) = next.take() {
        batch.extend_from_slice(&(f.len() as u32).to_be_bytes());
        batch.extend_from_slice(&f);
        if batch.len() < 1 << 16 {
            next = out.try_recv().ok();
        }
    }
    w.write_all(&batch).await
}

/// One port: accepts its NIC's connection (a new one replaces the old),
/// reads its frames into the segment and writes the segment's to it.
async fn serve(listener: UnixListener, id: PortId, seg: mpsc::Sender<Command>, mut out: mpsc::Receiver<Vec<u8>>) {
    loop {
        let stream = loop {
            tokio::select! {
                c = listener.accept() => match c {
                    Ok((s, _)) => break s,
                    Err(e) => {
                        warn!(port = id, error = %e, "accepting a NIC");
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    }
                },
                // No NIC connected: its frames go nowhere.
                f = out.recv() => if f.is_none() { return },
            }
        };
        let (r, mut w) = stream.into_split();
        let seg_in = seg.clone();
        let mut reader = tokio::spawn(async move {
            // Buffered: a frame's length and body in one read, often several frames.
            let mut r = tokio::io::BufReader::with_capacity(1 << 16, r);
            let mut buf = Vec::with_capacity(2048);
            while let Ok(true) = read_frame(&mut r, &mut buf).await {
                if seg_in.send(Command::Frame(id, std::mem::take(&mut buf))).await.is_err() {
                    return;
                }
            }
        });
        loop {
            tokio::select! {
                _ = &mut reader => break,
                f = out.recv() => match f {
                    Some(f) => if write_batch(&mut w, f, &mut out).await.is_err() { break },
                    None => { reader.abort(); return }
                },
            }
        }
        reader.abort();
        debug!(port = id, "NIC disconnected");
    }
}
