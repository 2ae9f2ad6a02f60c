//! Routing between the subnets of one virtual network. A [`Router`] joins
//! the segments of one network: each segment's gateway then routes to its
//! siblings (and its DHCP offers a route to each), an IPv4 frame sent to
//! the gateway for a sibling leaves its segment (after the sender's egress
//! rules) and enters the sibling's (after the receiver's ingress rules),
//! readdressed from that gateway with its TTL one less. Segments of other
//! networks are not joined, so nothing is routed to them; nor to uplinks'
//! hosts: only to guest NICs the API placed. A network with a NAT gateway
//! ([`Router::start_egress`]) also routes everything else out through it:
//! its gateways offer the two halves of the address space as routes
//! (more specific than any default route a guest has elsewhere), and what
//! is sent to them goes to the NAT ([`crate::nat`]).
//!
//! The router holds its segments weakly and never holds a segment's lock
//! while taking another's: a frame is handed over after the sending
//! segment has let go of its own.

use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use crate::fabric::SubnetConfig;
use crate::frame::Ipv4;
use crate::hub::{Route, Shared, Switch, lock};
use crate::nat::{Answer, Dialer, Nat};

/// One segment of the network.
struct Member {
    subnet: SubnetConfig,
    switch: Weak<Mutex<Switch>>,
}

/// The router of one virtual network.
#[derive(Default)]
pub struct Router {
    members: Mutex<Vec<Member>>,
    egress: Mutex<Option<Nat>>,
}

/// The routes a network with a NAT gateway offers: everything, in two
/// halves, so they win over a default route on another NIC.
const OUTSIDE: [(Ipv4Addr, u8); 2] = [(Ipv4Addr::UNSPECIFIED, 1), (Ipv4Addr::new(128, 0, 0, 0), 1)];

impl Router {
    /// A router with no segments yet.
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    fn members(&self) -> std::sync::MutexGuard<'_, Vec<Member>> {
        self.members.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn egress(&self) -> std::sync::MutexGuard<'_, Option<Nat>> {
        self.egress.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Routes what the network's guests send outside it through a NAT
    /// (replacing one running): flows opened by `dialer`, never to
    /// `inside` (the network's own range). Guests learn the routes at
    /// their next DHCP lease or renewal.
    pub fn start_egress(self: &Arc<Self>, inside: (Ipv4Addr, u8), dialer: Arc<dyn Dialer>) {
        let answers: Weak<dyn Answer> = Arc::downgrade(self) as Weak<Self>;
        *self.egress() = Some(Nat::start(inside, dialer, answers));
        Self::spread_routes(&self.members(), true);
    }

    /// Stops the NAT: nothing leaves the network any more.
    pub fn stop_egress(&self) {
        if self.egress().take().is_some() {
            Self::spread_routes(&self.members(), false);
        }
    }

    /// Whether the network routes outside through a NAT.
    pub fn has_egress(&self) -> bool {
        self.egress().is_some()
    }

    /// Drops `switch` (and segments gone) from `members`.
    fn without(members: &mut Vec<Member>, switch: &Shared) {
        members.retain(|m| m.switch.strong_count() > 0 && !std::ptr::eq(m.switch.as_ptr(), Arc::as_ptr(switch)));
    }

    /// Joins segment `switch` (of `subnet`); joining again changes nothing.
    pub(crate) fn join(self: &Arc<Self>, subnet: SubnetConfig, switch: &Shared) {
        let mut members = self.members();
        Self::without(&mut members, switch);
        members.push(Member { subnet, switch: Arc::downgrade(switch) });
        lock(switch).router = Some(self.clone());
        Self::spread_routes(&members, self.has_egress());
    }

    /// Takes segment `switch` out.
    pub(crate) fn leave(&self, switch: &Shared) {
        let mut members = self.members();
        Self::without(&mut members, switch);
        let mut sw = lock(switch);
        sw.router = None;
        sw.fabric.set_routes(Vec::new());
        drop(sw);
        Self::spread_routes(&members, self.has_egress());
    }

    /// Tells each member the subnets of the others, and the outside
    /// first when the network has a NAT.
    fn spread_routes(members: &[Member], egress: bool) {
        for m in members {
            let Some(sw) = m.switch.upgrade() else { continue };
            let outside = OUTSIDE.iter().copied().filter(|_| egress);
            let siblings = members.iter().filter(|o| !std::ptr::eq(*o, m)).map(|o| (o.subnet.network, o.subnet.prefix));
            lock(&sw).fabric.set_routes(outside.chain(siblings).collect());
        }
    }

    /// Hands `frame` (routed out of a member) to the member whose subnet
    /// holds its destination, else to the NAT if there is one.
    pub(crate) fn route(&self, mut frame: Vec<u8>) {
        let Some(dst) = Ipv4::parse(&frame).map(|ip| ip.dst) else { return };
        match self.member_at(dst) {
            Some(sw) => lock(&sw).route_in(&mut frame),
            None => {
                if let Some(nat) = self.egress().as_ref() {
                    nat.take(frame);
                }
            }
        }
    }

    /// The segment of the member whose subnet holds `ip`.
    fn member_at(&self, ip: Ipv4Addr) -> Option<Shared> {
        self.members().iter().find(|m| m.subnet.contains(ip)).and_then(|m| m.switch.upgrade())
    }

    /// Delivers an IP packet from the NAT to the guest it is for, through
    /// that guest's ingress rules.
    pub(crate) fn answer(&self, packet: &[u8]) {
        let Some(dst) = packet.get(16..20).map(|b| Ipv4Addr::new(b[0], b[1], b[2], b[3])) else { return };
        if let Some(sw) = self.member_at(dst) {
            lock(&sw).take_from_gateway(packet);
        }
    }

    /// The subnets joined, for tests and diagnostics.
    pub fn subnets(&self) -> Vec<(Ipv4Addr, u8)> {
        self.members().iter().filter(|m| m.switch.strong_count() > 0).map(|m| (m.subnet.network, m.subnet.prefix)).collect()
    }
}

impl Route for Router {
    fn route(&self, frame: Vec<u8>) {
        Router::route(self, frame);
    }

    fn leave(&self, switch: &Shared) {
        Router::leave(self, switch);
    }
}

impl Answer for Router {
    fn answer(&self, packet: &[u8]) {
        Router::answer(self, packet);
    }
}
