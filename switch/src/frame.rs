//! Just enough of Ethernet, ARP, IPv4 and UDP to switch frames, answer ARP
//! and DHCP, and check who sent what. Frames are byte slices; nothing here
//! allocates except the builders.

use std::fmt;
use std::net::Ipv4Addr;

/// Ethernet header length.
pub const ETH_HEADER: usize = 14;
/// EtherType of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of ARP.
pub const ETHERTYPE_ARP: u16 = 0x0806;
/// IP protocol number of UDP.
pub const PROTO_UDP: u8 = 17;
/// IP protocol number of TCP.
pub const PROTO_TCP: u8 = 6;
/// IP protocol number of ICMP.
pub const PROTO_ICMP: u8 = 1;

/// A MAC address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Mac(pub [u8; 6]);

impl Mac {
    /// The broadcast address.
    pub const BROADCAST: Mac = Mac([0xff; 6]);

    /// Whether it is a group (multicast or broadcast) address.
    pub fn is_group(&self) -> bool {
        self.0[0] & 1 == 1
    }

    /// A locally administered unicast address made from `seed` (stable:
    /// the same seed always gives the same address).
    pub fn local(seed: &[u8]) -> Mac {
        let h = seed.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3));
        let b = h.to_be_bytes();
        Mac([0x52, 0x54, b[0], b[1], b[2], b[3]])
    }

    /// Parses `52:54:00:12:34:56`.
    pub fn parse(s: &str) -> Option<Mac> {
        let mut out = [0u8; 6];
        let mut parts = s.split(':');
        for o in &mut out {
            *o = u8::from_str_radix(parts.next()?, 16).ok()?;
        }
        parts.next().is_none().then_some(Mac(out))
    }
}

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(f, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2], b[3], b[4], b[5])
    }
}

impl fmt::Debug for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

fn mac_at(f: &[u8], at: usize) -> Mac {
    let mut m = [0u8; 6];
    m.copy_from_slice(&f[at..at + 6]);
    Mac(m)
}

fn ip_at(f: &[u8], at: usize) -> Ipv4Addr {
    Ipv4Addr::new(f[at], f[at + 1], f[at + 2], f[at + 3])
}

fn u16_at(f: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([f[at], f[at + 1]])
}

/// An Ethernet frame's header fields, if it is long enough to have them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ethernet {
    /// Destination.
    pub dst: Mac,
    /// Source.
    pub src: Mac,
    /// EtherType (after a VLAN tag, the tag's type: tagged frames are not switched).
    pub ethertype: u16,
}

impl Ethernet {
    /// The header of `frame`.
    pub fn parse(frame: &[u8]) -> Option<Self> {
        (frame.len() >= ETH_HEADER).then(|| Self { dst: mac_at(frame, 0), src: mac_at(frame, 6), ethertype: u16_at(frame, 12) })
    }
}

/// An ARP packet for IPv4 over Ethernet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arp {
    /// 1 request, 2 reply.
    pub op: u16,
    /// Sender hardware address.
    pub sha: Mac,
    /// Sender protocol address.
    pub spa: Ipv4Addr,
    /// Target hardware address.
    pub tha: Mac,
    /// Target protocol address.
    pub tpa: Ipv4Addr,
}

impl Arp {
    /// The ARP packet in `frame` (Ethernet/IPv4 only).
    pub fn parse(frame: &[u8]) -> Option<Self> {
        let p = frame.get(ETH_HEADER..ETH_HEADER + 28)?;
        if u16_at(p, 0) != 1 || u16_at(p, 2) != ETHERTYPE_IPV4 || p[4] != 6 || p[5] != 4 {
            return None;
        }
        Some(Self { op: u16_at(p, 6), sha: mac_at(p, 8), spa: ip_at(p, 14), tha: mac_at(p, 18), tpa: ip_at(p, 24) })
    }

    /// A frame carrying this packet from `src` to `dst`.
    pub fn to_frame(&self, src: Mac, dst: Mac) -> Vec<u8> {
        let mut f = ethernet(dst, src, ETHERTYPE_ARP);
        f.extend_from_slice(&[0, 1, 0x08, 0, 6, 4]);
        f.extend_from_slice(&self.op.to_be_bytes());
        f.extend_from_slice(&self.sha.0);
        f.extend_from_slice(&self.spa.octets());
        f.extend_from_slice(&self.tha.0);
        f.extend_from_slice(&self.tpa.octets());
        f
    }
}

/// The fields of an IPv4 packet the switch looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4 {
    /// Source.
    pub src: Ipv4Addr,
    /// Destination.
    pub dst: Ipv4Addr,
    /// Protocol number.
    pub proto: u8,
    /// Offset of the payload in the frame.
    pub payload: usize,
    /// Whether this is a later fragment (no transport header).
    pub later_fragment: bool,
}

impl Ipv4 {
    /// The IPv4 packet in `frame`.
    pub fn parse(frame: &[u8]) -> Option<Self> {
        let p = frame.get(ETH_HEADER..)?;
        if p.len() < 20 || p[0] >> 4 != 4 {
            return None;
        }
        let ihl = usize::from(p[0] & 0x0f) * 4;
        if ihl < 20 || p.len() < ihl {
            return None;
        }
        let later_fragment = u16_at(p, 6) & 0x1fff != 0;
        Some(Self { src: ip_at(p, 12), dst: ip_at(p, 16), proto: p[9], payload: ETH_HEADER + ihl, later_fragment })
    }

    /// Source and destination ports of a TCP or UDP packet (the ICMP type
    /// and code for ICMP), if its header is there.
    pub fn ports(&self, frame: &[u8]) -> Option<(u16, u16)> {
        if self.later_fragment {
            return None;
        }
        let t = frame.get(self.payload..)?;
        match self.proto {
            PROTO_TCP | PROTO_UDP if t.len() >= 4 => Some((u16_at(t, 0), u16_at(t, 2))),
            PROTO_ICMP if t.len() >= 2 => Some((u16::from(t[0]), u16::from(t[1]))),
            _ => None,
        }
    }

    /// The TCP flags of a TCP packet.
    pub fn tcp_flags(&self, frame: &[u8]) -> Option<u8> {
        (self.proto == PROTO_TCP && !self.later_fragment).then(|| frame.get(self.payload + 13).copied()).flatten()
    }
}

/// An Ethernet header.
pub fn ethernet(dst: Mac, src: Mac, ethertype: u16) -> Vec<u8> {
    let mut f = Vec::with_capacity(342);
    f.extend_from_slice(&dst.0);
    f.extend_from_slice(&src.0);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

/// The Internet checksum of `data`.
pub fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = data.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))).sum();
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Readdresses the IPv4 `frame` for its next hop, as a router does: new
/// destination and source MACs, TTL one less (and the header checksum
/// again). False, and nothing changed, when its TTL would run out.
pub fn next_hop(frame: &mut [u8], dst: Mac, src: Mac) -> bool {
    let Some(header) = frame.get(ETH_HEADER).map(|b| usize::from(b & 0x0f) * 4) else { return false };
    if header < 20 || frame.len() < ETH_HEADER + header || frame[ETH_HEADER + 8] <= 1 {
        return false;
    }
    frame[..6].copy_from_slice(&dst.0);
    frame[6..12].copy_from_slice(&src.0);
    let ip = &mut frame[ETH_HEADER..ETH_HEADER + header];
    ip[8] -= 1;
    ip[10..12].copy_from_slice(&[0, 0]);
    let sum = checksum(ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    true
}

/// A UDP datagram in an IPv4 packet in an Ethernet frame (UDP checksum 0,
/// which IPv4 allows).
pub fn udp_frame(src: (Mac, Ipv4Addr, u16), dst: (Mac, Ipv4Addr, u16), payload: &[u8]) -> Vec<u8> {
    let mut f = ethernet(dst.0, src.0, ETHERTYPE_IPV4);
    let total = (20 + 8 + payload.len()) as u16;
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[8] = 64;
    ip[9] = PROTO_UDP;
    ip[12..16].copy_from_slice(&src.1.octets());
    ip[16..20].copy_from_slice(&dst.1.octets());
    let sum = checksum(&ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&src.2.to_be_bytes());
    f.extend_from_slice(&dst.2.to_be_bytes());
    f.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_parse_print_and_derive() {
        let m = Mac::parse("52:54:00:ab:cd:ef").unwrap();
        assert_eq!(m.to_string(), "52:54:00:ab:cd:ef");
        assert!(Mac::parse("52:54:00:ab:cd").is_none() && Mac::parse("52:54:00:ab:cd:ef:01").is_none());
        assert!(Mac::BROADCAST.is_group() && !m.is_group());
        let a = Mac::local(b"vm-1/0");
        assert_eq!(a, Mac::local(b"vm-1/0"));
        assert_ne!(a, Mac::local(b"vm-1/1"));
        assert!(!a.is_group() && a.0[0] & 2 == 2, "locally administered unicast: {a}");
    }

    #[test]
    fn a_udp_frame_round_trips_with_a_valid_ip_checksum() {
        let (a, b) = (Mac::local(b"a"), Mac::local(b"b"));
        let f = udp_frame((a, Ipv4Addr::new(10, 0, 0, 1), 67), (b, Ipv4Addr::BROADCAST, 68), b"hello");
        let eth = Ethernet::parse(&f).unwrap();
        assert_eq!((eth.src, eth.dst, eth.ethertype), (a, b, ETHERTYPE_IPV4));
        let ip = Ipv4::parse(&f).unwrap();
        assert_eq!((ip.src, ip.dst, ip.proto), (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::BROADCAST, PROTO_UDP));
        assert_eq!(ip.ports(&f), Some((67, 68)));
        assert_eq!(checksum(&f[ETH_HEADER..ETH_HEADER + 20]), 0, "a valid header sums to zero");
        assert_eq!(&f[ip.payload + 8..], b"hello");
    }

    #[test]
    fn the_next_hop_has_new_macs_one_less_ttl_and_a_valid_checksum() {
        let (a, b, gw, c) = (Mac::local(b"a"), Mac::local(b"b"), Mac::local(b"gw"), Mac::local(b"c"));
        let mut f = udp_frame((a, Ipv4Addr::new(10, 0, 1, 5), 1000), (b, Ipv4Addr::new(10, 0, 2, 5), 80), b"x");
        assert!(next_hop(&mut f, c, gw));
        let eth = Ethernet::parse(&f).unwrap();
        assert_eq!((eth.dst, eth.src, f[ETH_HEADER + 8]), (c, gw, 63));
        assert_eq!(checksum(&f[ETH_HEADER..ETH_HEADER + 20]), 0, "the header sums to zero again");
        f[ETH_HEADER + 8] = 1;
        let before = f.clone();
        assert!(!next_hop(&mut f, a, gw) && f == before, "a TTL that runs out: dropped, untouched");
    }

    #[test]
    fn arp_round_trips() {
        let a = Arp { op: 1, sha: Mac::local(b"a"), spa: Ipv4Addr::new(10, 0, 0, 5), tha: Mac::default(), tpa: Ipv4Addr::new(10, 0, 0, 1) };
        let f = a.to_frame(a.sha, Mac::BROADCAST);
        assert_eq!(Arp::parse(&f), Some(a));
        assert!(Arp::parse(&f[..30]).is_none());
    }
}
