//! The forwarding core of one segment, pure and synchronous (so it is
//! tested and measured without I/O). Guest ports have the MAC and address
//! the API assigned them: a frame from a guest with another source MAC or
//! IPv4 address is dropped (no spoofing), and only ARP and IPv4 pass.
//! Uplink ports (a physical L2 network) carry any source, and their MACs
//! are learned. The gateway address of the subnet is the switch's own: it
//! answers ARP for it and serves DHCP (with a route to each sibling subnet
//! of the virtual network); an IPv4 frame to the gateway for a sibling
//! subnet leaves as [`Verdict::Route`] and enters the sibling's fabric by
//! [`Fabric::route_in`] ([`crate::router`]); anything else sent to the
//! gateway goes nowhere.
//! Guest NICs with security groups are firewalled statefully ([`crate::firewall`]).

use std::collections::HashMap;
use std::net::Ipv4Addr;

use crate::dhcp;
use crate::firewall::{Conntrack, Firewall, Packet};
use crate::frame::{Arp, ETHERTYPE_ARP, ETHERTYPE_IPV4, Ethernet, Ipv4, Mac};

pub use crate::config::{PortConfig, PortId, PortKind, SubnetConfig};

/// Why a frame was not delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Drop {
    /// Too short to be Ethernet.
    Runt,
    /// From an unknown port.
    NoPort,
    /// Source MAC or address not the port's.
    Spoofed,
    /// Neither IPv4 nor ARP.
    Protocol,
    /// To a MAC no port has.
    Unknown,
    /// Back to the port it came from, or to the gateway for no subnet it routes to.
    Nowhere,
    /// Routed, but its TTL ran out.
    Expired,
    /// Refused by a security group.
    Firewall,
}

/// Where a frame goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// To this one port.
    Unicast(PortId),
    /// To every port but the sender.
    Flood,
    /// The switch answers the sender with this frame.
    Reply(Vec<u8>),
    /// To a sibling subnet, through the gateway: the router takes it.
    Route,
    /// To the gateway's own address: its TCP endpoint takes it ([`crate::gateway`]).
    Local,
    /// Nowhere.
    Drop(Drop),
}

/// Counters of one segment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Frames delivered to one port.
    pub unicast: u64,
    /// Frames flooded.
    pub flooded: u64,
    /// Frames the switch answered (ARP, DHCP).
    pub answered: u64,
    /// Frames routed out to a sibling subnet, and in from one.
    pub routed: u64,
    /// Frames dropped, by reason.
    pub dropped: HashMap<Drop, u64>,
}

/// One segment's ports and forwarding table.
#[derive(Debug)]
pub struct Fabric {
    subnet: SubnetConfig,
    ports: HashMap<PortId, PortKind>,
    /// Guests' MACs (fixed) and uplinks' learned ones.
    table: HashMap<Mac, PortId>,
    /// Guests' addresses, for frames routed in.
    by_ip: HashMap<Ipv4Addr, PortId>,
    /// The sibling subnets the gateway routes to (network, prefix).
    routes: Vec<(Ipv4Addr, u8)>,
    conntrack: Conntrack,
    stats: Stats,
}

impl Fabric {
    /// An empty segment for `subnet`.
    pub fn new(subnet: SubnetConfig) -> Self {
        Self {
            subnet,
            ports: HashMap::new(),
            table: HashMap::new(),
            by_ip: HashMap::new(),
            routes: Vec::new(),
            conntrack: Conntrack::default(),
            stats: Stats::default(),
        }
    }

    /// The subnet.
    pub fn subnet(&self) -> &SubnetConfig {
        &self.subnet
    }

    /// Adds (or replaces) port `id`.
    pub fn add_port(&mut self, id: PortId, kind: PortKind) {
        self.remove_port(id);
        if let PortKind::Guest(c) = &kind {
            self.table.insert(c.mac, id);
            self.by_ip.insert(c.ip, id);
        }
        self.ports.insert(id, kind);
    }

    /// Replaces the firewall of guest port `id` (its security groups
    /// changed): every flow is checked again from its next packet, so a
    /// removed rule cuts the flows it allowed. The same rules again change
    /// nothing.
    pub fn set_firewall(&mut self, id: PortId, firewall: Option<Firewall>) {
        if let Some(PortKind::Guest(c)) = self.ports.get_mut(&id)
            && c.firewall != firewall
        {
            c.firewall = firewall;
            self.conntrack.clear();
        }
    }

    /// Removes port `id` and what was learned on it.
    pub fn remove_port(&mut self, id: PortId) {
        self.ports.remove(&id);
        self.table.retain(|_, p| *p != id);
        self.by_ip.retain(|_, p| *p != id);
    }

    /// Sets the sibling subnets the gateway routes to (offered by DHCP
    /// from the next lease on).
    pub fn set_routes(&mut self, routes: Vec<(Ipv4Addr, u8)>) {
        self.routes = routes;
    }

    /// Whether the gateway routes to `ip`.
    fn routes_to(&self, ip: Ipv4Addr) -> bool {
        self.routes.iter().any(|(net, prefix)| crate::config::within(ip, *net, *prefix))
    }

    /// The ports, for flooding.
    pub fn port_ids(&self) -> impl Iterator<Item = PortId> + '_ {
        self.ports.keys().copied()
    }

    /// The counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    fn drop(&mut self, why: Drop) -> Verdict {
        *self.stats.dropped.entry(why).or_default() += 1;
        Verdict::Drop(why)
    }

    /// Decides where `frame`, received on port `from`, goes.
    pub fn receive(&mut self, from: PortId, frame: &[u8]) -> Verdict {
        let Some(eth) = Ethernet::parse(frame) else { return self.drop(Drop::Runt) };
        let guest = match self.ports.get(&from) {
            None => return self.drop(Drop::NoPort),
            Some(PortKind::Guest(c)) => Some(c.clone()),
            Some(PortKind::Uplink) => None,
        };
        match &guest {
            Some(c) => {
                if let Err(why) = self.admit(c, &eth, frame) {
                    return self.drop(why);
                }
                if let Some(reply) = self.answer(c, &eth, frame) {
                    self.stats.answered += 1;
                    return Verdict::Reply(reply);
                }
            }
            None if !eth.src.is_group() => {
                self.table.insert(eth.src, from);
            }
            None => {}
        }
        if eth.dst == self.subnet.gateway_mac && eth.ethertype == ETHERTYPE_IPV4 {
            return self.route_out(from, frame);
        }
        match self.deliver(from, eth.dst) {
            Verdict::Unicast(to) if eth.ethertype == ETHERTYPE_IPV4 && !self.firewalls_allow(from, to, frame) => self.drop(Drop::Firewall),
            v => v,
        }
    }

    /// An IPv4 frame from port `from` to the gateway: routed when it is for
    /// a sibling subnet and the sender's egress rules let it out.
    fn route_out(&mut self, from: PortId, frame: &[u8]) -> Verdict {
        let Some(ip) = Ipv4::parse(frame) else { return self.drop(Drop::Protocol) };
        let local = ip.dst == self.subnet.gateway;
        if !local && !self.routes_to(ip.dst) {
            return self.drop(Drop::Nowhere);
        }
        if !self.passes(&ip, frame, Some(from), None) {
            return self.drop(Drop::Firewall);
        }
        if local {
            return Verdict::Local;
        }
        self.stats.routed += 1;
        Verdict::Route
    }

    /// An IP packet from the gateway's own TCP endpoint: to the guest port
    /// with its destination address, as that port's ingress rules allow,
    /// framed from the gateway. The verdict and the frame.
    pub fn take_from_gateway(&mut self, packet: &[u8]) -> (Verdict, Vec<u8>) {
        let dst = packet.get(16..20).map(|b| Ipv4Addr::new(b[0], b[1], b[2], b[3]));
        let Some((to, mac)) = dst.and_then(|d| self.guest_at(d)) else {
            return (self.drop(Drop::Unknown), Vec::new());
        };
        let mut frame = crate::frame::ethernet(mac, self.subnet.gateway_mac, ETHERTYPE_IPV4);
        frame.extend_from_slice(packet);
        let Some(ip) = Ipv4::parse(&frame) else { return (self.drop(Drop::Protocol), Vec::new()) };
        if !self.passes(&ip, &frame, None, Some(to)) {
            return (self.drop(Drop::Firewall), Vec::new());
        }
        self.stats.unicast += 1;
        (Verdict::Unicast(to), frame)
    }

    /// A frame routed in from a sibling subnet (its sender's egress rules
    /// passed there): to the guest port with its destination address, as
    /// that port's ingress rules allow, readdressed from the gateway.
    pub fn route_in(&mut self, frame: &mut [u8]) -> Verdict {
        let Some(ip) = Ipv4::parse(frame) else { return self.drop(Drop::Protocol) };
        let Some((to, mac)) = self.guest_at(ip.dst) else { return self.drop(Drop::Unknown) };
        if !self.passes(&ip, frame, None, Some(to)) {
            return self.drop(Drop::Firewall);
        }
        if !crate::frame::next_hop(frame, mac, self.subnet.gateway_mac) {
            return self.drop(Drop::Expired);
        }
        self.stats.routed += 1;
        self.stats.unicast += 1;
        Verdict::Unicast(to)
    }

    /// The guest port with address `ip`, and its MAC.
    fn guest_at(&self, ip: Ipv4Addr) -> Option<(PortId, Mac)> {
        let p = *self.by_ip.get(&ip)?;
        match self.ports.get(&p) {
            Some(PortKind::Guest(c)) => Some((p, c.mac)),
            _ => None,
        }
    }

    /// Whether the egress rules of `from` and the ingress rules of `to`
    /// (either side may be the gateway: none) let `ip` through, statefully.
    fn passes(&mut self, ip: &Ipv4, frame: &[u8], from: Option<PortId>, to: Option<PortId>) -> bool {
        let rules = |p: Option<PortId>| p.and_then(|p| firewall_of(&self.ports, p));
        self.conntrack.allow(&Packet::of(ip, frame), rules(from), rules(to), std::time::Instant::now())
    }

    /// Whether the sender's egress and the receiver's ingress rules (or a
    /// flow they allowed) let this IPv4 frame through.
    fn firewalls_allow(&mut self, from: PortId, to: PortId, frame: &[u8]) -> bool {
        let (out, inn) = (firewall_of(&self.ports, from), firewall_of(&self.ports, to));
        if out.is_none() && inn.is_none() {
            return true;
        }
        let Some(ip) = Ipv4::parse(frame) else { return false };
        self.conntrack.allow(&Packet::of(&ip, frame), out, inn, std::time::Instant::now())
    }

    /// Checks a guest's frame: its own MAC, its own address (or none while
    /// it asks DHCP or probes with ARP), IPv4 or ARP only.
    fn admit(&self, c: &PortConfig, eth: &Ethernet, frame: &[u8]) -> Result<(), Drop> {
        if eth.src != c.mac {
            return Err(Drop::Spoofed);
        }
        match eth.ethertype {
            ETHERTYPE_IPV4 => {
                let ip = Ipv4::parse(frame).ok_or(Drop::Protocol)?;
                let dhcp = ip.src.is_unspecified() && dhcp::is_request(frame, &ip);
                if ip.src == c.ip || dhcp { Ok(()) } else { Err(Drop::Spoofed) }
            }
            ETHERTYPE_ARP => {
                let a = Arp::parse(frame).ok_or(Drop::Protocol)?;
                if a.sha == c.mac && (a.spa == c.ip || a.spa.is_unspecified()) { Ok(()) } else { Err(Drop::Spoofed) }
            }
            _ => Err(Drop::Protocol),
        }
    }

    /// The switch's own answer to a guest: ARP for the gateway, DHCP.
    fn answer(&self, c: &PortConfig, eth: &Ethernet, frame: &[u8]) -> Option<Vec<u8>> {
        match eth.ethertype {
            ETHERTYPE_ARP => {
                let a = Arp::parse(frame)?;
                (a.op == 1 && a.tpa == self.subnet.gateway).then(|| {
                    let reply = Arp { op: 2, sha: self.subnet.gateway_mac, spa: self.subnet.gateway, tha: a.sha, tpa: a.spa };
                    reply.to_frame(self.subnet.gateway_mac, a.sha)
                })
            }
            ETHERTYPE_IPV4 => {
                let ip = Ipv4::parse(frame)?;
                dhcp::is_request(frame, &ip).then(|| dhcp::answer(&self.subnet, &self.routes, c, frame, &ip)).flatten()
            }
            _ => None,
        }
    }

    fn deliver(&mut self, from: PortId, dst: Mac) -> Verdict {
        if dst.is_group() {
            self.stats.flooded += 1;
            return Verdict::Flood;
        }
        match self.table.get(&dst).copied() {
            Some(p) if p != from => {
                self.stats.unicast += 1;
                Verdict::Unicast(p)
            }
            Some(_) => self.drop(Drop::Nowhere),
            None if dst == self.subnet.gateway_mac => self.drop(Drop::Nowhere),
            // Unknown on the segment: an uplink may know it.
            None if self.ports.values().any(|k| *k == PortKind::Uplink) => {
                self.stats.flooded += 1;
                Verdict::Flood
            }
            None => self.drop(Drop::Unknown),
        }
    }
}

/// The firewall of guest port `id`, if it has one.
fn firewall_of(ports: &HashMap<PortId, PortKind>, id: PortId) -> Option<&Firewall> {
    match ports.get(&id) {
        Some(PortKind::Guest(c)) => c.firewall.as_ref(),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
