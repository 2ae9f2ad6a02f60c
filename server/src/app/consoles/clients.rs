//! OSAC's `client_id` on console sessions: "when a new connection arrives
//! with a client_id matching an existing session from the same user, the
//! server evicts the stale session and admits the new one". A client is a
//! tenant's subject and its client id; the connection that holds it is
//! recorded in the store, so a newer connection on any replica takes it.
//! An older connection on the same replica is closed at once; one on
//! another replica when its replica next looks ([`SWEEP_EVERY`]). An
//! empty client id evicts nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::error::ApiError;
use crate::store::Store;

/// How often a replica looks for its connections a newer one displaced elsewhere.
pub const SWEEP_EVERY: Duration = Duration::from_secs(2);

/// How long a record of a client outlives its last connection when its
/// replica could not remove it (it died): a newer connection replaces it
/// anyway; a missing record displaces no one.
const FORGET_AFTER: chrono::Duration = chrono::Duration::days(1);

/// The store's key of a client: `tenant`'s `subject` with `client_id`.
pub(crate) fn key(tenant: &str, subject: &str, client_id: &str) -> String {
    serde_json::json!([tenant, subject, client_id]).to_string()
}

/// The connections of this replica that hold a client.
#[derive(Default)]
pub struct ConsoleClients(Mutex<HashMap<String, Held>>);

struct Held {
    session: String,
    evict: watch::Sender<bool>,
}

/// A connection's hold on its client, released when dropped.
pub struct Hold {
    client: String,
    session: String,
    evicted: watch::Receiver<bool>,
    clients: Arc<ConsoleClients>,
    store: Store,
}

impl Hold {
    /// Resolves once a newer connection of the same client took its place.
    pub async fn evicted(&mut self) {
        if self.evicted.wait_for(|e| *e).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        let mut held = self.clients.0.lock().unwrap_or_else(|p| p.into_inner());
        if held.get(&self.client).is_some_and(|h| h.session == self.session) {
            held.remove(&self.client);
        }
        drop(held);
        // A server shutting down drops its connections with no runtime left to release them in.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let (store, client, session) = (self.store.clone(), self.client.clone(), std::mem::take(&mut self.session));
        runtime.spawn(async move {
            if let Err(e) = store.release_console_client(&client, &session).await {
                warn!(error = %e, "a console client's record was not released (it is forgotten in a day)");
            }
        });
    }
}

impl ConsoleClients {
    /// A new connection of `client` (None: no client id, no hold): it takes
    /// the client from any older connection, here at once.
    pub(crate) async fn hold(self: &Arc<Self>, store: &Store, client: Option<String>) -> Result<Option<Hold>, ApiError> {
        let Some(client) = client else { return Ok(None) };
        let session = uuid::Uuid::new_v4().to_string();
        store.claim_console_client(&client, &session, Utc::now(), FORGET_AFTER).await?;
        let (evict, evicted) = watch::channel(false);
        let older = self.0.lock().unwrap_or_else(|p| p.into_inner()).insert(client.clone(), Held { session: session.clone(), evict });
        if let Some(older) = older {
            info!(session = %older.session, "console connection evicted by a newer one of its client");
            older.evict.send_replace(true);
        }
        Ok(Some(Hold { client, session, evicted, clients: self.clone(), store: store.clone() }))
    }

    /// Closes the connections of this replica whose client a newer
    /// connection holds now (on any replica).
    async fn sweep(&self, store: &Store) -> Result<(), ApiError> {
        let held: Vec<(String, String)> = {
            let map = self.0.lock().unwrap_or_else(|p| p.into_inner());
            map.iter().map(|(c, h)| (c.clone(), h.session.clone())).collect()
        };
        if held.is_empty() {
            return Ok(());
        }
        let displaced = store.displaced_console_sessions(&held).await?;
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        for (client, session) in displaced {
            if map.get(&client).is_some_and(|h| h.session == session)
                && let Some(older) = map.remove(&client)
            {
                info!(session = %older.session, "console connection evicted by a newer one of its client on another replica");
                older.evict.send_replace(true);
            }
        }
        Ok(())
    }

    /// Sweeps every [`SWEEP_EVERY`] for as long as the server runs.
    pub fn start_sweeping(self: &Arc<Self>, store: Store) {
        let clients = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(SWEEP_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if let Err(e) = clients.sweep(&store).await {
                    warn!(error = ?e, "console clients not swept");
                }
            }
        });
    }
}

/// Resolves once `hold` is evicted; never without one.
pub(crate) async fn evicted(hold: &mut Option<Hold>) {
    match hold {
        Some(h) => h.evicted().await,
        None => std::future::pending().await,
    }
}

/// Why an evicted connection closes.
pub(crate) const EVICTED: &str = "a newer connection of the same client (client_id) took this console session";
