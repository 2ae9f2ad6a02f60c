//! Where NAT gateways may take guests: the administrator's policy
//! (`--nat-allow`, `--nat-netns`) and the [`Dialer`] each gateway opens
//! its outside flows with. By default (`public`) guests reach globally
//! routable addresses only: loopback, private, link-local (cloud metadata
//! answers on 169.254.169.254), CGNAT, documentation and other
//! special-purpose addresses, and the host's own addresses, only when an
//! entry names them; the server's own listening sockets never. Sockets are
//! bound to the gateway's external address before they connect, so the
//! far end sees that address; with `--nat-netns` they are made inside that
//! network namespace (the one the host's outside interface is in), and
//! the checks of "the host's own" run there too.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::Path;
use std::sync::{Arc, OnceLock};

use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::{TcpSocket, TcpStream, UdpSocket};
use vmaas_model::network::Cidr;
use vmaas_switch::{Dialer, Dialing};
use vmaas_tap::netns::Namespace;

use crate::sources::{BadEntry, local, parse_net, special};

/// What NAT gateways may reach, and from which network namespace.
#[derive(Debug, Default)]
pub struct EgressPolicy {
    public: bool,
    allow: Vec<Cidr>,
    netns: Option<Namespace>,
    own: Arc<OnceLock<Vec<SocketAddr>>>,
}

/// Why a destination is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EgressRefused {
    /// Of a special-purpose class, and no entry names it.
    #[error("{0} is a {1} address, which --nat-allow does not name")]
    Special(Ipv4Addr, &'static str),
    /// One of the host's own addresses, and no entry names it.
    #[error("{0} is an address of this host, which --nat-allow does not name")]
    Host(Ipv4Addr),
    /// A public address, and the list does not hold it.
    #[error("{0} is not among the addresses NAT gateways reach")]
    NotListed(Ipv4Addr),
    /// One of the server's own listening sockets.
    #[error("{0} is this server's own listening socket")]
    Own(SocketAddrV4),
}

/// Why an egress policy cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum EgressPolicyError {
    /// An entry of the list is neither `public`, an address nor a network.
    #[error("{0:?} is not public, an address or a network")]
    Entry(String),
    /// The network namespace could not be joined.
    #[error("joining the network namespace {path}: {source}")]
    Namespace {
        /// The namespace's path.
        path: std::path::PathBuf,
        /// Why it could not be joined.
        source: io::Error,
    },
}

impl EgressPolicy {
    /// `public` and networks (`ADDR/LEN`) or addresses; sockets made in the
    /// namespace at `netns` if given (joined now: an error if it cannot be).
    pub fn new(list: &[String], netns: Option<&Path>) -> Result<Self, EgressPolicyError> {
        let mut p = Self { own: Arc::default(), ..Self::default() };
        for t in list.iter().map(|t| t.trim()).filter(|t| !t.is_empty()) {
            if t.eq_ignore_ascii_case("public") {
                p.public = true;
            } else {
                p.allow.push(parse_net(t).map_err(|BadEntry(e)| EgressPolicyError::Entry(e))?);
            }
        }
        if let Some(path) = netns {
            p.netns = Some(Namespace::open(path).map_err(|source| EgressPolicyError::Namespace { path: path.to_owned(), source })?);
        }
        Ok(p)
    }

    /// The same policy, never reaching the sockets `listening` will hold
    /// once the server listens.
    pub fn with_listening(mut self, listening: Arc<OnceLock<Vec<SocketAddr>>>) -> Self {
        self.own = listening;
        self
    }

    /// Whether a guest may reach `to` (run where the sockets are made).
    fn check(&self, to: SocketAddrV4) -> Result<(), EgressRefused> {
        let ip = *to.ip();
        let own = self.own.get().into_iter().flatten().any(|o| {
            o.port() == to.port() && (o.ip() == IpAddr::V4(ip) || (o.ip().is_unspecified() && self.netns.is_none() && local(ip.into())))
        });
        if own {
            return Err(EgressRefused::Own(to));
        }
        if self.allow.iter().any(|c| c.contains(ip.into())) {
            return Ok(());
        }
        if let Some(class) = special(ip.into()) {
            return Err(EgressRefused::Special(ip, class));
        }
        if local(ip.into()) {
            return Err(EgressRefused::Host(ip));
        }
        if self.public { Ok(()) } else { Err(EgressRefused::NotListed(ip)) }
    }

    /// A socket of type `ty` bound to `from` for a flow to `to`, checked and
    /// made where egress leaves.
    async fn socket(self: &Arc<Self>, ty: Type, from: Ipv4Addr, to: SocketAddrV4) -> io::Result<Socket> {
        let me = self.clone();
        let make = move || {
            me.check(to).map_err(|e| io::Error::new(io::ErrorKind::PermissionDenied, e))?;
            let protocol = if ty == Type::STREAM { Protocol::TCP } else { Protocol::UDP };
            let s = Socket::new(Domain::IPV4, ty, Some(protocol))?;
            s.set_nonblocking(true)?;
            s.bind(&SocketAddr::from((from, 0)).into())?;
            Ok(s)
        };
        self.where_egress_leaves(make).await
    }

    /// Runs `work` in `--nat-netns` if given, else here.
    async fn where_egress_leaves<T: Send + 'static>(&self, work: impl FnOnce() -> io::Result<T> + Send + 'static) -> io::Result<T> {
        match &self.netns {
            Some(ns) => ns.run(work).await.map_err(|_| io::Error::other("the namespace's thread ended"))?,
            None => work(),
        }
    }

    /// Whether sockets can be bound to `address` where egress leaves: a NAT
    /// gateway on an address the host (or namespace) lacks cannot run.
    pub async fn bindable(self: &Arc<Self>, address: Ipv4Addr) -> io::Result<()> {
        self.where_egress_leaves(move || Socket::new(Domain::IPV4, Type::DGRAM, None)?.bind(&SocketAddr::from((address, 0)).into())).await
    }
}

/// The dialer of one NAT gateway: flows from its external address.
pub struct Egress {
    /// The external address.
    pub from: Ipv4Addr,
    /// The administrator's policy.
    pub policy: Arc<EgressPolicy>,
}

impl Dialer for Egress {
    fn tcp(&self, to: SocketAddrV4) -> Dialing<TcpStream> {
        let (policy, from) = (self.policy.clone(), self.from);
        Box::pin(async move {
            let s = policy.socket(Type::STREAM, from, to).await?;
            TcpSocket::from_std_stream(std::net::TcpStream::from(s)).connect(to.into()).await
        })
    }

    fn udp(&self, to: SocketAddrV4) -> Dialing<UdpSocket> {
        let (policy, from) = (self.policy.clone(), self.from);
        Box::pin(async move {
            let s = policy.socket(Type::DGRAM, from, to).await?;
            s.connect(&SocketAddr::from(to).into())?;
            UdpSocket::from_std(std::net::UdpSocket::from(s))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn to(a: [u8; 4]) -> SocketAddrV4 {
        SocketAddrV4::new(Ipv4Addr::from(a), 80)
    }

    #[test]
    fn guests_reach_public_addresses_and_what_the_administrator_names() {
        let p = EgressPolicy::new(&["public".into(), "192.0.2.0/24".into()], None).unwrap();
        assert_eq!(p.check(to([9, 9, 9, 9])), Ok(()));
        assert_eq!(p.check(to([192, 0, 2, 10])), Ok(()), "named");
        assert_eq!(p.check(to([127, 0, 0, 1])), Err(EgressRefused::Special(Ipv4Addr::LOCALHOST, "loopback")));
        assert!(matches!(p.check(to([169, 254, 169, 254])), Err(EgressRefused::Special(_, "link-local"))));
        assert!(matches!(p.check(to([10, 1, 2, 3])), Err(EgressRefused::Special(_, "private"))));
        let closed = EgressPolicy::new(&["198.51.100.7".into()], None).unwrap();
        assert_eq!(closed.check(to([9, 9, 9, 9])), Err(EgressRefused::NotListed(Ipv4Addr::new(9, 9, 9, 9))));
        assert_eq!(closed.check(to([198, 51, 100, 7])), Ok(()));
        assert!(EgressPolicy::new(&["nope".into()], None).is_err());
        assert!(EgressPolicy::new(&[], Some(Path::new("/nonexistent/ns"))).is_err());
    }

    #[test]
    fn the_servers_own_sockets_are_never_reached() {
        let own = Arc::new(OnceLock::from(vec![SocketAddr::from(([127, 0, 0, 1], 8080))]));
        let p = EgressPolicy::new(&["127.0.0.0/8".into()], None).unwrap().with_listening(own);
        assert_eq!(p.check(to([127, 0, 0, 2])), Ok(()));
        let api = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 8080);
        assert_eq!(p.check(api), Err(EgressRefused::Own(api)));
    }
}
