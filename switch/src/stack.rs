//! The user-space TCP plumbing that the gateway's endpoint ([`crate::gateway`])
//! and a NAT gateway ([`crate::nat`]) share: a smoltcp device on IP packets,
//! and host TCP connections joined to sockets of the stack, each direction
//! a bounded queue of chunks.

use std::collections::VecDeque;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::phy::{Device, DeviceCapabilities, Medium};
use smoltcp::socket::tcp;
use smoltcp::wire::{HardwareAddress, IpAddress, IpCidr};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{Notify, mpsc};

use crate::runtime::runtime;

/// How long a connection may take to be set up (a guest's answer to the
/// gateway's SYN, or a guest's SYN after a NAT gateway has dialled).
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Each direction's buffer of one connection, in the stack (past 64 KiB
/// the stack scales its window: a guest on TCG drains in bursts).
const BUFFER: usize = 512 * 1024;
/// Chunks queued between a host connection and the stack.
const CHUNKS: usize = 16;

/// The stack's device: IP packets in from the fabric, out to it.
#[derive(Default)]
pub(crate) struct Wire {
    /// Packets for the stack.
    pub(crate) rx: VecDeque<Vec<u8>>,
    /// Packets the stack sent.
    pub(crate) tx: Vec<Vec<u8>>,
}

pub(crate) struct RxToken(Vec<u8>);
pub(crate) struct TxToken<'a>(&'a mut Vec<Vec<u8>>);

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

/// An interface on `wire` with address `addr`/`prefix`.
pub(crate) fn interface(addr: Ipv4Addr, prefix: u8, wire: &mut Wire) -> Interface {
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1);
    let mut config = Config::new(HardwareAddress::Ip);
    config.random_seed = seed;
    let mut iface = Interface::new(config, wire, smoltcp::time::Instant::now());
    iface.update_ip_addrs(|a| {
        let _ = a.push(IpCidr::new(IpAddress::Ipv4(addr), prefix));
    });
    iface
}

/// A TCP socket with the buffers of one connection.
pub(crate) fn tcp_socket() -> tcp::Socket<'static> {
    tcp::Socket::new(tcp::SocketBuffer::new(vec![0; BUFFER]), tcp::SocketBuffer::new(vec![0; BUFFER]))
}

/// One host connection and its TCP socket in the stack.
pub(crate) struct Conn {
    /// The stack's socket.
    pub(crate) socket: SocketHandle,
    from_host: mpsc::Receiver<Vec<u8>>,
    to_host: Option<mpsc::Sender<Vec<u8>>>,
    pending: Vec<u8>,
    host_done: bool,
    opened: Instant,
}

impl Conn {
    /// Joins host connection `host` to socket `socket`; `wake` is
    /// notified when the host sends or takes bytes.
    pub(crate) fn new(socket: SocketHandle, host: TcpStream, wake: Arc<Notify>) -> Self {
        let (from_host, to_host) = pipe(host, wake);
        Self { socket, from_host, to_host: Some(to_host), pending: Vec::new(), host_done: false, opened: Instant::now() }
    }
}

/// Moves what the hosts sent into the sockets.
pub(crate) fn pump_in(conns: &mut [Conn], sockets: &mut SocketSet<'_>) {
    for c in conns {
        let s = sockets.get_mut::<tcp::Socket<'_>>(c.socket);
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

/// Moves what the guests sent to the host connections; ends the ones the
/// guest closed, refused or never set up within [`CONNECT_TIMEOUT`]. The
/// sockets of the connections that ended, removed from `sockets`.
pub(crate) fn pump_out(conns: &mut Vec<Conn>, sockets: &mut SocketSet<'_>) -> Vec<SocketHandle> {
    let mut buf = vec![0u8; 16 * 1024];
    for c in conns.iter_mut() {
        let s = sockets.get_mut::<tcp::Socket<'_>>(c.socket);
        let setting_up = matches!(s.state(), tcp::State::SynSent | tcp::State::Listen | tcp::State::SynReceived);
        if setting_up && c.opened.elapsed() > CONNECT_TIMEOUT {
            s.abort();
        }
        while let Some(tx) = c.to_host.as_ref().filter(|_| s.can_recv()) {
            let Ok(permit) = tx.try_reserve() else { break };
            match s.recv_slice(&mut buf) {
                Ok(n) if n > 0 => permit.send(buf[..n].to_vec()),
                _ => break,
            }
        }
        let waiting = matches!(s.state(), tcp::State::SynSent | tcp::State::Listen | tcp::State::SynReceived);
        if !s.may_recv() && s.recv_queue() == 0 && !waiting {
            c.to_host = None;
        }
    }
    let mut ended = Vec::new();
    conns.retain(|c| {
        let state = sockets.get::<tcp::Socket<'_>>(c.socket).state();
        let over = matches!(state, tcp::State::Closed | tcp::State::TimeWait) && (c.host_done || c.to_host.is_none());
        if over {
            sockets.remove(c.socket);
            ended.push(c.socket);
        }
        !over
    });
    ended
}

/// Aborts the connections whose local ports are in `ports` (their packets
/// were refused on the way).
pub(crate) fn abort_ports(conns: &[Conn], sockets: &mut SocketSet<'_>, ports: &[u16]) {
    for c in conns {
        let s = sockets.get_mut::<tcp::Socket<'_>>(c.socket);
        if s.local_endpoint().is_some_and(|e| ports.contains(&e.port)) {
            s.abort();
        }
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
