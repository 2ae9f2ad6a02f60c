//! The event streams open at once (`GET /api/events/v1/events?watch=true`
//! and gRPC `Events.Watch` alike), under limits of their own: a tenant may
//! hold [`WatchLimits::per_tenant`], one token [`WatchLimits::per_token`]
//! (429 RESOURCE_EXHAUSTED past either, naming the flag), and the server
//! [`WatchLimits::total`]. When the server holds all it may, a new stream
//! takes the place of the oldest stream of the tenant holding the most, so
//! no tenant can keep the others from watching. Streams are not counted
//! among the connections that serve requests (`crate::serve::conns`), so
//! however many are open, `/healthz` and every tenant's requests get in.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use crate::error::ApiError;
use crate::serve::conns::{ConnMark, Watching};

/// How many event streams may be open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchLimits {
    /// Streams one tenant may hold (`--watches-per-tenant`).
    pub per_tenant: usize,
    /// Streams one token may hold (`--watches-per-token`).
    pub per_token: usize,
    /// Streams the server holds in all (`--max-watches`).
    pub total: usize,
}

impl Default for WatchLimits {
    fn default() -> Self {
        Self { per_tenant: 128, per_token: 64, total: 1024 }
    }
}

/// The open streams.
#[derive(Debug)]
pub struct Watches {
    limits: WatchLimits,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    next: u64,
    /// Every open stream: its tenant, token and how to end it.
    open: HashMap<u64, Open>,
    /// Each tenant's streams, oldest first (ids grow with time).
    by_tenant: HashMap<String, BTreeMap<u64, ()>>,
    by_token: HashMap<[u8; 16], usize>,
}

#[derive(Debug)]
struct Open {
    tenant: String,
    token: [u8; 16],
    end: Arc<Notify>,
}

/// One open stream's place: dropping it gives the place back.
#[derive(Debug)]
pub struct WatchTicket {
    watches: Arc<Watches>,
    id: u64,
    /// Notified when the stream must end to make room.
    pub end: Arc<Notify>,
}

impl Drop for WatchTicket {
    fn drop(&mut self) {
        self.watches.lock().remove(self.id);
    }
}

impl Inner {
    fn remove(&mut self, id: u64) -> Option<Open> {
        let o = self.open.remove(&id)?;
        if let Some(ids) = self.by_tenant.get_mut(&o.tenant) {
            ids.remove(&id);
            if ids.is_empty() {
                self.by_tenant.remove(&o.tenant);
            }
        }
        if let Some(n) = self.by_token.get_mut(&o.token) {
            *n -= 1;
            if *n == 0 {
                self.by_token.remove(&o.token);
            }
        }
        Some(o)
    }

    /// Ends the oldest stream of the tenant holding the most.
    fn evict(&mut self) {
        let most = self.by_tenant.iter().max_by_key(|(_, ids)| ids.len()).and_then(|(_, ids)| ids.keys().next().copied());
        if let Some(o) = most.and_then(|id| self.remove(id)) {
            tracing::info!(tenant = %o.tenant, "the server holds --max-watches event streams: the oldest of the tenant holding the most ends");
            o.end.notify_one();
        }
    }
}

impl Watches {
    /// No stream open yet, within `limits`.
    pub fn new(limits: WatchLimits) -> Arc<Self> {
        let limits = WatchLimits { per_tenant: limits.per_tenant.max(1), per_token: limits.per_token.max(1), total: limits.total.max(1) };
        Arc::new(Self { limits, inner: Mutex::default() })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Streams open now.
    pub fn open(&self) -> usize {
        self.lock().open.len()
    }

    /// A place for a new stream of `tenant` with the token whose
    /// [`token_key`] is `token`, or 429 naming the limit it is past.
    pub fn admit(self: &Arc<Self>, tenant: &str, token: [u8; 16]) -> Result<WatchTicket, ApiError> {
        let mut inner = self.lock();
        let l = self.limits;
        let of_tenant = inner.by_tenant.get(tenant).map_or(0, BTreeMap::len);
        if of_tenant >= l.per_tenant {
            return Err(ApiError::exhausted(
                "watch",
                format!(
                    "tenant {tenant:?} has {of_tenant} event streams open, the most it may (--watches-per-tenant {}): close one first",
                    l.per_tenant
                ),
            ));
        }
        let of_token = inner.by_token.get(&token).copied().unwrap_or(0);
        if of_token >= l.per_token {
            return Err(ApiError::exhausted(
                "watch",
                format!(
                    "this token has {of_token} event streams open, the most one token may (--watches-per-token {}): close one first",
                    l.per_token
                ),
            ));
        }
        if inner.open.len() >= l.total {
            inner.evict();
        }
        let id = inner.next;
        inner.next += 1;
        let end = Arc::new(Notify::new());
        inner.open.insert(id, Open { tenant: tenant.to_owned(), token, end: end.clone() });
        inner.by_tenant.entry(tenant.to_owned()).or_default().insert(id, ());
        *inner.by_token.entry(token).or_default() += 1;
        Ok(WatchTicket { watches: self.clone(), id, end })
    }
}

/// An open stream's places: among the streams, and its connection's off
/// the connection caps; both given back when it is dropped.
#[derive(Debug)]
pub struct Slot {
    /// Its place among the streams.
    pub ticket: WatchTicket,
    _conn: Option<Watching>,
}

impl Slot {
    /// Resolves when the stream must end to make room for another.
    pub async fn ended(&self) {
        self.ticket.end.notified().await;
    }
}

/// The places of a new stream of `tenant`, sent with `authorization`, on
/// connection `conn` (absent in process): 429 past a limit.
pub fn start(watches: &Arc<Watches>, tenant: &str, authorization: Option<&[u8]>, conn: Option<&ConnMark>) -> Result<Slot, ApiError> {
    let ticket = watches.admit(tenant, token_key(authorization))?;
    Ok(Slot { ticket, _conn: conn.map(ConnMark::watching) })
}

/// A short digest of a bearer token (what the per-token count is kept by;
/// the token itself is not kept).
pub fn token_key(authorization: Option<&[u8]>) -> [u8; 16] {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(authorization.unwrap_or_default());
    let mut key = [0u8; 16];
    key.copy_from_slice(&digest[..16]);
    key
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;

    use super::*;

    fn ended(t: &WatchTicket) -> bool {
        t.end.notified().now_or_never().is_some()
    }

    #[test]
    fn tenants_and_tokens_have_their_share_and_a_full_server_ends_the_biggest_holder_s_oldest() {
        let w = Watches::new(WatchLimits { per_tenant: 3, per_token: 2, total: 4 });
        let (t1, t2, t3) = (token_key(Some(b"1")), token_key(Some(b"2")), token_key(Some(b"3")));
        let a1 = w.admit("a", t1).unwrap();
        let _a2 = w.admit("a", t1).unwrap();
        let e = w.admit("a", t1).unwrap_err();
        assert!(e.message.contains("--watches-per-token 2"), "{}", e.message);
        let _a3 = w.admit("a", t2).unwrap();
        let e = w.admit("a", t2).unwrap_err();
        assert!(e.message.contains("--watches-per-tenant 3"), "{}", e.message);
        let b1 = w.admit("b", t3).unwrap();
        assert_eq!(w.open(), 4);
        // Full: b's new stream ends a's oldest (a holds the most).
        let _b2 = w.admit("b", t3).unwrap();
        assert!(ended(&a1), "a's oldest was told to end");
        assert!(!ended(&b1));
        assert_eq!(w.open(), 4);
        drop(a1);
        assert_eq!(w.open(), 4, "an ended stream's own drop changes nothing more");
        // a's place went back: it may open one again.
        assert!(w.admit("a", t2).is_ok());
    }
}
