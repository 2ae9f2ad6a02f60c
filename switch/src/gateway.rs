//! The gateway's own TCP endpoint on a segment: traffic from the host (an
//! external IP's port, a load balancer's backend) enters a guest through
//! its NIC on the subnet, where its security groups apply, instead of its
//! management NIC. Each forward listens on a host address; each connection
//! it accepts becomes a TCP connection from the gateway's address to the
//! guest's, made by a user-space TCP/IP stack (smoltcp, on IP packets) whose
//! packets the fabric switches like any port's ([`Fabric::take_from_gateway`],
//! [`crate::fabric::Verdict::Local`]). The guest sees the gateway as the
//! client. A guest that refuses, or a security group that refuses the
//! connection (or, later, a packet of it), closes the host connection at
//! once, as QEMU's user network does for a refusing guest; a guest that
//! never answers, after 3 s.
//!
//! [`Fabric::take_from_gateway`]: crate::fabric::Fabric::take_from_gateway

use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::phy::{Device, DeviceCapabilities, Medium};
use smoltcp::socket::tcp;
use smoltcp::wire::{HardwareAddress, IpAddress, IpCidr};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;
use tracing::{debug, warn};

use crate::frame::ETH_HEADER;

mod udp;
// A circle with `segment` on purpose: see the note on its imports.
use crate::segment::{Switch, runtime};
use udp::{Datagram, Sessions};

/// How long a connection to a guest may take to be accepted.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Each direction's buffer of one connection, in the stack (past 64 KiB
/// the stack scales its window: a guest on TCG drains in bursts).
const BUFFER: usize = 512 * 1024;
/// Chunks queued between a host connection and the stack.
const CHUNKS: usize = 16;

/// What the fabric and the forwards hand the stack.
pub(crate) struct Handle {
    /// IPv4 frames for the gateway's address.
    pub(crate) frames: mpsc::Sender<Vec<u8>>,
    conns: mpsc::Sender<(TcpStream, SocketAddrV4)>,
    datagrams: mpsc::Sender<Datagram>,
}

/// One forward of a host address to a guest's; stops listening when dropped.
#[derive(Debug)]
pub struct GatewayForward {
    task: JoinHandle<()>,
    local: SocketAddr,
}

impl GatewayForward {
    /// The host address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }
}

impl Drop for GatewayForward {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts the stack of a segment whose gateway is `gateway`/`prefix`.
pub(crate) fn start(gateway: Ipv4Addr, prefix: u8, switch: Weak<Mutex<Switch>>) -> Arc<Handle> {
    let (frames, frames_rx) = mpsc::channel(4096);
    let (conns, conns_rx) = mpsc::channel(256);
    let (datagrams, datagrams_rx) = mpsc::channel(1024);
    runtime().spawn(run(Stack::new(gateway, prefix), Inputs { frames: frames_rx, conns: conns_rx, datagrams: datagrams_rx }, switch));
    Arc::new(Handle { frames, conns, datagrams })
}

/// Listens on `listen` and hands each connection to the stack of `handle`, for `guest`.
pub(crate) async fn forward(handle: &Arc<Handle>, listen: SocketAddr, guest: SocketAddrV4) -> std::io::Result<GatewayForward> {
    let std_listener = std::net::TcpListener::bind(listen)?;
    std_listener.set_nonblocking(true)?;
    let local = std_listener.local_addr()?;
    let conns = handle.conns.clone();
    let task = runtime().spawn(async move {
        let Ok(listener) = TcpListener::from_std(std_listener) else { return };
        loop {
            match listener.accept().await {
                Ok((client, _)) => {
                    let _ = client.set_nodelay(true);
                    if conns.send((client, guest)).await.is_err() {
                        return;
                    }
                }
                Err(e) => {
                    warn!(%local, error = %e, "accepting a forwarded connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    });
    Ok(GatewayForward { task, local })
}

/// Listens for UDP datagrams on `listen` and hands each to the stack of
/// `handle`, for `guest`; the guest's answers leave from the same socket.
pub(crate) async fn forward_udp(handle: &Arc<Handle>, listen: SocketAddr, guest: SocketAddrV4) -> std::io::Result<GatewayForward> {
    let std_socket = std::net::UdpSocket::bind(listen)?;
    std_socket.set_nonblocking(true)?;
    let local = std_socket.local_addr()?;
    let datagrams = handle.datagrams.clone();
    let task = runtime().spawn(async move {
        let Ok(host) = tokio::net::UdpSocket::from_std(std_socket) else { return };
        let host = Arc::new(host);
        let mut buf = vec![0u8; 65_536];
        loop {
            let Ok((n, client)) = host.recv_from(&mut buf).await else { continue };
            let d = Datagram { host: host.clone(), client, guest, data: buf[..n].to_vec() };
            // Full: dropped, as UDP may be.
            if let Err(mpsc::error::TrySendError::Closed(_)) = datagrams.try_send(d) {
                return;
            }
        }
    });
    Ok(GatewayForward { task, local })
}

/// The stack's device: IP packets in from the fabric, out to it.
#[derive(Default)]
struct Wire {
    rx: VecDeque<Vec<u8>>,
    tx: Vec<Vec<u8>>,
}

struct RxToken(Vec<u8>);
struct TxToken<'a>(&'a mut Vec<Vec<u8>>);

impl smoltcp::phy::RxToken for RxToken {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&self.0)
    }
}

impl smoltcp::phy::TxToken for TxToken<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut buf = vec![0; len];
        let r = f(&mut buf);
        self.0.push(buf);
        r
    }
}

impl Device for Wire {
    type RxToken<'a> = RxToken;
    type TxToken<'a> = TxToken<'a>;

    fn capabilities(&self) -> DeviceCapabilities {
        let mut c = DeviceCapabilities::default();
        c.medium = Medium::Ip;
        c.max_transmission_unit = 1500;
        c
    }

    fn receive(&mut self, _: smoltcp::time::Instant) -> Option<(RxToken, TxToken<'_>)> {
        let p = self.rx.pop_front()?;
        Some((RxToken(p), TxToken(&mut self.tx)))
    }

    fn transmit(&mut self, _: smoltcp::time::Instant) -> Option<TxToken<'_>> {
        Some(TxToken(&mut self.tx))
    }
}

/// One host connection and its TCP socket towards the guest.
struct Conn {
    socket: SocketHandle,
    from_host: mpsc::Receiver<Vec<u8>>,
    to_host: Option<mpsc::Sender<Vec<u8>>>,
    pending: Vec<u8>,
    host_done: bool,
    opened: std::time::Instant,
}

/// The user-space stack of one gateway.
struct Stack {
    iface: Interface,
    sockets: SocketSet<'static>,
    wire: Wire,
    gateway: Ipv4Addr,
    conns: Vec<Conn>,
    udp: Sessions,
    next_port: u16,
    wake: Arc<Notify>,
}

impl Stack {
    fn new(gateway: Ipv4Addr, prefix: u8) -> Self {
        let mut wire = Wire::default();
        let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1);
        let mut config = Config::new(HardwareAddress::Ip);
        config.random_seed = seed;
        let mut iface = Interface::new(config, &mut wire, smoltcp::time::Instant::now());
        iface.update_ip_addrs(|a| {
            let _ = a.push(IpCidr::new(IpAddress::Ipv4(gateway), prefix));
        });
        Self {
            iface,
            sockets: SocketSet::new(Vec::new()),
            wire,
            gateway,
            conns: Vec::new(),
            udp: Sessions::default(),
            next_port: 49152,
            wake: Arc::default(),
        }
    }

    /// A local port no socket of the stack uses.
    fn port(&mut self) -> u16 {
        loop {
            self.next_port = if self.next_port == u16::MAX { 49152 } else { self.next_port + 1 };
            let port = self.next_port;
            let taken = self.sockets.iter().any(|(_, s)| match s {
                smoltcp::socket::Socket::Tcp(t) => t.local_endpoint().is_some_and(|e| e.port == port),
                smoltcp::socket::Socket::Udp(u) => u.endpoint().port == port,
            });
            if !taken {
                return port;
            }
        }
    }

    /// Opens a connection to `guest` for host connection `client`.
    fn open(&mut self, client: TcpStream, guest: SocketAddrV4) {
        let mut socket = tcp::Socket::new(tcp::SocketBuffer::new(vec![0; BUFFER]), tcp::SocketBuffer::new(vec![0; BUFFER]));
        let port = self.port();
        let remote = (IpAddress::Ipv4(*guest.ip()), guest.port());
        if let Err(e) = socket.connect(self.iface.context(), remote, (IpAddress::Ipv4(self.gateway), port)) {
            debug!(%guest, error = %e, "gateway connect");
            return;
        }
        let handle = self.sockets.add(socket);
        let (from_host, to_host) = pipe(client, self.wake.clone());
        self.conns.push(Conn {
            socket: handle,
            from_host,
            to_host: Some(to_host),
            pending: Vec::new(),
            host_done: false,
            opened: std::time::Instant::now(),
        });
    }

    /// Moves what the host sent into the sockets.
    fn pump_in(&mut self) {
        for c in &mut self.conns {
            let s = self.sockets.get_mut::<tcp::Socket<'_>>(c.socket);
            while s.may_send() && !c.host_done {
                if c.pending.is_empty() {
                    match c.from_host.try_recv() {
                        Ok(b) if b.is_empty() => {
                            s.close();
                            c.host_done = true;
                        }
                        Ok(b) => c.pending = b,
                        Err(mpsc::error::TryRecvError::Empty) => break,
                        Err(mpsc::error::TryRecvError::Disconnected) => {
                            s.close();
                            c.host_done = true;
                        }
                    }
                    continue;
                }
                match s.send_slice(&c.pending) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        c.pending.drain(..n);
                    }
                }
            }
        }
    }

    /// Ends at once the connections whose packets the segment refused
    /// (local ports `ports`): the host sees the close a refusing guest gives.
    fn refused(&mut self, ports: &[u16]) {
        for c in &self.conns {
            let s = self.sockets.get_mut::<tcp::Socket<'_>>(c.socket);
            if s.local_endpoint().is_some_and(|e| ports.contains(&e.port)) {
                s.abort();
            }
        }
        if !ports.is_empty() {
            self.pump_out();
        }
    }

    /// Moves what the guests sent to the host connections; ends the ones
    /// the guest closed, refused or never answered.
    fn pump_out(&mut self) {
        let mut buf = vec![0u8; 16 * 1024];
        for c in &mut self.conns {
            let s = self.sockets.get_mut::<tcp::Socket<'_>>(c.socket);
            if s.state() == tcp::State::SynSent && c.opened.elapsed() > CONNECT_TIMEOUT {
                s.abort();
            }
            while let Some(tx) = c.to_host.as_ref().filter(|_| s.can_recv()) {
                let Ok(permit) = tx.try_reserve() else { break };
                match s.recv_slice(&mut buf) {
                    Ok(n) if n > 0 => permit.send(buf[..n].to_vec()),
                    _ => break,
                }
            }
            if !s.may_recv() && s.recv_queue() == 0 && s.state() != tcp::State::SynSent {
                c.to_host = None;
            }
        }
        let sockets = &mut self.sockets;
        self.conns.retain(|c| {
            let state = sockets.get::<tcp::Socket<'_>>(c.socket).state();
            let over = matches!(state, tcp::State::Closed | tcp::State::TimeWait) && (c.host_done || c.to_host.is_none());
            if over {
                sockets.remove(c.socket);
            }
            !over
        });
    }
}

/// The two tasks of a host connection: its bytes to the stack (an empty
/// chunk at its end) and the stack's to it (closed when the sender goes).
fn pipe(client: TcpStream, wake: Arc<Notify>) -> (mpsc::Receiver<Vec<u8>>, mpsc::Sender<Vec<u8>>) {
    let (mut r, mut w) = client.into_split();
    let (in_tx, in_rx) = mpsc::channel::<Vec<u8>>(CHUNKS);
    let (out_tx, mut out_rx) = mpsc::channel::<Vec<u8>>(CHUNKS);
    let woken = wake.clone();
    runtime().spawn(async move {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = r.read(&mut buf).await.unwrap_or(0);
            if in_tx.send(buf[..n].to_vec()).await.is_err() || n == 0 {
                woken.notify_one();
                return;
            }
            woken.notify_one();
        }
    });
    runtime().spawn(async move {
        while let Some(b) = out_rx.recv().await {
            wake.notify_one();
            if w.write_all(&b).await.is_err() {
                break;
            }
        }
        let _ = w.shutdown().await;
    });
    (in_rx, out_tx)
}

/// Delivers the stack's packets into the segment; the local ports of the
/// connections whose packets it refused (a security group, a NIC gone).
fn transmit(switch: &Weak<Mutex<Switch>>, packets: Vec<Vec<u8>>) -> Vec<u16> {
    let Some(sw) = switch.upgrade() else { return Vec::new() };
    let mut sw = crate::segment::lock(&sw);
    let mut refused = Vec::new();
    for p in packets {
        if !sw.take_from_gateway(&p) {
            let header = usize::from(p.first().map_or(5, |b| b & 0x0f)) * 4;
            if let Some(port) = p.get(header..header + 2).map(|b| u16::from_be_bytes([b[0], b[1]])) {
                refused.push(port);
            }
        }
    }
    refused
}

/// What the stack's loop takes in.
struct Inputs {
    frames: mpsc::Receiver<Vec<u8>>,
    conns: mpsc::Receiver<(TcpStream, SocketAddrV4)>,
    datagrams: mpsc::Receiver<Datagram>,
}

impl Stack {
    /// Sends datagram `d` through its client's session.
    fn datagram(&mut self, d: Datagram) {
        let port = self.port();
        self.udp.send(&mut self.sockets, IpAddress::Ipv4(self.gateway), d, || port);
    }
}

/// The stack's loop: frames, connections and datagrams in, packets out, until the segment goes.
async fn run(mut st: Stack, mut inputs: Inputs, switch: Weak<Mutex<Switch>>) {
    let Inputs { frames, conns, datagrams } = &mut inputs;
    loop {
        while let Ok((client, guest)) = conns.try_recv() {
            st.open(client, guest);
        }
        while let Ok(d) = datagrams.try_recv() {
            st.datagram(d);
        }
        while let Ok(f) = frames.try_recv() {
            st.wire.rx.push_back(f.get(ETH_HEADER..).unwrap_or_default().to_vec());
        }
        st.pump_in();
        let now = smoltcp::time::Instant::now();
        st.iface.poll(now, &mut st.wire, &mut st.sockets);
        st.pump_out();
        st.udp.pump_out(&mut st.sockets);
        st.iface.poll(now, &mut st.wire, &mut st.sockets);
        let refused = transmit(&switch, std::mem::take(&mut st.wire.tx));
        st.refused(&refused);
        if switch.strong_count() == 0 {
            return;
        }
        let delay =
            st.iface.poll_delay(now, &st.sockets).map(|d| Duration::from_micros(d.total_micros())).unwrap_or(Duration::from_secs(1));
        let wake = st.wake.clone();
        tokio::select! {
            f = frames.recv() => match f {
                Some(f) => st.wire.rx.push_back(f.get(ETH_HEADER..).unwrap_or_default().to_vec()),
                None => return,
            },
            c = conns.recv() => if let Some((client, guest)) = c { st.open(client, guest) },
            d = datagrams.recv() => if let Some(d) = d { st.datagram(d) },
            () = wake.notified() => {}
            () = tokio::time::sleep(delay.min(Duration::from_secs(1))) => {}
        }
    }
}
