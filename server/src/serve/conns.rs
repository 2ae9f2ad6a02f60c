//! The connections the server holds, so that no client can hold it: each
//! client address may have a bounded number open at once, and when the
//! server (or the client's share) is full a new connection takes the place
//! of the oldest one (of the server, or of that client) that never got an
//! answer (a silent connection, or one still sending its first request's
//! headers or body) instead of being turned away. A client
//! that was answered once keeps its connection until its own idle limits
//! end it; health checks and authenticated clients are answered at once,
//! so there is always room for them. A connection carrying an event stream
//! ([`ConnMark::watching`]) is counted among the streams
//! (`crate::watches`), not here, while the stream lasts.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// The open connections and their limits.
#[derive(Debug)]
pub struct Conns {
    inner: Mutex<Inner>,
    max: usize,
    per_client: usize,
}

#[derive(Debug, Default)]
struct Inner {
    next: u64,
    open: HashMap<u64, Entry>,
    /// Connections serving requests (not carrying an event stream), by client.
    by_client: HashMap<IpAddr, usize>,
    /// Connections carrying an event stream (not counted against the caps).
    watching: usize,
}

#[derive(Debug)]
struct Entry {
    client: IpAddr,
    answered: Arc<AtomicBool>,
    evict: Arc<Notify>,
    /// Event streams open on it.
    streams: usize,
}

/// What became of a new connection.
#[derive(Debug)]
pub enum Admission {
    /// It is served; dropping the ticket gives its place back.
    Admitted(Ticket),
    /// Its client address has as many open as it may.
    ClientFull,
    /// The server is full of connections that were all answered.
    ServerFull,
}

/// A connection's place among the open ones.
#[derive(Debug)]
pub struct Ticket {
    conns: Arc<Conns>,
    id: u64,
    /// Set once the connection got its first answer.
    pub answered: Arc<AtomicBool>,
    /// Notified when the connection must make room for a new one.
    pub evict: Arc<Notify>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.conns.lock().remove(self.id);
    }
}

impl Ticket {
    /// What a request on this connection is given, to say it became an event stream.
    pub fn mark(&self) -> ConnMark {
        ConnMark { conns: self.conns.clone(), id: self.id }
    }
}

/// A request's connection, as its handler sees it (a request extension).
#[derive(Debug, Clone)]
pub struct ConnMark {
    conns: Arc<Conns>,
    id: u64,
}

impl ConnMark {
    /// The connection carries an event stream until the guard is dropped:
    /// meanwhile it is not counted against the connection caps.
    pub fn watching(&self) -> Watching {
        let mut inner = self.conns.lock();
        let Inner { open, by_client, watching, .. } = &mut *inner;
        if let Some(e) = open.get_mut(&self.id) {
            e.streams += 1;
            if e.streams == 1 {
                *watching += 1;
                Inner::uncount(by_client, e.client);
            }
        }
        Watching(self.clone())
    }
}

/// An event stream on a connection; dropped when it ends.
#[derive(Debug)]
pub struct Watching(ConnMark);

impl Drop for Watching {
    fn drop(&mut self) {
        let mut inner = self.0.conns.lock();
        let Inner { open, by_client, watching, .. } = &mut *inner;
        if let Some(e) = open.get_mut(&self.0.id) {
            e.streams = e.streams.saturating_sub(1);
            if e.streams == 0 {
                *watching -= 1;
                *by_client.entry(e.client).or_default() += 1;
            }
        }
    }
}

impl Inner {
    /// Takes connection `id` off the books; false if it was not on them.
    fn remove(&mut self, id: u64) -> bool {
        let Some(e) = self.open.remove(&id) else { return false };
        if e.streams > 0 {
            self.watching -= 1;
        } else {
            Self::uncount(&mut self.by_client, e.client);
        }
        true
    }

    /// One connection of `client` fewer among those serving requests.
    fn uncount(by_client: &mut HashMap<IpAddr, usize>, client: IpAddr) {
        if let Some(n) = by_client.get_mut(&client) {
            *n -= 1;
            if *n == 0 {
                by_client.remove(&client);
            }
        }
    }

    /// Connections serving requests (those carrying event streams aside).
    fn serving(&self) -> usize {
        self.open.len() - self.watching
    }

    /// The oldest connection (of `client`, or of anyone) that never got an answer.
    fn unanswered(&self, client: Option<IpAddr>) -> Option<u64> {
        let candidates = self.open.iter().filter(|(_, e)| client.is_none_or(|c| c == e.client) && !e.answered.load(Ordering::Relaxed));
        // Ids grow with time: the smallest is the oldest.
        candidates.map(|(id, _)| *id).min()
    }

    /// Tells connection `id` to go, and takes it off the books.
    fn evict(&mut self, id: u64) {
        if let Some(e) = self.open.get(&id) {
            e.evict.notify_one();
        }
        self.remove(id);
    }
}

impl Conns {
    /// At most `max` connections in all and `per_client` per client address.
    pub fn new(max: usize, per_client: usize) -> Arc<Self> {
        Arc::new(Self { inner: Mutex::default(), max: max.max(1), per_client: per_client.clamp(1, max.max(1)) })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Connections open now (serving requests, and carrying event streams).
    pub fn open(&self) -> usize {
        self.lock().open.len()
    }

    /// Connections serving requests now (what the caps count).
    pub fn serving(&self) -> usize {
        self.lock().serving()
    }

    /// Takes a new connection from `client`, making room if the server is
    /// full and one of the open connections was never answered.
    pub fn admit(self: &Arc<Self>, client: IpAddr) -> Admission {
        let mut inner = self.lock();
        if inner.by_client.get(&client).copied().unwrap_or(0) >= self.per_client {
            // A client at its share makes room among its own connections only.
            let Some(victim) = inner.unanswered(Some(client)) else { return Admission::ClientFull };
            inner.evict(victim);
        }
        if inner.serving() >= self.max {
            let Some(victim) = inner.unanswered(None) else { return Admission::ServerFull };
            inner.evict(victim);
        }
        let id = inner.next;
        inner.next += 1;
        let (answered, evict) = (Arc::new(AtomicBool::new(false)), Arc::new(Notify::new()));
        inner.open.insert(id, Entry { client, answered: answered.clone(), evict: evict.clone(), streams: 0 });
        *inner.by_client.entry(client).or_default() += 1;
        Admission::Admitted(Ticket { conns: self.clone(), id, answered, evict })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    fn admitted(a: Admission) -> Ticket {
        match a {
            Admission::Admitted(t) => t,
            other => panic!("refused: {other:?}"),
        }
    }

    #[test]
    fn a_client_has_its_share_and_a_full_server_lets_the_oldest_silent_one_go() {
        let c = Conns::new(4, 2);
        let a0 = admitted(c.admit(ip(2)));
        let a1 = admitted(c.admit(ip(2)));
        // At its share, a client's new connection replaces its own oldest silent one.
        let a2 = admitted(c.admit(ip(2)));
        assert!(futures::FutureExt::now_or_never(a0.evict.notified()).is_some(), "a0 was asked to go");
        assert_eq!(c.open(), 2);
        for t in [&a1, &a2] {
            t.answered.store(true, Ordering::Relaxed);
        }
        assert!(matches!(c.admit(ip(2)), Admission::ClientFull));
        for t in [&a1, &a2] {
            t.answered.store(false, Ordering::Relaxed);
        }
        let b1 = admitted(c.admit(ip(3)));
        b1.answered.store(true, Ordering::Relaxed);
        let b2 = admitted(c.admit(ip(3)));
        assert_eq!(c.open(), 4);
        // Full: the oldest unanswered (a1) makes room, and is told so.
        let d = admitted(c.admit(ip(4)));
        assert_eq!(c.open(), 4);
        assert!(futures::FutureExt::now_or_never(a1.evict.notified()).is_some(), "a1 was asked to go");
        assert!(futures::FutureExt::now_or_never(b1.evict.notified()).is_none(), "an answered connection stays");
        drop(a1);
        assert_eq!(c.open(), 4, "an evicted connection's own drop changes nothing more");
        // All answered now: nothing can make room.
        for t in [&a2, &b2, &d] {
            t.answered.store(true, Ordering::Relaxed);
        }
        assert!(matches!(c.admit(ip(6)), Admission::ServerFull));
        drop(b1);
        assert_eq!(c.open(), 3);
        assert!(matches!(c.admit(ip(6)), Admission::Admitted(_)));
    }

    #[test]
    fn connections_carrying_event_streams_leave_room_for_requests() {
        let c = Conns::new(2, 1);
        let a = admitted(c.admit(ip(2)));
        a.answered.store(true, Ordering::Relaxed);
        let stream = a.mark().watching();
        // The address and the server have room again while it streams.
        let b = admitted(c.admit(ip(2)));
        b.answered.store(true, Ordering::Relaxed);
        let d = admitted(c.admit(ip(3)));
        d.answered.store(true, Ordering::Relaxed);
        assert_eq!((c.open(), c.serving()), (3, 2));
        assert!(matches!(c.admit(ip(4)), Admission::ServerFull));
        // The stream ends: its connection is counted again (over the cap until one closes).
        drop(stream);
        assert_eq!(c.serving(), 3);
        drop(b);
        drop(d);
        assert_eq!(c.serving(), 1);
        // A connection closed while it streams takes its stream off the books.
        let again = a.mark().watching();
        drop(a);
        assert_eq!((c.open(), c.serving()), (0, 0));
        drop(again);
        assert_eq!((c.open(), c.serving()), (0, 0));
    }
}
