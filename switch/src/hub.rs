//! A segment's switch: its [`Fabric`] and each port's queue, behind one
//! lock held for one frame's decision. The segment's gateway and its
//! network's router reach back into it; the router through [`Route`], so
//! that this module names neither.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::mpsc;
use tracing::debug;

use crate::fabric::{Fabric, PortId, PortKind, Verdict};

/// What a segment's switch asks of the router of its network.
pub(crate) trait Route: Send + Sync {
    /// Takes `frame`, routed out of a member segment.
    fn route(&self, frame: Vec<u8>);
    /// Takes segment `switch` out.
    fn leave(&self, switch: &Shared);
}

/// The fabric, every port's queue, and the network's router if the segment joined one.
pub(crate) struct Switch {
    pub(crate) fabric: Fabric,
    out: HashMap<PortId, mpsc::Sender<Vec<u8>>>,
    pub(crate) router: Option<Arc<dyn Route>>,
    /// The frames for the gateway's own TCP endpoint, once a forward needs it.
    pub(crate) gateway: Option<mpsc::Sender<Vec<u8>>>,
}

impl Switch {
    /// A switch of `fabric`, with no ports, router or gateway yet.
    pub(crate) fn new(fabric: Fabric) -> Self {
        Switch { fabric, out: HashMap::new(), router: None, gateway: None }
    }

    /// Adds port `id`, whose frames from the segment go to `out`.
    pub(crate) fn attach(&mut self, id: PortId, kind: PortKind, out: mpsc::Sender<Vec<u8>>) {
        self.fabric.add_port(id, kind);
        self.out.insert(id, out);
    }

    /// Removes port `id`.
    pub(crate) fn detach(&mut self, id: PortId) {
        self.fabric.remove_port(id);
        self.out.remove(&id);
    }

    /// Switches one frame that came in on `from` into the queues it goes
    /// to; a frame for a sibling subnet is returned with the router that
    /// takes it (handed over once this segment's lock is let go).
    #[must_use]
    pub(crate) fn forward(&mut self, from: PortId, frame: Vec<u8>) -> Option<(Arc<dyn Route>, Vec<u8>)> {
        match self.fabric.receive(from, &frame) {
            Verdict::Unicast(to) => send(&self.out, to, frame),
            Verdict::Route => return self.router.clone().map(|r| (r, frame)),
            Verdict::Local => {
                if let Some(g) = &self.gateway {
                    // Full: dropped; TCP sends it again.
                    let _ = g.try_send(frame);
                }
            }
            Verdict::Flood => {
                for (to, _) in self.out.iter().filter(|(p, _)| **p != from) {
                    send(&self.out, *to, frame.clone());
                }
            }
            Verdict::Reply(r) => send(&self.out, from, r),
            Verdict::Drop(why) => debug!(port = from, ?why, "frame dropped"),
        }
        None
    }

    /// Delivers an IP packet of the gateway's TCP endpoint; false if the
    /// fabric refused it.
    pub(crate) fn take_from_gateway(&mut self, packet: &[u8]) -> bool {
        match self.fabric.take_from_gateway(packet) {
            (Verdict::Unicast(to), frame) => {
                send(&self.out, to, frame);
                true
            }
            _ => false,
        }
    }

    /// Delivers a frame routed in from a sibling subnet.
    pub(crate) fn route_in(&mut self, frame: &mut Vec<u8>) {
        match self.fabric.route_in(frame) {
            Verdict::Unicast(to) => send(&self.out, to, std::mem::take(frame)),
            Verdict::Drop(why) => debug!(?why, "routed frame dropped"),
            _ => {}
        }
    }
}

/// Switches `frame` from port `from` of `switch`, then hands what is to be
/// routed to the router, with the segment's lock let go.
pub(crate) fn switch_frame(switch: &Shared, from: PortId, frame: Vec<u8>) {
    let routed = lock(switch).forward(from, frame);
    if let Some((router, frame)) = routed {
        router.route(frame);
    }
}

/// A segment's switch, shared by its ports' tasks, its gateway and its router.
pub(crate) type Shared = Arc<Mutex<Switch>>;

/// The switch, whether or not a holder panicked.
pub(crate) fn lock(s: &Shared) -> MutexGuard<'_, Switch> {
    s.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Queues `frame` towards port `to`.
fn send(out: &HashMap<PortId, mpsc::Sender<Vec<u8>>>, to: PortId, frame: Vec<u8>) {
    if let Some(tx) = out.get(&to) {
        // Full: dropped, as a congested switch would.
        let _ = tx.try_send(frame);
    }
}
