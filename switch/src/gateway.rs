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

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use smoltcp::iface::{Interface, SocketSet};
use smoltcp::wire::IpAddress;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;
use tracing::{debug, warn};

use crate::frame::ETH_HEADER;
use crate::stack::{self, Conn, Wire};

mod udp;
use crate::hub::Switch;
use crate::runtime::runtime;
use udp::{Datagram, Sessions};

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
        let iface = stack::interface(gateway, prefix, &mut wire);
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
        let mut socket = stack::tcp_socket();
        let port = self.port();
        let remote = (IpAddress::Ipv4(*guest.ip()), guest.port());
        if let Err(e) = socket.connect(self.iface.context(), remote, (IpAddress::Ipv4(self.gateway), port)) {
            debug!(%guest, error = %e, "gateway connect");
            return;
        }
        let handle = self.sockets.add(socket);
        self.conns.push(Conn::new(handle, client, self.wake.clone()));
    }

    /// Ends at once the connections whose packets the segment refused
    /// (local ports `ports`): the host sees the close a refusing guest gives.
    fn refused(&mut self, ports: &[u16]) {
        stack::abort_ports(&self.conns, &mut self.sockets, ports);
        if !ports.is_empty() {
            stack::pump_out(&mut self.conns, &mut self.sockets);
        }
    }
}

/// Delivers the stack's packets into the segment; the local ports of the
/// connections whose packets it refused (a security group, a NIC gone).
fn transmit(switch: &Weak<Mutex<Switch>>, packets: Vec<Vec<u8>>) -> Vec<u16> {
    let Some(sw) = switch.upgrade() else { return Vec::new() };
    let mut sw = crate::hub::lock(&sw);
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
        stack::pump_in(&mut st.conns, &mut st.sockets);
        let now = smoltcp::time::Instant::now();
        st.iface.poll(now, &mut st.wire, &mut st.sockets);
        stack::pump_out(&mut st.conns, &mut st.sockets);
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
