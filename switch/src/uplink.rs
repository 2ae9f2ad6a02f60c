//! An uplink: the segments of one network joined to a physical L2 network
//! through a host TAP device (opened by `vmaas-tap`). Frames from the TAP
//! are offered to every segment joined (each forwards what is its own: its
//! guests' MACs, broadcasts), and frames a segment sends to its uplink port
//! are written to the TAP. The I/O runs on the switch's own thread.

use std::sync::{Arc, Mutex, PoisonError, Weak};

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::{debug, warn};
use vmaas_tap::{AsyncTap, Tap};

use crate::fabric::PortId;
use crate::runtime::runtime;
use crate::segment::Segment;

/// The port every segment gives its uplink.
pub const UPLINK_PORT: PortId = 0;
/// Frames queued towards the TAP before they are dropped.
const QUEUE: usize = 4096;
/// The largest frame read (an Ethernet frame with a VLAN tag).
const MAX_FRAME: usize = 1522;

type Joined = Arc<Mutex<Vec<Weak<Segment>>>>;

/// A running uplink; stops when dropped.
pub struct Uplink {
    joined: Joined,
    out: mpsc::Sender<Vec<u8>>,
    tasks: [JoinHandle<()>; 2],
    /// The TAP's name.
    pub tap: String,
}

impl Uplink {
    /// Serves the opened TAP `tap`.
    pub fn start(tap: Tap) -> std::io::Result<Self> {
        let name = tap.tap.clone();
        let (out, rx) = mpsc::channel(QUEUE);
        let joined: Joined = Arc::default();
        let rt = runtime();
        let io = {
            let _guard = rt.enter();
            Arc::new(AsyncTap::new(tap)?)
        };
        let tasks = [rt.spawn(read_loop(io.clone(), joined.clone())), rt.spawn(write_loop(io, rx))];
        Ok(Self { joined, out, tasks, tap: name })
    }

    /// Joins `segment` to the uplink (once; it leaves when it is dropped).
    pub fn join(&self, segment: &Arc<Segment>) {
        let mut joined = self.joined.lock().unwrap_or_else(PoisonError::into_inner);
        joined.retain(|s| s.strong_count() > 0);
        if !joined.iter().any(|s| s.as_ptr() == Arc::as_ptr(segment)) {
            segment.add_uplink(UPLINK_PORT, self.out.clone());
            joined.push(Arc::downgrade(segment));
        }
    }

    /// How many segments are joined.
    pub fn segments(&self) -> usize {
        self.joined.lock().unwrap_or_else(PoisonError::into_inner).iter().filter(|s| s.strong_count() > 0).count()
    }
}

impl Drop for Uplink {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Reads frames from the TAP into every joined segment.
async fn read_loop(tap: Arc<AsyncTap>, joined: Joined) {
    let mut buf = vec![0u8; MAX_FRAME];
    loop {
        match tap.recv(&mut buf).await {
            Ok(0) => return,
            Ok(n) => {
                let segments: Vec<Arc<Segment>> =
                    joined.lock().unwrap_or_else(PoisonError::into_inner).iter().filter_map(Weak::upgrade).collect();
                for s in segments {
                    s.inject(UPLINK_PORT, buf[..n].to_vec());
                }
            }
            Err(e) => {
                warn!(error = %e, "reading the uplink");
                return;
            }
        }
    }
}

/// Writes the segments' frames to the TAP.
async fn write_loop(tap: Arc<AsyncTap>, mut rx: mpsc::Receiver<Vec<u8>>) {
    while let Some(frame) = rx.recv().await {
        if let Err(e) = tap.send(&frame).await {
            // No carrier, or gone: the frame is lost, as on a wire.
            debug!(error = %e, "writing to the uplink");
        }
    }
}
