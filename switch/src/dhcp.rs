//! The segment's DHCP server: a port asking for an address gets the one the
//! API assigned it (DISCOVER → OFFER, REQUEST → ACK, or NAK for any other
//! address), so the guest's address is always the one in the VM's status.
//! Messages are read and written through smoltcp's `wire::DhcpPacket`.

use std::net::Ipv4Addr;

use smoltcp::wire::{ArpHardware as DhcpHardware, DhcpFlags, DhcpOpCode, DhcpOption, DhcpPacket, EthernetAddress};

use crate::config::{PortConfig, SubnetConfig};
use crate::frame::{Ipv4, Mac, udp_frame};

/// UDP port of DHCP servers.
pub const SERVER_PORT: u16 = 67;
/// UDP port of DHCP clients.
pub const CLIENT_PORT: u16 = 68;

/// The magic cookie that starts the options (RFC 2131).
const MAGIC: u32 = 0x6382_5363;
const BOOTP_LEN: usize = 240;

/// DHCP message types (option 53).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageType {
    /// 1
    Discover,
    /// 2
    Offer,
    /// 3
    Request,
    /// 5
    Ack,
    /// 6
    Nak,
    /// Any other (decline, release, inform).
    Other(u8),
}

impl MessageType {
    fn from_code(c: u8) -> Self {
        match c {
            1 => Self::Discover,
            2 => Self::Offer,
            3 => Self::Request,
            5 => Self::Ack,
            6 => Self::Nak,
            o => Self::Other(o),
        }
    }

    fn code(self) -> u8 {
        match self {
            Self::Discover => 1,
            Self::Offer => 2,
            Self::Request => 3,
            Self::Ack => 5,
            Self::Nak => 6,
            Self::Other(o) => o,
        }
    }
}

/// A DHCP message, as far as the server reads one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// BOOTP op: 1 request, 2 reply.
    pub op: u8,
    /// Transaction id.
    pub xid: [u8; 4],
    /// Flags (the broadcast bit).
    pub flags: [u8; 2],
    /// Client address (renewals).
    pub ciaddr: Ipv4Addr,
    /// Address offered or acknowledged.
    pub yiaddr: Ipv4Addr,
    /// Client hardware address.
    pub chaddr: Mac,
    /// Option 53.
    pub kind: MessageType,
    /// Option 50.
    pub requested: Option<Ipv4Addr>,
    /// Option 54.
    pub server: Option<Ipv4Addr>,
    /// Every option, as `(code, value)`.
    pub options: Vec<(u8, Vec<u8>)>,
}

fn ip4(b: &[u8]) -> Option<Ipv4Addr> {
    (b.len() == 4).then(|| Ipv4Addr::new(b[0], b[1], b[2], b[3]))
}

impl Message {
    /// Parses the BOOTP payload `p` (after the UDP header).
    pub fn parse(p: &[u8]) -> Option<Self> {
        let d = DhcpPacket::new_checked(p).ok()?;
        if d.magic_number() != MAGIC || d.hardware_type() != DhcpHardware::Ethernet || d.hardware_len() != 6 {
            return None;
        }
        let options: Vec<(u8, Vec<u8>)> = d.options().map(|o| (o.kind, o.data.to_vec())).collect();
        let opt = |c: u8| options.iter().find(|(k, _)| *k == c).map(|(_, v)| v.as_slice());
        Some(Self {
            op: u8::from(d.opcode()),
            xid: d.transaction_id().to_be_bytes(),
            flags: d.flags().bits().to_be_bytes(),
            ciaddr: d.client_ip(),
            yiaddr: d.your_ip(),
            chaddr: Mac(d.client_hardware_address().0),
            kind: MessageType::from_code(*opt(53)?.first()?),
            requested: opt(50).and_then(ip4),
            server: opt(54).and_then(ip4),
            options,
        })
    }

    /// The message as a BOOTP payload.
    pub fn encode(&self) -> Vec<u8> {
        let options = self.options.iter().filter(|(c, _)| *c != 53);
        let len = BOOTP_LEN + 3 + options.clone().map(|(_, v)| 2 + v.len()).sum::<usize>() + 1;
        // BOOTP's minimum message: some clients drop shorter ones.
        let mut p = vec![0u8; len.max(300)];
        let mut d = DhcpPacket::new_unchecked(&mut p[..]);
        d.set_opcode(DhcpOpCode::from(self.op));
        d.set_hardware_type(DhcpHardware::Ethernet);
        d.set_hardware_len(6);
        d.set_transaction_id(u32::from_be_bytes(self.xid));
        d.set_flags(DhcpFlags::from_bits_truncate(u16::from_be_bytes(self.flags)));
        d.set_client_ip(self.ciaddr);
        d.set_your_ip(self.yiaddr);
        d.set_client_hardware_address(EthernetAddress(self.chaddr.0));
        d.set_magic_number(MAGIC);
        let mut w = d.options_mut();
        let kind = [self.kind.code()];
        // The buffer was sized for every option (each at most 255 bytes, as built here).
        let written = std::iter::once((53u8, &kind[..])).chain(options.map(|(c, v)| (*c, v.as_slice())));
        for (code, value) in written {
            let _ = w.emit(DhcpOption { kind: code, data: value });
        }
        let _ = w.end();
        p
    }
}

/// A request from a client to the server, built as a guest's DHCP client
/// would (for tests and benchmarks).
pub fn client_frame(mac: Mac, kind: MessageType, xid: [u8; 4], requested: Option<Ipv4Addr>) -> Vec<u8> {
    let mut options = Vec::new();
    if let Some(ip) = requested {
        options.push((50, ip.octets().to_vec()));
    }
    let m = Message {
        op: 1,
        xid,
        flags: [0x80, 0],
        ciaddr: Ipv4Addr::UNSPECIFIED,
        yiaddr: Ipv4Addr::UNSPECIFIED,
        chaddr: mac,
        kind,
        requested,
        server: None,
        options,
    };
    udp_frame((mac, Ipv4Addr::UNSPECIFIED, CLIENT_PORT), (Mac::BROADCAST, Ipv4Addr::BROADCAST, SERVER_PORT), &m.encode())
}

/// Whether `ip` in `frame` is a DHCP request to a server.
pub fn is_request(frame: &[u8], ip: &Ipv4) -> bool {
    ip.proto == crate::frame::PROTO_UDP && ip.ports(frame).is_some_and(|(s, d)| s == CLIENT_PORT && d == SERVER_PORT)
}

/// RFC 3442's classless static routes (option 121): each of `routes`
/// (network, prefix) via `gateway`.
pub fn classless_routes(routes: &[(Ipv4Addr, u8)], gateway: Ipv4Addr) -> Vec<u8> {
    let mut v = Vec::new();
    for (net, prefix) in routes {
        v.push(*prefix);
        v.extend_from_slice(&net.octets()[..usize::from(prefix.div_ceil(8))]);
        v.extend_from_slice(&gateway.octets());
    }
    v
}

/// The server's answer to the DHCP request in `frame` from `port`, with
/// `routes` (the sibling subnets the gateway routes to) as option 121.
pub fn answer(subnet: &SubnetConfig, routes: &[(Ipv4Addr, u8)], port: &PortConfig, frame: &[u8], ip: &Ipv4) -> Option<Vec<u8>> {
    let m = Message::parse(frame.get(ip.payload + 8..)?)?;
    if m.op != 1 || m.chaddr != port.mac {
        return None;
    }
    let kind = match m.kind {
        MessageType::Discover => MessageType::Offer,
        MessageType::Request => {
            let asked = m.requested.unwrap_or(m.ciaddr);
            let ours = m.server.is_none_or(|s| s == subnet.gateway);
            if !ours {
                return None;
            }
            if asked == port.ip { MessageType::Ack } else { MessageType::Nak }
        }
        _ => return None,
    };
    let mut options = vec![(54, subnet.gateway.octets().to_vec())];
    if kind != MessageType::Nak {
        options.push((51, subnet.lease_seconds.to_be_bytes().to_vec()));
        options.push((58, (subnet.lease_seconds / 2).to_be_bytes().to_vec()));
        options.push((1, subnet.mask().octets().to_vec()));
        options.push((28, subnet.broadcast().octets().to_vec()));
        if let Some(h) = port.hostname.as_ref().filter(|h| !h.is_empty() && h.len() < 64) {
            options.push((12, h.as_bytes().to_vec()));
        }
        // Options are at most 255 bytes: 28 routes of a /24 fit.
        let routes = classless_routes(&routes[..routes.len().min(28)], subnet.gateway);
        if !routes.is_empty() {
            options.push((121, routes));
        }
    }
    let reply = Message {
        op: 2,
        xid: m.xid,
        flags: m.flags,
        ciaddr: Ipv4Addr::UNSPECIFIED,
        yiaddr: if kind == MessageType::Nak { Ipv4Addr::UNSPECIFIED } else { port.ip },
        chaddr: m.chaddr,
        kind,
        requested: None,
        server: Some(subnet.gateway),
        options,
    };
    // To the client's MAC and the broadcast address: a client with no
    // address yet and one renewing both take it.
    Some(udp_frame((subnet.gateway_mac, subnet.gateway, SERVER_PORT), (m.chaddr, Ipv4Addr::BROADCAST, CLIENT_PORT), &reply.encode()))
}
