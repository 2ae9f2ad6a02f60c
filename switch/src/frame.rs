//! What the switch reads and writes of Ethernet, ARP, IPv4 and UDP to
//! switch frames, answer ARP and DHCP, and check who sent what, through
//! smoltcp's `wire` (its checked views of each header). Frames are byte
//! slices; nothing here allocates except the builders.

use std::fmt;
use std::net::Ipv4Addr;

use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::EthernetProtocol as EtherType;
use smoltcp::wire::{
    ArpHardware, ArpOperation, ArpPacket, EthernetAddress, EthernetFrame, IpProtocol, Ipv4Packet, Ipv4Repr, UdpPacket, UdpRepr,
    checksum as inet,
};

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

fn mac_of(a: EthernetAddress) -> Mac {
    Mac(a.0)
}

fn mac_in(b: &[u8]) -> Option<Mac> {
    Some(Mac(b.try_into().ok()?))
}

fn ip_in(b: &[u8]) -> Option<Ipv4Addr> {
    let o: [u8; 4] = b.try_into().ok()?;
    Some(Ipv4Addr::from(o))
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
        let f = EthernetFrame::new_checked(frame).ok()?;
        Some(Self { dst: mac_of(f.dst_addr()), src: mac_of(f.src_addr()), ethertype: u16::from(f.ethertype()) })
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
        let p = ArpPacket::new_checked(frame.get(ETH_HEADER..)?).ok()?;
        if p.hardware_type() != ArpHardware::Ethernet
            || p.protocol_type() != EtherType::Ipv4
            || p.hardware_len() != 6
            || p.protocol_len() != 4
        {
            return None;
        }
        Some(Self {
            op: u16::from(p.operation()),
            sha: mac_in(p.source_hardware_addr())?,
            spa: ip_in(p.source_protocol_addr())?,
            tha: mac_in(p.target_hardware_addr())?,
            tpa: ip_in(p.target_protocol_addr())?,
        })
    }

    /// A frame carrying this packet from `src` to `dst`.
    pub fn to_frame(&self, src: Mac, dst: Mac) -> Vec<u8> {
        let mut f = ethernet(dst, src, ETHERTYPE_ARP);
        f.resize(ETH_HEADER + 28, 0);
        let mut p = ArpPacket::new_unchecked(&mut f[ETH_HEADER..]);
        p.set_hardware_type(ArpHardware::Ethernet);
        p.set_protocol_type(EtherType::Ipv4);
        p.set_hardware_len(6);
        p.set_protocol_len(4);
        p.set_operation(ArpOperation::from(self.op));
        p.set_source_hardware_addr(&self.sha.0);
        p.set_source_protocol_addr(&self.spa.octets());
        p.set_target_hardware_addr(&self.tha.0);
        p.set_target_protocol_addr(&self.tpa.octets());
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
        let p = Ipv4Packet::new_checked(frame.get(ETH_HEADER..)?).ok()?;
        if p.version() != 4 {
            return None;
        }
        Some(Self {
            src: p.src_addr(),
            dst: p.dst_addr(),
            proto: u8::from(p.next_header()),
            payload: ETH_HEADER + usize::from(p.header_len()),
            later_fragment: p.frag_offset() != 0,
        })
    }

    /// Source and destination ports of a TCP or UDP packet (the ICMP type
    /// and code for ICMP), if its header is there.
    pub fn ports(&self, frame: &[u8]) -> Option<(u16, u16)> {
        if self.later_fragment {
            return None;
        }
        let t = frame.get(self.payload..)?;
        match self.proto {
            // The ports are the first four bytes of both headers.
            PROTO_TCP | PROTO_UDP if t.len() >= 4 => Some((u16::from_be_bytes([t[0], t[1]]), u16::from_be_bytes([t[2], t[3]]))),
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
    !inet::data(data)
}

/// Readdresses the IPv4 `frame` for its next hop, as a router does: new
/// destination and source MACs, TTL one less (and the header checksum
/// again). False, and nothing changed, when its TTL would run out.
pub fn next_hop(frame: &mut [u8], dst: Mac, src: Mac) -> bool {
    let Some(mut ip) = frame.get_mut(ETH_HEADER..).and_then(|p| Ipv4Packet::new_checked(p).ok()) else { return false };
    let ttl = ip.hop_limit();
    if ttl <= 1 {
        return false;
    }
    ip.set_hop_limit(ttl - 1);
    ip.fill_checksum();
    let mut eth = EthernetFrame::new_unchecked(frame);
    eth.set_dst_addr(EthernetAddress(dst.0));
    eth.set_src_addr(EthernetAddress(src.0));
    true
}

/// A UDP datagram in an IPv4 packet in an Ethernet frame.
pub fn udp_frame(src: (Mac, Ipv4Addr, u16), dst: (Mac, Ipv4Addr, u16), payload: &[u8]) -> Vec<u8> {
    let mut f = ethernet(dst.0, src.0, ETHERTYPE_IPV4);
    let udp = UdpRepr { src_port: src.2, dst_port: dst.2 };
    let ip = Ipv4Repr {
        src_addr: src.1,
        dst_addr: dst.1,
        next_header: IpProtocol::Udp,
        payload_len: udp.header_len() + payload.len(),
        hop_limit: 64,
    };
    f.resize(ETH_HEADER + ip.buffer_len() + ip.payload_len, 0);
    let mut packet = Ipv4Packet::new_unchecked(&mut f[ETH_HEADER..]);
    ip.emit(&mut packet, &ChecksumCapabilities::default());
    let mut datagram = UdpPacket::new_unchecked(packet.payload_mut());
    let (from, to) = (src.1.into(), dst.1.into());
    udp.emit(&mut datagram, &from, &to, payload.len(), |b| b[..payload.len()].copy_from_slice(payload), &ChecksumCapabilities::default());
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
        let udp = UdpPacket::new_checked(&f[ip.payload..]).unwrap();
        assert!(udp.verify_checksum(&ip.src.into(), &ip.dst.into()), "the UDP checksum is filled and right");
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
