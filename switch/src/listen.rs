//! Where a port listens for its QEMU NIC: a unix socket, or a TCP socket
//! on loopback. QEMU moves frames over loopback TCP faster than over a
//! unix socket (its kernel buffers grow with the traffic; a unix socket's
//! stay at `wmem_default`, and each frame wakes the reader), so the qemu
//! backend uses TCP. Nagle's algorithm is left on, as QEMU leaves it on its
//! own side and in its socket networking: frames written while an earlier
//! one waits for its acknowledgement go out together, so a busy guest is woken once per
//! burst, not once per frame (measured: 1.5x the throughput of the same
//! ports with `TCP_NODELAY`; see `docs/benchmarks.md`). A TCP port on
//! loopback is open to every local process, so a connection is taken only
//! from a socket owned by this process's own user, found in the kernel's
//! table of sockets: who may connect is then who could connect to a unix
//! socket the server made (mode 0755: its user only).

use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, UnixListener};

/// A port's address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortAddr {
    /// A unix stream socket at this path.
    Unix(PathBuf),
    /// A TCP port on 127.0.0.1 (0: any free one).
    Tcp(u16),
}

impl PortAddr {
    /// QEMU's `-netdev stream` address options for it (`addr.type=…`).
    pub fn qemu_options(&self) -> String {
        match self {
            Self::Unix(p) => format!("addr.type=unix,addr.path={}", p.display()),
            Self::Tcp(port) => format!("addr.type=inet,addr.host=127.0.0.1,addr.port={port}"),
        }
    }
}

/// One accepted connection's halves.
pub(crate) type Halves = (Box<dyn AsyncRead + Send + Unpin>, Box<dyn AsyncWrite + Send + Unpin>);

/// A port's socket, bound but not yet served.
pub(crate) enum Bound {
    Unix(std::os::unix::net::UnixListener),
    Tcp(std::net::TcpListener),
}

impl Bound {
    /// Listens at `addr` (a stale unix socket there is replaced). Returns
    /// the address really bound.
    pub(crate) fn bind(addr: &PortAddr) -> io::Result<(Self, PortAddr)> {
        match addr {
            PortAddr::Unix(path) => {
                let _ = std::fs::remove_file(path);
                let l = std::os::unix::net::UnixListener::bind(path)?;
                l.set_nonblocking(true)?;
                Ok((Self::Unix(l), addr.clone()))
            }
            PortAddr::Tcp(port) => {
                let l = std::net::TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, *port))?;
                l.set_nonblocking(true)?;
                let bound = PortAddr::Tcp(l.local_addr()?.port());
                Ok((Self::Tcp(l), bound))
            }
        }
    }

    /// Served by the runtime this runs in.
    pub(crate) fn serve(self) -> io::Result<Listener> {
        Ok(match self {
            Self::Unix(l) => Listener::Unix(UnixListener::from_std(l)?),
            Self::Tcp(l) => Listener::Tcp(TcpListener::from_std(l)?),
        })
    }
}

/// A port's listening socket.
pub(crate) enum Listener {
    Unix(UnixListener),
    Tcp(TcpListener),
}

impl Listener {
    /// The next connection this port takes; others are closed at once.
    pub(crate) async fn accept(&self) -> io::Result<Halves> {
        loop {
            match self {
                Self::Unix(l) => {
                    let (s, _) = l.accept().await?;
                    let (r, w) = s.into_split();
                    return Ok((Box::new(r), Box::new(w)));
                }
                Self::Tcp(l) => {
                    let (s, peer) = l.accept().await?;
                    match peer_allowed(peer, s.local_addr()?) {
                        Ok(()) => {
                            let (r, w) = s.into_split();
                            return Ok((Box::new(r), Box::new(w)));
                        }
                        Err(why) => tracing::warn!(%peer, %why, "a connection to a NIC's port refused"),
                    }
                }
            }
        }
    }
}

/// Whether the loopback connection from `peer` to `local` comes from a
/// socket of this process's user.
fn peer_allowed(peer: SocketAddr, local: SocketAddr) -> Result<(), String> {
    let table = std::fs::read_to_string("/proc/net/tcp").map_err(|e| format!("reading /proc/net/tcp: {e}"))?;
    let uid = owner(&table, peer, local).ok_or_else(|| format!("no socket from {peer} in /proc/net/tcp"))?;
    let me = std::fs::metadata("/proc/self").map_err(|e| format!("reading /proc/self: {e}"))?.uid();
    if uid == me { Ok(()) } else { Err(format!("its socket belongs to user {uid}, not {me}")) }
}

/// The owner's uid of the socket in `/proc/net/tcp`'s `table` whose local
/// end is `from` and remote end `to`.
fn owner(table: &str, from: SocketAddr, to: SocketAddr) -> Option<u32> {
    let (from, to) = (hex_addr(from)?, hex_addr(to)?);
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f.len() > 7 && f[1].eq_ignore_ascii_case(&from) && f[2].eq_ignore_ascii_case(&to)).then(|| f[7].parse().ok()).flatten()
    })
}

/// An IPv4 address and port as `/proc/net/tcp` prints them: the address
/// as the kernel's 32-bit word in this machine's byte order, in hex.
fn hex_addr(a: SocketAddr) -> Option<String> {
    match a {
        SocketAddr::V4(a) => Some(format!("{:08X}:{:04X}", u32::from_ne_bytes(a.ip().octets()), a.port())),
        SocketAddr::V6(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loopback_socket_is_found_in_the_kernel_table() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (_s, peer) = l.accept().unwrap();
        assert_eq!(peer, c.local_addr().unwrap());
        let local = l.local_addr().unwrap();
        assert_eq!(peer_allowed(peer, local), Ok(()), "this user's own socket");
        let gone = SocketAddr::from(([127, 0, 0, 1], 1));
        assert!(peer_allowed(gone, local).unwrap_err().contains("no socket from"));
        let root = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:1234 0100007F:0050 01 00000000:00000000 00:00000000 00000000     0        0 1 1 0 20 4 30 10 -1\n";
        let (from, to) = ("127.0.0.1:4660".parse().unwrap(), "127.0.0.1:80".parse().unwrap());
        if cfg!(target_endian = "little") {
            assert_eq!(owner(root, from, to), Some(0), "another user's socket is told apart by its uid");
        }
    }

    #[test]
    fn addresses_are_printed_as_the_kernel_does() {
        let a: SocketAddr = "127.0.0.1:4660".parse().unwrap();
        let want = if cfg!(target_endian = "little") { "0100007F:1234" } else { "7F000001:1234" };
        assert_eq!(hex_addr(a).as_deref(), Some(want));
        assert_eq!(hex_addr("[::1]:1".parse().unwrap()), None);
    }

    #[test]
    fn qemu_is_told_the_address() {
        assert_eq!(PortAddr::Tcp(4000).qemu_options(), "addr.type=inet,addr.host=127.0.0.1,addr.port=4000");
        assert_eq!(PortAddr::Unix("/d/sw/a.sock".into()).qemu_options(), "addr.type=unix,addr.path=/d/sw/a.sock");
    }
}
