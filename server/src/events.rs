//! Fan-out of the event log to watchers. One task reads the events
//! committed after the last it saw (at once when this process commits some,
//! and every [`POLL`] for those other replicas commit) and broadcasts them
//! in order; a watcher catches up from the store, then follows the
//! broadcast, and goes back to the store for anything it missed (a gap in
//! the sequence, or a broadcast it lagged behind).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use tokio::sync::broadcast;
use tracing::warn;
use vmaas_model::query::Filter;

use crate::auth::Caller;
use crate::error::{ApiError, Code};

use crate::store::events::EventRow;
use crate::store::{Store, StoreError};

/// How often the log is read when this process committed nothing.
pub const POLL: Duration = Duration::from_millis(250);

/// Events read from the store at once.
const BATCH: i64 = 512;

/// An event as watchers are sent it: its JSON once, and parsed once for
/// their filters.
pub struct Published {
    /// The stored event.
    pub row: EventRow,
    /// OSAC's `Event` JSON.
    pub json: String,
    /// The same, parsed.
    pub value: serde_json::Value,
}

impl Published {
    /// Renders and parses `row` once.
    pub fn new(row: EventRow) -> Arc<Self> {
        let json = row.to_json();
        let value = serde_json::from_str(&json).unwrap_or_default();
        Arc::new(Self { row, json, value })
    }
}

/// Broadcasts committed events to this process's watchers.
pub struct EventHub {
    tx: broadcast::Sender<Arc<Published>>,
}

impl EventHub {
    /// Starts following `store`'s log from its current end.
    pub fn start(store: Store) -> Arc<Self> {
        let (tx, _) = broadcast::channel(4096);
        let hub = Arc::new(Self { tx });
        tokio::spawn(follow(store, hub.tx.clone()));
        hub
    }

    /// A watcher of the events after `after`, of every tenant.
    pub fn watch(&self, store: Store, after: i64) -> Watch {
        Watch { rx: self.tx.subscribe(), store, after, backlog: VecDeque::new() }
    }
}

async fn follow(store: Store, tx: broadcast::Sender<Arc<Published>>) {
    let mut signal = store.event_signal();
    let mut last = loop {
        match store.last_event().await {
            Ok(n) => break n,
            Err(e) => warn!(error = %e, "reading the event log"),
        }
        tokio::time::sleep(POLL).await;
    };
    loop {
        let _ = tokio::time::timeout(POLL, signal.changed()).await;
        loop {
            let batch = match store.events_after(last, BATCH).await {
                Ok(b) => b,
                Err(e) => {
                    warn!(error = %e, "reading the event log");
                    break;
                }
            };
            let full = batch.len() as i64 == BATCH;
            for e in batch {
                last = e.seq;
                // No receiver is fine: nobody watches.
                let _ = tx.send(Published::new(e));
            }
            if !full {
                break;
            }
        }
    }
}

/// One watcher's place in the log.
pub struct Watch {
    rx: broadcast::Receiver<Arc<Published>>,
    store: Store,
    after: i64,
    backlog: VecDeque<Arc<Published>>,
}

impl Watch {
    /// The next event after the last one returned, in order, none skipped.
    pub async fn next(&mut self) -> Result<Arc<Published>, StoreError> {
        loop {
            let e = match self.backlog.pop_front() {
                Some(e) => e,
                None => match self.rx.recv().await {
                    Ok(e) if e.row.seq > self.after + 1 => {
                        self.catch_up().await?;
                        continue;
                    }
                    Ok(e) => e,
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        self.catch_up().await?;
                        continue;
                    }
                    Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
                },
            };
            if e.row.seq > self.after {
                self.after = e.row.seq;
                return Ok(e);
            }
        }
    }

    /// Reads what follows `after` from the store into the backlog.
    async fn catch_up(&mut self) -> Result<(), StoreError> {
        let rows = self.store.events_after(self.after, BATCH).await?;
        self.backlog.extend(rows.into_iter().map(Published::new));
        Ok(())
    }

    /// Starts by reading the store (called once, before following).
    pub async fn start(&mut self) -> Result<(), StoreError> {
        self.catch_up().await
    }
}

/// Who receives which events: a caller sees its tenant's events and the
/// global kinds' (templates), an administrator all; the filter, if any,
/// is CEL over the event as sent.
pub struct Audience {
    /// The watcher.
    pub caller: Caller,
    /// Its filter.
    pub filter: Option<Filter>,
}

impl Audience {
    /// The audience of `caller`, with its `filter` (blank: none), or a 400 naming `filter`.
    pub fn new(caller: Caller, filter: Option<&str>) -> Result<Self, ApiError> {
        let filter = filter.filter(|f| !f.trim().is_empty()).map(Filter::parse).transpose();
        Ok(Self { caller, filter: filter.map_err(|e| ApiError::field("filter", e))? })
    }

    /// Whether the event `event` of an object of `tenant` is sent.
    pub fn sees(&self, tenant: &str, event: &serde_json::Value) -> bool {
        let mine = self.caller.is_admin() || tenant.is_empty() || tenant == self.caller.tenant;
        mine && self.filter.as_ref().is_none_or(|f| f.matches(event))
    }
}

/// Where a watch starts: after `after`, if the events after it are all
/// still kept (else 410 Gone), or, without it, after the last event.
pub async fn start_point(store: &Store, after: Option<i64>) -> Result<i64, ApiError> {
    let Some(after) = after else { return Ok(store.last_event().await?) };
    let first = store.first_event().await?;
    if first > 0 && after + 1 < first {
        let m = format!("the events after {after} were trimmed (the oldest kept is {first}): list the objects again, and watch from now");
        return Err(ApiError::new(StatusCode::GONE, Code::FailedPrecondition, m));
    }
    Ok(after)
}
