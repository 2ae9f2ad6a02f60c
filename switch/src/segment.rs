//! A [`Fabric`] served by tokio: each port has a socket ([`PortAddr`]: TCP
//! on loopback or unix) that its QEMU NIC connects to (`-netdev
//! stream,server=off`, which reconnects after a server restart), a reader task per connection that switches each frame
//! itself (the fabric is shared behind a lock held for one frame's
//! decision), and a bounded queue of frames to send, drained by the port's
//! writer (full: the frame is dropped, as a congested switch does, so one
//! slow guest never stalls the segment). A frame costs one hand-off, from
//! the sender's reader to the receiver's writer.
//!
//! Every segment runs on one thread of its own ([`runtime`]), a tokio
//! runtime with a single worker: a frame's hand-off from reader to writer
//! is then a local wake-up, not a wake-up of another thread, and the
//! switch never competes with the server's request handling for a worker.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::io::AsyncWrite;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::{debug, warn};

use crate::fabric::{Fabric, PortId, PortKind, Stats, SubnetConfig};
use crate::firewall::Firewall;
use crate::gateway::{self, GatewayForward};
use crate::hub::{Shared, Switch, lock, switch_frame};
use crate::listen::{Bound, Listener, PortAddr};
use crate::router::Router;
use crate::runtime::runtime;
use std::net::{SocketAddr, SocketAddrV4};
use tokio::io::AsyncWriteExt;

use crate::port::read_frame;

/// Frames queued towards one port before it drops.
const PORT_QUEUE: usize = 4096;

/// Why a segment could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum SegmentError {
    /// The port's socket could not be made.
    #[error("cannot listen on {addr:?}: {source}")]
    Listen {
        /// The port's address.
        addr: PortAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// One running segment.
pub struct Segment {
    switch: Shared,
    ports: Mutex<HashMap<PortId, (JoinHandle<()>, PortAddr)>>,
    /// The gateway's TCP endpoint, once a forward needs it.
    gateway: Mutex<Option<Arc<gateway::Handle>>>,
}

impl Segment {
    /// Starts an empty segment for `subnet`.
    pub fn start(subnet: SubnetConfig) -> Self {
        let switch = Arc::new(Mutex::new(Switch::new(Fabric::new(subnet))));
        Self { switch, ports: Mutex::new(HashMap::new()), gateway: Mutex::new(None) }
    }

    /// Serves port `id` on a new socket at `addr` (a stale unix socket
    /// there is replaced); returns the address bound (the port TCP chose
    /// for `PortAddr::Tcp(0)`).
    pub async fn add_port(&self, id: PortId, kind: PortKind, addr: &PortAddr) -> Result<PortAddr, SegmentError> {
        let (bound, addr) = Bound::bind(addr).map_err(|source| SegmentError::Listen { addr: addr.clone(), source })?;
        let (out_tx, out_rx) = mpsc::channel(PORT_QUEUE);
        lock(&self.switch).attach(id, kind, out_tx);
        let switch = self.switch.clone();
        let task = runtime().spawn(async move {
            match bound.serve() {
                Ok(l) => serve(l, id, switch, out_rx).await,
                Err(e) => warn!(port = id, error = %e, "serving a NIC's socket"),
            }
        });
        if let Some((old, old_addr)) = self.lock().insert(id, (task, addr.clone())) {
            old.abort();
            if old_addr != addr {
                remove_socket(&old_addr);
            }
        }
        Ok(addr)
    }

    /// Joins an uplink as port `id` (a physical L2 network: any source,
    /// learned): the frames the segment sends it go to `out`, and
    /// [`Segment::inject`] brings its frames in.
    pub fn add_uplink(&self, id: PortId, out: mpsc::Sender<Vec<u8>>) {
        lock(&self.switch).attach(id, PortKind::Uplink, out);
    }

    /// Switches `frame`, which came in on uplink port `id`.
    pub fn inject(&self, id: PortId, frame: Vec<u8>) {
        switch_frame(&self.switch, id, frame);
    }

    /// Joins `router`, the router of the segment's virtual network: its
    /// gateway then routes to the router's other segments (again: nothing changes).
    pub fn join(&self, router: &Arc<Router>) {
        let (subnet, joined) = {
            let sw = lock(&self.switch);
            (sw.fabric.subnet().clone(), sw.router.as_ref().is_some_and(|r| std::ptr::addr_eq(Arc::as_ptr(r), Arc::as_ptr(router))))
        };
        if !joined {
            router.join(subnet, &self.switch);
        }
    }

    /// Forwards TCP connections to host address `listen` to `guest` (an
    /// address of a guest NIC on this segment) through the gateway, so the
    /// guest's security groups see them ([`crate::gateway`]). Stops when
    /// the returned forward is dropped.
    pub async fn forward(&self, listen: SocketAddr, guest: SocketAddrV4) -> std::io::Result<GatewayForward> {
        let handle = self.gateway();
        gateway::forward(&handle, listen, guest).await
    }

    /// [`Segment::forward`] for UDP: datagrams to `listen` go to `guest`
    /// through the gateway, one session per client, and the guest's
    /// answers go back to the client.
    pub async fn forward_udp(&self, listen: SocketAddr, guest: SocketAddrV4) -> std::io::Result<GatewayForward> {
        let handle = self.gateway();
        gateway::forward_udp(&handle, listen, guest).await
    }

    /// The gateway's stack, started on first use.
    fn gateway(&self) -> Arc<gateway::Handle> {
        let mut handle = self.gateway.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(h) = handle.as_ref() {
            return h.clone();
        }
        let mut sw = lock(&self.switch);
        let subnet = sw.fabric.subnet().clone();
        let started = gateway::start(subnet.gateway, subnet.prefix, Arc::downgrade(&self.switch));
        sw.gateway = Some(started.frames.clone());
        handle.insert(started).clone()
    }

    /// Leaves the segment's router, if it joined one.
    pub fn leave(&self) {
        let router = lock(&self.switch).router.clone();
        if let Some(r) = router {
            r.leave(&self.switch);
        }
    }

    /// Whether port `id` is served.
    pub fn has_port(&self, id: PortId) -> bool {
        self.lock().contains_key(&id)
    }

    /// The address port `id` is served on.
    pub fn port_addr(&self, id: PortId) -> Option<PortAddr> {
        self.lock().get(&id).map(|(_, addr)| addr.clone())
    }

    /// Stops serving port `id` and removes its socket.
    pub async fn remove_port(&self, id: PortId) -> Result<(), SegmentError> {
        if let Some((task, addr)) = self.lock().remove(&id) {
            task.abort();
            remove_socket(&addr);
        }
        lock(&self.switch).detach(id);
        Ok(())
    }

    /// Replaces the firewall of guest port `id` at once (its security
    /// groups changed); no restart of anything.
    pub async fn set_firewall(&self, id: PortId, firewall: Option<Firewall>) -> Result<(), SegmentError> {
        lock(&self.switch).fabric.set_firewall(id, firewall);
        Ok(())
    }

    /// The segment's counters.
    pub async fn stats(&self) -> Result<Stats, SegmentError> {
        Ok(lock(&self.switch).fabric.stats().clone())
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<PortId, (JoinHandle<()>, PortAddr)>> {
        self.ports.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        self.leave();
        for (_, (task, addr)) in self.lock().drain() {
            task.abort();
            remove_socket(&addr);
        }
    }
}

/// Removes a unix port's socket file (a TCP port leaves nothing behind).
fn remove_socket(addr: &PortAddr) {
    if let PortAddr::Unix(path) = addr {
        let _ = std::fs::remove_file(path);
    }
}

/// Writes `first` and whatever else is queued (up to 64 KiB) in one write.
async fn write_batch<W: AsyncWrite + Unpin + ?Sized>(w: &mut W, first: Vec<u8>, out: &mut mpsc::Receiver<Vec<u8>>) -> std::io::Result<()> {
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
async fn serve(listener: Listener, id: PortId, switch: Shared, mut out: mpsc::Receiver<Vec<u8>>) {
    loop {
        let stream = loop {
            tokio::select! {
                c = listener.accept() => match c {
                    Ok(halves) => break halves,
                    Err(e) => {
                        warn!(port = id, error = %e, "accepting a NIC");
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    }
                },
                // No NIC connected: its frames go nowhere.
                f = out.recv() => if f.is_none() { return },
            }
        };
        let (r, mut w) = stream;
        let switch_in = switch.clone();
        let mut reader = runtime().spawn(async move {
            // Buffered: a frame's length and body in one read, often several frames.
            let mut r = tokio::io::BufReader::with_capacity(1 << 16, r);
            let mut buf = Vec::with_capacity(2048);
            while let Ok(true) = read_frame(&mut r, &mut buf).await {
                switch_frame(&switch_in, id, std::mem::replace(&mut buf, Vec::with_capacity(2048)));
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
