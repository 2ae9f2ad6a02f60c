//! UDP through the gateway: each host client of a forward is a session, a
//! UDP socket of the stack on a port of the gateway's address, whose
//! datagrams go to the guest's port and whose answers go back to that
//! client from the forward's host socket. A session idle for
//! [`SESSION_IDLE`] ends. As for TCP, the guest's security groups see the
//! gateway as the sender.

use std::net::{SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::time::{Duration, Instant};

use smoltcp::iface::{SocketHandle, SocketSet};
use smoltcp::socket::udp;
use smoltcp::wire::IpAddress;
use tokio::net::UdpSocket;

/// How long a client's session lives without a datagram either way.
pub(super) const SESSION_IDLE: Duration = Duration::from_secs(120);
/// Datagrams buffered per session, each way.
const DATAGRAMS: usize = 64;
/// The largest datagram carried (the guest NIC's MTU bounds it anyway).
const LARGEST: usize = 65_507;

/// A datagram a forward's host socket received.
pub(crate) struct Datagram {
    /// The forward's host socket (answers leave from it).
    pub(crate) host: Arc<UdpSocket>,
    /// Who sent it.
    pub(crate) client: SocketAddr,
    /// Where it goes.
    pub(crate) guest: SocketAddrV4,
    /// Its payload.
    pub(crate) data: Vec<u8>,
}

struct Session {
    host: Arc<UdpSocket>,
    client: SocketAddr,
    socket: SocketHandle,
    last: Instant,
}

/// The UDP sessions of one gateway.
#[derive(Default)]
pub(super) struct Sessions(Vec<Session>);

impl Sessions {
    /// Sends `d` to its guest from its client's session (made on its first
    /// datagram, on local port `port()`).
    pub(super) fn send(&mut self, sockets: &mut SocketSet<'static>, gateway: IpAddress, d: Datagram, port: impl FnOnce() -> u16) {
        let found = self.0.iter().position(|s| Arc::ptr_eq(&s.host, &d.host) && s.client == d.client);
        let i = match found {
            Some(i) => i,
            None => {
                let buffer = || udp::PacketBuffer::new(vec![udp::PacketMetadata::EMPTY; DATAGRAMS], vec![0; DATAGRAMS * 2048]);
                let mut socket = udp::Socket::new(buffer(), buffer());
                if socket.bind((gateway, port())).is_err() {
                    return;
                }
                self.0.push(Session { host: d.host.clone(), client: d.client, socket: sockets.add(socket), last: Instant::now() });
                self.0.len() - 1
            }
        };
        let s = &mut self.0[i];
        s.last = Instant::now();
        let guest = (IpAddress::Ipv4(*d.guest.ip()), d.guest.port());
        // Full: dropped, as UDP may be.
        let _ = sockets.get_mut::<udp::Socket<'_>>(s.socket).send_slice(&d.data, guest);
    }

    /// Sends the guests' answers to their clients; ends idle sessions.
    pub(super) fn pump_out(&mut self, sockets: &mut SocketSet<'static>) {
        let mut buf = vec![0u8; LARGEST];
        for s in &mut self.0 {
            let socket = sockets.get_mut::<udp::Socket<'_>>(s.socket);
            while let Ok((n, _)) = socket.recv_slice(&mut buf) {
                s.last = Instant::now();
                // The host socket's queue full: dropped, as UDP may be.
                let _ = s.host.try_send_to(&buf[..n], s.client);
            }
        }
        self.0.retain(|s| {
            let live = s.last.elapsed() < SESSION_IDLE;
            if !live {
                sockets.remove(s.socket);
            }
            live
        });
    }
}
