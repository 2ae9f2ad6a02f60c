//! Security groups on a NIC, enforced by the switch, statefully: a packet
//! passes if the sender's egress rules and the receiver's ingress rules
//! allow it (a NIC without a firewall allows everything), and then its
//! replies pass too, whatever the rules, while the flow lives.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use crate::frame::{Ipv4, PROTO_ICMP, PROTO_TCP, PROTO_UDP};

/// A rule's protocol (OSAC's `PROTOCOL_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// Any protocol.
    All,
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
    /// ICMP.
    Icmp,
}

/// One rule of a security group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    /// The protocol.
    pub protocol: Protocol,
    /// First port (TCP/UDP), inclusive.
    pub port_from: u16,
    /// Last port, inclusive.
    pub port_to: u16,
    /// The remote side: its network address and prefix length.
    pub cidr: (Ipv4Addr, u8),
}

impl Rule {
    fn matches(&self, proto: u8, remote: Ipv4Addr, port: Option<u16>) -> bool {
        let (net, len) = self.cidr;
        if !ipnet::Ipv4Net::new(net, len.min(32)).is_ok_and(|n| n.contains(&remote)) {
            return false;
        }
        match self.protocol {
            Protocol::All => true,
            Protocol::Icmp => proto == PROTO_ICMP,
            Protocol::Tcp | Protocol::Udp => {
                let want = if self.protocol == Protocol::Tcp { PROTO_TCP } else { PROTO_UDP };
                proto == want && port.is_some_and(|p| (self.port_from..=self.port_to).contains(&p))
            }
        }
    }
}

/// The rules of a NIC: the union of its security groups'.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Firewall {
    /// What may come in.
    pub ingress: Vec<Rule>,
    /// What may go out.
    pub egress: Vec<Rule>,
}

/// A flow, as seen from the side that opened it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct FlowKey {
    proto: u8,
    from: (Ipv4Addr, u16),
    to: (Ipv4Addr, u16),
}

/// Flows idle longer than this are forgotten.
pub const FLOW_IDLE: Duration = Duration::from_secs(300);
/// At most this many flows per segment; the oldest go first.
pub const MAX_FLOWS: usize = 65_536;

/// The flows a segment allowed, so that their replies pass.
#[derive(Debug, Default)]
pub struct Conntrack {
    flows: HashMap<FlowKey, Instant>,
}

/// What a packet is to the firewall.
#[derive(Debug, Clone, Copy)]
pub struct Packet {
    proto: u8,
    src: (Ipv4Addr, u16),
    dst: (Ipv4Addr, u16),
}

impl Packet {
    /// The packet of an IPv4 frame (ports are 0 where there are none; for
    /// ICMP echo, the identifier keys the flow both ways).
    pub fn of(ip: &Ipv4, frame: &[u8]) -> Self {
        let (sp, dp) = match ip.proto {
            PROTO_TCP | PROTO_UDP => ip.ports(frame).unwrap_or((0, 0)),
            PROTO_ICMP => {
                let id = frame.get(ip.payload + 4..ip.payload + 6).map(|b| u16::from_be_bytes([b[0], b[1]])).unwrap_or(0);
                (id, id)
            }
            _ => (0, 0),
        };
        Self { proto: ip.proto, src: (ip.src, sp), dst: (ip.dst, dp) }
    }

    fn key(&self) -> FlowKey {
        FlowKey { proto: self.proto, from: self.src, to: self.dst }
    }

    fn reply_key(&self) -> FlowKey {
        FlowKey { proto: self.proto, from: self.dst, to: self.src }
    }

    fn port(&self) -> Option<u16> {
        matches!(self.proto, PROTO_TCP | PROTO_UDP).then_some(self.dst.1)
    }
}

impl Conntrack {
    /// Whether `p` from a NIC with `out` to one with `inn` may pass; an
    /// allowed new flow is remembered for its replies.
    pub fn allow(&mut self, p: &Packet, out: Option<&Firewall>, inn: Option<&Firewall>, now: Instant) -> bool {
        if out.is_none() && inn.is_none() {
            return true;
        }
        for k in [p.key(), p.reply_key()] {
            if let Some(seen) = self.flows.get_mut(&k)
                && now.duration_since(*seen) < FLOW_IDLE
            {
                *seen = now;
                return true;
            }
        }
        let egress = out.is_none_or(|f| f.egress.iter().any(|r| r.matches(p.proto, p.dst.0, p.port())));
        let ingress = inn.is_none_or(|f| f.ingress.iter().any(|r| r.matches(p.proto, p.src.0, p.port())));
        if egress && ingress {
            self.remember(p.key(), now);
        }
        egress && ingress
    }

    fn remember(&mut self, k: FlowKey, now: Instant) {
        if self.flows.len() >= MAX_FLOWS {
            self.flows.retain(|_, seen| now.duration_since(*seen) < FLOW_IDLE);
            if self.flows.len() >= MAX_FLOWS
                && let Some(oldest) = self.flows.iter().min_by_key(|(_, t)| **t).map(|(k, _)| *k)
            {
                self.flows.remove(&oldest);
            }
        }
        self.flows.insert(k, now);
    }

    /// Forgets every flow (rules changed: they are checked again).
    pub fn clear(&mut self) {
        self.flows.clear();
    }

    /// Flows remembered.
    pub fn len(&self) -> usize {
        self.flows.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{Mac, udp_frame};

    fn any(protocol: Protocol, ports: (u16, u16)) -> Rule {
        Rule { protocol, port_from: ports.0, port_to: ports.1, cidr: (Ipv4Addr::UNSPECIFIED, 0) }
    }

    fn packet(src: (u8, u16), dst: (u8, u16), proto: u8) -> Packet {
        Packet { proto, src: (Ipv4Addr::new(10, 0, 0, src.0), src.1), dst: (Ipv4Addr::new(10, 0, 0, dst.0), dst.1) }
    }

    #[test]
    fn ingress_rules_decide_and_replies_pass_statefully() {
        let web = Firewall { ingress: vec![any(Protocol::Tcp, (80, 80))], egress: vec![] };
        let mut ct = Conntrack::default();
        let now = Instant::now();
        assert!(ct.allow(&packet((5, 40000), (6, 80), PROTO_TCP), None, Some(&web), now), "port 80 is open");
        assert!(!ct.allow(&packet((5, 40000), (6, 22), PROTO_TCP), None, Some(&web), now), "22 is not");
        assert!(
            ct.allow(&packet((6, 80), (5, 40000), PROTO_TCP), Some(&web), None, now),
            "the reply passes although web has no egress rule"
        );
        assert!(!ct.allow(&packet((6, 80), (5, 40000), PROTO_TCP), Some(&web), None, now + FLOW_IDLE * 2), "an idle flow is forgotten");
        assert!(!ct.allow(&packet((6, 5000), (5, 53), PROTO_UDP), Some(&web), None, now), "web may not open flows");
        assert!(ct.allow(&packet((6, 5000), (5, 53), PROTO_UDP), None, None, now), "no firewall: everything");
    }

    #[test]
    fn rules_match_protocol_ports_and_cidr() {
        let r = Rule { protocol: Protocol::Udp, port_from: 1000, port_to: 2000, cidr: (Ipv4Addr::new(10, 0, 1, 0), 24) };
        assert!(r.matches(PROTO_UDP, Ipv4Addr::new(10, 0, 1, 9), Some(1500)));
        assert!(!r.matches(PROTO_UDP, Ipv4Addr::new(10, 0, 2, 9), Some(1500)), "outside the CIDR");
        assert!(!r.matches(PROTO_UDP, Ipv4Addr::new(10, 0, 1, 9), Some(2001)), "outside the ports");
        assert!(!r.matches(PROTO_TCP, Ipv4Addr::new(10, 0, 1, 9), Some(1500)), "another protocol");
        assert!(any(Protocol::Icmp, (0, 0)).matches(PROTO_ICMP, Ipv4Addr::new(1, 2, 3, 4), None));
        assert!(any(Protocol::All, (0, 0)).matches(PROTO_TCP, Ipv4Addr::new(1, 2, 3, 4), Some(9)));
    }

    #[test]
    fn packets_are_read_from_frames() {
        let (a, b) = (Mac::local(b"a"), Mac::local(b"b"));
        let f = udp_frame((a, Ipv4Addr::new(10, 0, 0, 5), 5000), (b, Ipv4Addr::new(10, 0, 0, 6), 53), b"q");
        let p = Packet::of(&Ipv4::parse(&f).unwrap(), &f);
        assert_eq!((p.proto, p.src.1, p.dst.1, p.port()), (PROTO_UDP, 5000, 53, Some(53)));
    }

    #[test]
    fn the_table_is_bounded() {
        let mut ct = Conntrack::default();
        let open = Firewall { ingress: vec![any(Protocol::All, (0, 0))], egress: vec![] };
        let now = Instant::now();
        for i in 0..(MAX_FLOWS + 10) {
            let p = packet((5, (i % 60000) as u16), (6, (i / 60000) as u16 + 1), PROTO_UDP);
            ct.allow(&p, None, Some(&open), now + Duration::from_micros(i as u64));
        }
        assert!(ct.len() <= MAX_FLOWS);
    }
}
