//! Egress through a NAT gateway: a virtual network's guests reach
//! addresses outside it from one external address. The network's router
//! hands the stack every IPv4 frame a guest sends its gateway for an
//! address no subnet of the network holds (once the guest's egress rules
//! let it out); the stack ends each guest's TCP connection and UDP flow
//! itself and opens the matching one from the external address through a
//! [`Dialer`], which owns the policy (what may be reached, from where).
//! A TCP connection is accepted from the guest only once the dialled one
//! is open: a refusal, or a destination the dialer will not reach, is the
//! guest's RST. Answers enter the guest's segment like routed frames,
//! through its ingress rules (the flow its egress allowed lets them pass).
//! ICMP is not carried.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use smoltcp::iface::{Interface, SocketHandle, SocketSet};
use smoltcp::wire::{IpAddress, IpListenEndpoint};
use tokio::net::{TcpStream, UdpSocket};
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;
use tracing::debug;

use crate::config::within;
use crate::frame::{ETH_HEADER, Ipv4, Mac, PROTO_TCP, PROTO_UDP, udp_frame};
use crate::runtime::runtime;
use crate::stack::{self, CONNECT_TIMEOUT, Conn, Wire};

/// A future the dialer returns.
pub type Dialing<T> = Pin<Box<dyn Future<Output = io::Result<T>> + Send>>;

/// Opens the outside end of guests' flows, from the gateway's external
/// address; refuses (an error) what the host's policy keeps guests from.
pub trait Dialer: Send + Sync + 'static {
    /// A TCP connection to `to`.
    fn tcp(&self, to: SocketAddrV4) -> Dialing<TcpStream>;
    /// A UDP socket connected to `to`.
    fn udp(&self, to: SocketAddrV4) -> Dialing<UdpSocket>;
}

/// How long a UDP flow lives without a datagram either way.
const UDP_IDLE: Duration = Duration::from_secs(120);
/// Datagrams a UDP flow holds while its socket is being opened.
const UDP_WAITING: usize = 16;
/// The largest UDP payload carried back (one 1500-byte packet).
const UDP_LARGEST: usize = 1472;
/// Flows of one network at once, TCP and UDP each (open or being opened):
/// past it a new TCP flow is refused (the guest's RST) and a new UDP flow's
/// datagrams are dropped, so one network's guests cannot take every socket
/// of the host.
pub const MAX_FLOWS: usize = 4096;

/// A guest's end and the outside end of one flow.
type Flow = (SocketAddrV4, SocketAddrV4);

/// Where the NAT's answers go: the network's router, which delivers each
/// packet to the guest it is for.
pub(crate) trait Answer: Send + Sync {
    /// Delivers IP packet `packet` from outside to the guest it is for.
    fn answer(&self, packet: &[u8]);
}

/// The NAT of one virtual network; stops when dropped.
pub(crate) struct Nat {
    frames: mpsc::Sender<Vec<u8>>,
    task: JoinHandle<()>,
}

impl Drop for Nat {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Nat {
    /// Starts the NAT of the network `inside` (its address and prefix:
    /// never dialled), whose answers go to the guests through `router`.
    pub(crate) fn start(inside: (Ipv4Addr, u8), dialer: Arc<dyn Dialer>, router: Weak<dyn Answer>) -> Self {
        let (frames, frames_rx) = mpsc::channel(4096);
        let (events, events_rx) = mpsc::channel(1024);
        let engine = Engine::new(inside, dialer, events);
        let task = runtime().spawn(run(engine, frames_rx, events_rx, router));
        Self { frames, task }
    }

    /// Takes a guest's frame (Ethernet, IPv4) for the outside.
    pub(crate) fn take(&self, frame: Vec<u8>) {
        // Full: dropped; TCP sends it again.
        let _ = self.frames.try_send(frame);
    }
}

/// What the dialling and reading tasks tell the engine.
enum Event {
    /// A TCP flow's outside end, or why there is none; the guest's SYN.
    Tcp(Flow, Vec<u8>, io::Result<TcpStream>),
    /// A UDP flow's socket, or why there is none.
    Udp(Flow, io::Result<UdpSocket>),
    /// A datagram from the outside end of a UDP flow.
    Answer(Flow, Vec<u8>),
}

/// A UDP flow: its socket (once open), what waits for it, its reader.
struct UdpFlow {
    socket: Option<Arc<UdpSocket>>,
    waiting: Vec<Vec<u8>>,
    reader: Option<JoinHandle<()>>,
    last: Instant,
}

impl Drop for UdpFlow {
    fn drop(&mut self) {
        if let Some(r) = &self.reader {
            r.abort();
        }
    }
}

/// The stack and the flows of one NAT.
struct Engine {
    iface: Interface,
    sockets: SocketSet<'static>,
    wire: Wire,
    conns: Vec<Conn>,
    /// Each TCP connection's flow, by its socket.
    flows: HashMap<SocketHandle, Flow>,
    live: HashSet<Flow>,
    dialing: HashSet<Flow>,
    udp: HashMap<Flow, UdpFlow>,
    inside: (Ipv4Addr, u8),
    dialer: Arc<dyn Dialer>,
    events: mpsc::Sender<Event>,
    wake: Arc<Notify>,
    swept: Instant,
}

impl Engine {
    fn new(inside: (Ipv4Addr, u8), dialer: Arc<dyn Dialer>, events: mpsc::Sender<Event>) -> Self {
        let mut wire = Wire::default();
        // Every destination is the stack's own: it stands for the outside.
        let mut iface = stack::interface(Ipv4Addr::from(u32::from(inside.0) | 1), 0, &mut wire);
        iface.set_any_ip(true);
        Self {
            iface,
            sockets: SocketSet::new(Vec::new()),
            wire,
            conns: Vec::new(),
            flows: HashMap::new(),
            live: HashSet::new(),
            dialing: HashSet::new(),
            udp: HashMap::new(),
            inside,
            dialer,
            events,
            wake: Arc::default(),
            swept: Instant::now(),
        }
    }

    /// A guest's frame: to the stack, to a UDP flow, or (a new TCP flow's
    /// SYN) held while its outside end is dialled.
    fn frame(&mut self, frame: &[u8]) {
        let Some(ip) = Ipv4::parse(frame) else { return };
        let Some((sport, dport)) = ip.ports(frame) else { return };
        if within(ip.dst, self.inside.0, self.inside.1) {
            return;
        }
        let flow = (SocketAddrV4::new(ip.src, sport), SocketAddrV4::new(ip.dst, dport));
        let packet = frame.get(ETH_HEADER..).unwrap_or_default().to_vec();
        match ip.proto {
            PROTO_TCP => {
                let flags = ip.tcp_flags(frame).unwrap_or(0);
                let syn = flags & 0x12 == 0x02;
                if !syn || self.live.contains(&flow) {
                    self.wire.rx.push_back(packet);
                } else if self.dialing.contains(&flow) {
                    // Sent again while its flow is dialled: it waits with it.
                } else if self.live.len() + self.dialing.len() >= MAX_FLOWS {
                    debug!(guest = %flow.0, to = %flow.1, "NAT: too many flows; refused");
                    // No listening socket: the stack answers with a RST.
                    self.wire.rx.push_back(packet);
                } else {
                    self.dialing.insert(flow);
                    self.dial_tcp(flow, packet);
                }
            }
            PROTO_UDP => self.datagram(flow, frame.get(ip.payload + 8..).unwrap_or_default().to_vec()),
            _ => {}
        }
    }

    fn dial_tcp(&self, flow: Flow, syn: Vec<u8>) {
        let (dialing, events) = (self.dialer.tcp(flow.1), self.events.clone());
        runtime().spawn(async move {
            let r = match tokio::time::timeout(CONNECT_TIMEOUT, dialing).await {
                Ok(r) => r,
                Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "no answer")),
            };
            let _ = events.send(Event::Tcp(flow, syn, r)).await;
        });
    }

    /// A TCP flow's outside end is open (the guest's SYN now finds a
    /// listening socket) or refused (it finds none: the stack's RST).
    fn dialled(&mut self, flow: Flow, syn: Vec<u8>, outside: io::Result<TcpStream>) {
        self.dialing.remove(&flow);
        match outside {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                let mut socket = stack::tcp_socket();
                let local = IpListenEndpoint { addr: Some(IpAddress::Ipv4(*flow.1.ip())), port: flow.1.port() };
                if socket.listen(local).is_err() {
                    return;
                }
                let handle = self.sockets.add(socket);
                self.conns.push(Conn::new(handle, stream, self.wake.clone()));
                self.flows.insert(handle, flow);
                self.live.insert(flow);
            }
            Err(e) => debug!(guest = %flow.0, to = %flow.1, error = %e, "NAT: not dialled"),
        }
        self.wire.rx.push_back(syn);
    }

    /// A guest's datagram: sent on its flow's socket, opened on first use.
    fn datagram(&mut self, flow: Flow, data: Vec<u8>) {
        if !self.udp.contains_key(&flow) && self.udp.len() >= MAX_FLOWS {
            return;
        }
        let entry = self.udp.entry(flow).or_insert_with(|| {
            let (dialing, events) = (self.dialer.udp(flow.1), self.events.clone());
            runtime().spawn(async move {
                let _ = events.send(Event::Udp(flow, dialing.await)).await;
            });
            UdpFlow { socket: None, waiting: Vec::new(), reader: None, last: Instant::now() }
        });
        entry.last = Instant::now();
        match &entry.socket {
            // Full: dropped, as UDP may be.
            Some(s) => drop(s.try_send(&data)),
            None if entry.waiting.len() < UDP_WAITING => entry.waiting.push(data),
            None => {}
        }
    }

    /// A UDP flow's socket is open: what waited is sent, answers are read.
    fn udp_open(&mut self, flow: Flow, socket: io::Result<UdpSocket>) {
        let Some(f) = self.udp.get_mut(&flow) else { return };
        let socket = match socket {
            Ok(s) => Arc::new(s),
            Err(e) => {
                debug!(guest = %flow.0, to = %flow.1, error = %e, "NAT: UDP not dialled");
                self.udp.remove(&flow);
                return;
            }
        };
        for d in f.waiting.drain(..) {
            let _ = socket.try_send(&d);
        }
        let (reading, events) = (socket.clone(), self.events.clone());
        f.reader = Some(runtime().spawn(async move {
            let mut buf = vec![0u8; 65_536];
            while let Ok(n) = reading.recv(&mut buf).await {
                if n <= UDP_LARGEST && events.send(Event::Answer(flow, buf[..n].to_vec())).await.is_err() {
                    return;
                }
            }
        }));
        f.socket = Some(socket);
    }

    /// An answer of a UDP flow, as the IP packet the guest gets.
    fn answer(&mut self, flow: Flow, data: &[u8]) -> Option<Vec<u8>> {
        self.udp.get_mut(&flow)?.last = Instant::now();
        let (guest, outside) = flow;
        let frame = udp_frame((Mac::BROADCAST, *outside.ip(), outside.port()), (Mac::BROADCAST, *guest.ip(), guest.port()), data);
        frame.get(ETH_HEADER..).map(<[u8]>::to_vec)
    }

    /// Ends the UDP flows idle for [`UDP_IDLE`] (looked at every few seconds).
    fn sweep(&mut self) {
        if self.swept.elapsed() < Duration::from_secs(5) {
            return;
        }
        self.swept = Instant::now();
        self.udp.retain(|_, f| f.last.elapsed() < UDP_IDLE);
    }

    /// One turn of the stack: bytes in, packets processed, bytes out.
    fn poll(&mut self) {
        stack::pump_in(&mut self.conns, &mut self.sockets);
        let now = smoltcp::time::Instant::now();
        self.iface.poll(now, &mut self.wire, &mut self.sockets);
        for ended in stack::pump_out(&mut self.conns, &mut self.sockets) {
            if let Some(flow) = self.flows.remove(&ended) {
                self.live.remove(&flow);
            }
        }
        self.iface.poll(now, &mut self.wire, &mut self.sockets);
    }

    fn delay(&mut self) -> Duration {
        let now = smoltcp::time::Instant::now();
        self.iface.poll_delay(now, &self.sockets).map(|d| Duration::from_micros(d.total_micros())).unwrap_or(Duration::from_secs(1))
    }
}

/// Hands the stack's packets to the guests, through the router.
fn deliver(router: &Weak<dyn Answer>, packets: Vec<Vec<u8>>) -> bool {
    let Some(r) = router.upgrade() else { return false };
    for p in packets {
        r.answer(&p);
    }
    true
}

/// The NAT's loop: guests' frames and the flows' events in, packets out,
/// until the NAT is dropped or its router goes.
async fn run(mut e: Engine, mut frames: mpsc::Receiver<Vec<u8>>, mut events: mpsc::Receiver<Event>, router: Weak<dyn Answer>) {
    loop {
        while let Ok(f) = frames.try_recv() {
            e.frame(&f);
        }
        while let Ok(ev) = events.try_recv() {
            handle(&mut e, ev);
            // One listening socket at a time meets its SYN.
            e.poll();
        }
        e.poll();
        e.sweep();
        if !deliver(&router, std::mem::take(&mut e.wire.tx)) {
            return;
        }
        let (delay, wake) = (e.delay(), e.wake.clone());
        tokio::select! {
            f = frames.recv() => match f {
                Some(f) => e.frame(&f),
                None => return,
            },
            ev = events.recv() => if let Some(ev) = ev { handle(&mut e, ev) },
            () = wake.notified() => {}
            () = tokio::time::sleep(delay.min(Duration::from_secs(1))) => {}
        }
    }
}

fn handle(e: &mut Engine, ev: Event) {
    match ev {
        Event::Tcp(flow, syn, outside) => e.dialled(flow, syn, outside),
        Event::Udp(flow, socket) => e.udp_open(flow, socket),
        Event::Answer(flow, data) => {
            if let Some(p) = e.answer(flow, &data) {
                e.wire.tx.push(p);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{ETHERTYPE_IPV4, ethernet};

    /// A dialer whose flows never open.
    struct Never;

    impl Dialer for Never {
        fn tcp(&self, _: SocketAddrV4) -> Dialing<TcpStream> {
            Box::pin(std::future::pending())
        }
        fn udp(&self, _: SocketAddrV4) -> Dialing<UdpSocket> {
            Box::pin(std::future::pending())
        }
    }

    /// A guest's TCP SYN from `sport` to 192.0.2.10:80, as the router hands it over.
    fn syn(sport: u16) -> Vec<u8> {
        let mut f = ethernet(Mac::BROADCAST, Mac::BROADCAST, ETHERTYPE_IPV4);
        let mut ip = [0u8; 20];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&40u16.to_be_bytes());
        (ip[8], ip[9]) = (64, PROTO_TCP);
        ip[12..16].copy_from_slice(&[10, 30, 1, 2]);
        ip[16..20].copy_from_slice(&[192, 0, 2, 10]);
        f.extend_from_slice(&ip);
        let mut tcp = [0u8; 20];
        tcp[0..2].copy_from_slice(&sport.to_be_bytes());
        tcp[2..4].copy_from_slice(&80u16.to_be_bytes());
        (tcp[12], tcp[13]) = (0x50, 0x02);
        f.extend_from_slice(&tcp);
        f
    }

    #[test]
    fn a_network_opens_a_bounded_number_of_flows() {
        let (events, _keep) = mpsc::channel(1);
        let mut e = Engine::new((Ipv4Addr::new(10, 30, 0, 0), 16), Arc::new(Never), events);
        for port in 0..MAX_FLOWS as u16 {
            e.frame(&syn(10_000 + port));
        }
        assert_eq!((e.dialing.len(), e.wire.rx.len()), (MAX_FLOWS, 0), "every flow is being dialled, none answered yet");
        e.frame(&syn(10_000));
        assert_eq!(e.wire.rx.len(), 0, "a SYN sent again while its flow is dialled waits with it");
        e.frame(&syn(60_000));
        assert_eq!((e.dialing.len(), e.wire.rx.len()), (MAX_FLOWS, 1), "one more is refused: to the stack, which answers RST");
    }

    #[test]
    fn the_network_itself_is_never_outside() {
        let net = Ipv4Addr::new(10, 30, 0, 0);
        assert!(within(Ipv4Addr::new(10, 30, 200, 7), net, 16));
        assert!(!within(Ipv4Addr::new(10, 31, 0, 1), net, 16));
        assert!(within(Ipv4Addr::new(192, 0, 2, 1), Ipv4Addr::UNSPECIFIED, 0));
    }
}
