//! External IPs: a pool of loopback addresses (default `127.42.0.0/16`),
//! each given to at most one VM at a time.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::str::FromStr;

/// A pool's IPv4 network: the model's [`vmaas_model::network::Cidr`]
/// (no host bits), with a prefix of 8 to 30.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr(vmaas_model::network::Cidr);

/// Why a text is not a pool's network.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CidrError {
    /// Not an IPv4 network.
    #[error(transparent)]
    Network(#[from] vmaas_model::network::CidrError),
    /// A prefix too short for a pool.
    #[error("{0:?}: the prefix must be between 8 and 30")]
    Prefix(String),
}

/// An address another VM holds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{ip} is held by VM {holder}")]
pub struct Held {
    /// The address.
    pub ip: Ipv4Addr,
    /// The VM that holds it.
    pub holder: String,
}

impl FromStr for Cidr {
    type Err = CidrError;
    fn from_str(s: &str) -> Result<Self, CidrError> {
        let cidr = vmaas_model::network::Cidr::parse(s, 4)?;
        if cidr.prefix_len() < 8 {
            return Err(CidrError::Prefix(s.to_owned()));
        }
        Ok(Self(cidr))
    }
}

impl Cidr {
    /// Usable host addresses: the network and broadcast addresses excluded.
    fn hosts(self) -> impl Iterator<Item = Ipv4Addr> {
        self.0.ipv4_hosts()
    }
}

/// Which address belongs to which VM.
#[derive(Debug)]
pub struct IpPool {
    cidr: Cidr,
    owners: BTreeMap<Ipv4Addr, String>,
}

impl IpPool {
    /// An empty pool over `cidr`.
    pub fn new(cidr: Cidr) -> Self {
        Self { cidr, owners: BTreeMap::new() }
    }

    /// Records that `vm` holds `ip` (when re-adopting).
    pub fn reserve(&mut self, ip: Ipv4Addr, vm: &str) -> Result<(), Held> {
        match self.owners.get(&ip) {
            Some(o) if o != vm => Err(Held { ip, holder: o.clone() }),
            _ => {
                self.owners.insert(ip, vm.to_owned());
                Ok(())
            }
        }
    }

    /// The address `vm` holds, or a free one for it.
    pub fn allocate(&mut self, vm: &str) -> Option<Ipv4Addr> {
        self.allocate_usable(vm, |_| true)
    }

    /// The address `vm` holds, or a free one for it that `usable` accepts
    /// (one whose ports no other process of the host holds, say). An
    /// address skipped stays free for later.
    pub fn allocate_usable(&mut self, vm: &str, usable: impl Fn(Ipv4Addr) -> bool) -> Option<Ipv4Addr> {
        if let Some((ip, _)) = self.owners.iter().find(|(_, o)| o.as_str() == vm) {
            return Some(*ip);
        }
        let ip = self.cidr.hosts().find(|ip| !self.owners.contains_key(ip) && usable(*ip))?;
        self.owners.insert(ip, vm.to_owned());
        Some(ip)
    }

    /// Gives back whatever `vm` holds.
    pub fn release(&mut self, vm: &str) {
        self.owners.retain(|_, o| o != vm);
    }
}

/// An address's ports bound for a VM from the moment its address is
/// chosen until its QEMU is about to bind them itself (dropped right
/// before QEMU starts): no other process of the host takes them while a
/// template is made, say.
#[derive(Debug, Default)]
pub struct HeldPorts {
    /// The bound sockets, closed when dropped.
    _sockets: Vec<std::os::fd::OwnedFd>,
}

/// `ip`'s `ports` (TCP and UDP as given), bound and held, or None when
/// another process of this host holds one of them. Only an address in use
/// counts as held; a refusal for another reason (a privileged port) is left
/// to QEMU, which meets it the same way.
pub fn hold_on_host(ip: Ipv4Addr, ports: &[(vmaas_model::Protocol, u16)]) -> Option<HeldPorts> {
    let mut held = Vec::new();
    for (protocol, port) in ports {
        let bound = match protocol {
            vmaas_model::Protocol::Udp => std::net::UdpSocket::bind((ip, *port)).map(std::os::fd::OwnedFd::from),
            _ => std::net::TcpListener::bind((ip, *port)).map(std::os::fd::OwnedFd::from),
        };
        match bound {
            Ok(socket) => held.push(socket),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => return None,
            Err(_) => {}
        }
    }
    Some(HeldPorts { _sockets: held })
}

/// The IPv4 addresses sockets of this host (its network namespace) are
/// bound to exactly: listening TCP sockets and bound UDP ones, from
/// `/proc/net/tcp` and `/proc/net/udp` (unspecified and loopback-wide
/// binds like `0.0.0.0` hold no one address).
pub fn held_on_host() -> std::collections::HashSet<Ipv4Addr> {
    let mut held = std::collections::HashSet::new();
    for (file, listening) in [("/proc/net/tcp", Some("0A")), ("/proc/net/udp", None)] {
        let Ok(text) = std::fs::read_to_string(file) else { continue };
        held.extend(text.lines().skip(1).filter_map(|l| bound_address(l, listening)));
    }
    held.remove(&Ipv4Addr::UNSPECIFIED);
    held
}

/// The local address of one `/proc/net/{tcp,udp}` line, if its state is
/// `state` (any, when none).
fn bound_address(line: &str, state: Option<&str>) -> Option<Ipv4Addr> {
    let mut f = line.split_whitespace();
    let local = f.nth(1)?;
    let st = f.nth(1)?;
    if state.is_some_and(|want| want != st) {
        return None;
    }
    let hex = local.split(':').next()?;
    // The kernel prints the address's bytes as a number in host byte order.
    Some(Ipv4Addr::from(u32::from_str_radix(hex, 16).ok()?.to_ne_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_another_process_holds_is_skipped() {
        let mut p = IpPool::new("127.46.7.0/29".parse().unwrap());
        let held = std::net::TcpListener::bind(("127.46.7.1", 0)).unwrap();
        let port = held.local_addr().unwrap().port();
        let ports = [(vmaas_model::Protocol::Tcp, port)];
        let ip = p.allocate_usable("a", |ip| hold_on_host(ip, &ports).is_some()).unwrap();
        assert_eq!(ip, Ipv4Addr::new(127, 46, 7, 2), "127.46.7.1:{port} is held by this test");
        drop(held);
        assert_eq!(p.allocate_usable("b", |ip| hold_on_host(ip, &ports).is_some()), Some(Ipv4Addr::new(127, 46, 7, 1)), "free again");
    }

    #[test]
    fn the_addresses_sockets_are_bound_to_are_held() {
        let line = "   3: 0107A87F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0";
        assert_eq!(bound_address(line, Some("0A")), Some(Ipv4Addr::new(127, 168, 7, 1)), "little-endian on this host");
        assert_eq!(bound_address(line, Some("01")), None, "not in the state asked for");
        let held = std::net::TcpListener::bind(("127.46.9.3", 0)).unwrap();
        assert!(held_on_host().contains(&Ipv4Addr::new(127, 46, 9, 3)));
        drop(held);
        assert!(!held_on_host().contains(&Ipv4Addr::new(127, 46, 9, 3)));
    }

    #[test]
    fn allocates_distinct_addresses_and_reuses_released_ones() {
        let mut p = IpPool::new("127.42.0.0/30".parse().unwrap());
        let a = p.allocate("a").unwrap();
        let b = p.allocate("b").unwrap();
        assert_eq!((a, b), (Ipv4Addr::new(127, 42, 0, 1), Ipv4Addr::new(127, 42, 0, 2)));
        assert_eq!(p.allocate("a"), Some(a), "the same VM keeps its address");
        assert_eq!(p.allocate("c"), None, "a /30 has two hosts");
        p.release("a");
        assert_eq!(p.allocate("c"), Some(a));
        assert!(p.reserve(b, "c").is_err());
    }

    #[test]
    fn cidr_parsing() {
        assert!("127.42.0.0/16".parse::<Cidr>().is_ok());
        assert!("127.42.0.0".parse::<Cidr>().unwrap_err().to_string().contains("CIDR"));
        assert!("127.42.0.0/31".parse::<Cidr>().is_err());
        assert!("10.0.0.0/7".parse::<Cidr>().unwrap_err().to_string().contains("between 8 and 30"));
        assert!("127.42.0.1/16".parse::<Cidr>().unwrap_err().to_string().contains("host bits"), "refused, as the model refuses them");
    }
}
