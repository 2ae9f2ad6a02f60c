//! Routing between the subnets of one virtual network. A [`Router`] joins
//! the segments of one network: each segment's gateway then routes to its
//! siblings (and its DHCP offers a route to each), an IPv4 frame sent to
//! the gateway for a sibling leaves its segment (after the sender's egress
//! rules) and enters the sibling's (after the receiver's ingress rules),
//! readdressed from that gateway with its TTL one less. Segments of other
//! networks are not joined, so nothing is routed to them; nor to uplinks'
//! hosts: only to guest NICs the API placed.
//!
//! The router holds its segments weakly and never holds a segment's lock
//! while taking another's: a frame is handed over after the sending
//! segment has let go of its own.

use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use crate::fabric::SubnetConfig;
use crate::frame::Ipv4;
// A circle with `segment` on purpose: see the note on its imports.
use crate::segment::{Shared, lock};

/// One segment of the network.
struct Member {
    subnet: SubnetConfig,
    switch: Weak<Mutex<crate::segment::Switch>>,
}

/// The router of one virtual network.
#[derive(Default)]
pub struct Router {
    members: Mutex<Vec<Member>>,
}

impl Router {
    /// A router with no segments yet.
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    fn members(&self) -> std::sync::MutexGuard<'_, Vec<Member>> {
        self.members.lock().unwrap_or_else(PoisonError::into_inner)
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
        Self::spread_routes(&members);
    }

    /// Takes segment `switch` out.
    pub(crate) fn leave(&self, switch: &Shared) {
        let mut members = self.members();
        Self::without(&mut members, switch);
        let mut sw = lock(switch);
        sw.router = None;
        sw.fabric.set_routes(Vec::new());
        drop(sw);
        Self::spread_routes(&members);
    }

    /// Tells each member the subnets of the others.
    fn spread_routes(members: &[Member]) {
        for m in members {
            let Some(sw) = m.switch.upgrade() else { continue };
            let routes = members.iter().filter(|o| !std::ptr::eq(*o, m)).map(|o| (o.subnet.network, o.subnet.prefix)).collect();
            lock(&sw).fabric.set_routes(routes);
        }
    }

    /// Hands `frame` (routed out of a member) to the member whose subnet
    /// holds its destination.
    pub(crate) fn route(&self, mut frame: Vec<u8>) {
        let Some(dst) = Ipv4::parse(&frame).map(|ip| ip.dst) else { return };
        let target = self.members().iter().find(|m| m.subnet.contains(dst)).and_then(|m| m.switch.upgrade());
        if let Some(sw) = target {
            lock(&sw).route_in(&mut frame);
        }
    }

    /// The subnets joined, for tests and diagnostics.
    pub fn subnets(&self) -> Vec<(Ipv4Addr, u8)> {
        self.members().iter().filter(|m| m.switch.strong_count() > 0).map(|m| (m.subnet.network, m.subnet.prefix)).collect()
    }
}
