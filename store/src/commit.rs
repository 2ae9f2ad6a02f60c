//! Group commit of new objects on an exclusively owned SQLite database.
//!
//! A create is acknowledged only once its transaction is durable (WAL,
//! synchronous FULL: fsync at commit), and SQLite has one writer, so
//! creates one at a time cost one commit each. Instead, a create is
//! *staged* — queued, and counted by admission checks ([`Store::usage`](super::Store::usage),
//! [`Store::vms_referring`](super::Store::vms_referring)) — and one task commits every create queued meanwhile in one
//! transaction, then tells each its result. Should the batch fail, each of
//! its creates is tried again alone, so one create's error (a name taken, a
//! reference gone) is its own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot};

use super::objects::{NewObject, Row, insert_created};
use super::{Dialect, Mem, StoreError};

/// Most creates in one transaction.
const MAX_BATCH: usize = 256;

/// Creates staged and not committed yet.
#[derive(Default)]
pub(super) struct Pending(Mutex<HashMap<String, Row>>);

impl Pending {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Row>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One create: its objects, inserted in order, all or none.
struct Request {
    objects: Vec<NewObject>,
    done: oneshot::Sender<Result<(), StoreError>>,
}

/// The queue of the committing task.
#[derive(Clone)]
pub(super) struct Committer(mpsc::UnboundedSender<Request>);

/// A create handed to the committer: wait for [`Staged::committed`].
#[must_use = "a staged create is acknowledged only once committed"]
pub struct Staged(StagedInner);

enum StagedInner {
    /// Already committed (or refused): PostgreSQL, or no committer.
    Done(Result<(), StoreError>),
    Queued(oneshot::Receiver<Result<(), StoreError>>),
}

impl Staged {
    /// A create done without the committer.
    pub(super) fn done(result: Result<(), StoreError>) -> Self {
        Self(StagedInner::Done(result))
    }

    /// Waits until the create is durable, or refused.
    pub async fn committed(self) -> Result<(), StoreError> {
        match self.0 {
            StagedInner::Done(r) => r,
            StagedInner::Queued(rx) => rx.await.unwrap_or_else(|_| Err(StoreError::Database(sqlx::Error::PoolClosed))),
        }
    }
}

impl Committer {
    /// Starts the committing task for the store of `pool` and `mem`; it
    /// ends when the last [`Committer`] is dropped.
    pub(super) fn start(pool: sqlx::AnyPool, mem: Arc<Mem>, signal: Arc<tokio::sync::watch::Sender<u64>>) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(pool, mem, signal, rx));
        Self(tx)
    }

    /// Queues `objects` and counts them as pending in `mem` until committed.
    pub(super) fn stage(&self, mem: &Mem, objects: &[&NewObject]) -> Staged {
        let (done, rx) = oneshot::channel();
        let objects: Vec<NewObject> = objects.iter().map(|o| (*o).clone()).collect();
        let mut pending = mem.pending.lock();
        pending.extend(objects.iter().map(|o| (o.row.id.clone(), o.row.clone())));
        if let Err(mpsc::error::SendError(req)) = self.0.send(Request { objects, done }) {
            req.objects.iter().for_each(|o| drop(pending.remove(&o.row.id)));
            return Staged::done(Err(StoreError::Database(sqlx::Error::PoolClosed)));
        }
        Staged(StagedInner::Queued(rx))
    }
}

impl Mem {
    /// The rows of `kind` staged and not committed yet.
    pub(super) fn pending_rows(&self, kind: vmaas_model::ObjectKind) -> Vec<Row> {
        self.pending.lock().values().filter(|r| r.kind == kind).cloned().collect()
    }
}

impl Mem {
    /// What `tenant` holds: its rows in memory, then its creates staged
    /// and not committed yet, read in one step.
    pub(super) fn usage_with_pending(&self, tenant: &str) -> super::usage::Amounts {
        let pending = self.pending.lock();
        let state = self.state.read().unwrap_or_else(|p| p.into_inner());
        let staged = super::usage::tally(pending.values().filter(|r| r.tenant == tenant)).0.remove(tenant).unwrap_or_default();
        state.usage(tenant).plus(staged)
    }

    /// What the rows hold of the host, staged creates included.
    pub(super) fn host_usage_with_pending(&self) -> super::usage::HostUsage {
        let pending = self.pending.lock();
        let state = self.state.read().unwrap_or_else(|p| p.into_inner());
        state.host_usage().plus(super::usage::tally(pending.values()).1)
    }

    /// What every tenant holds, staged creates included.
    pub(super) fn all_usage_with_pending(&self) -> HashMap<String, super::usage::Amounts> {
        let pending = self.pending.lock();
        let state = self.state.read().unwrap_or_else(|p| p.into_inner());
        let mut all = state.all_usage().clone();
        for (tenant, staged) in super::usage::tally(pending.values()).0 {
            let e = all.entry(tenant).or_default();
            *e = e.plus(staged);
        }
        all
    }
}

/// Commits what is queued, a batch at a time, until the queue closes.
async fn run(pool: sqlx::AnyPool, mem: Arc<Mem>, signal: Arc<tokio::sync::watch::Sender<u64>>, mut rx: mpsc::UnboundedReceiver<Request>) {
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(r) => batch.push(r),
                Err(_) => break,
            }
        }
        let _w = mem.write.lock().await;
        let results = commit(&pool, &batch).await;
        settle(&mem, &batch, &results);
        drop(_w);
        if results.iter().any(Result::is_ok) {
            signal.send_modify(|n| *n = n.wrapping_add(1));
        }
        for (req, result) in batch.into_iter().zip(results) {
            // A requester that went away still had its create committed.
            let _ = req.done.send(result);
        }
    }
}

/// Commits `batch` in one transaction; should that fail, each request alone.
async fn commit(pool: &sqlx::AnyPool, batch: &[Request]) -> Vec<Result<(), StoreError>> {
    let all: Vec<&NewObject> = batch.iter().flat_map(|r| &r.objects).collect();
    match insert(pool, &all).await {
        Ok(()) => batch.iter().map(|_| Ok(())).collect(),
        Err(e) if batch.len() == 1 => vec![Err(e)],
        Err(_) => {
            let mut out = Vec::with_capacity(batch.len());
            for r in batch {
                out.push(insert(pool, &r.objects.iter().collect::<Vec<_>>()).await);
            }
            out
        }
    }
}

/// Inserts `objects`, in order, with their events, in one transaction.
async fn insert(pool: &sqlx::AnyPool, objects: &[&NewObject]) -> Result<(), StoreError> {
    let mut tx = pool.begin().await?;
    insert_created(&mut tx, Dialect::Sqlite, objects).await?;
    tx.commit().await?;
    Ok(())
}

/// Moves the committed rows of `batch` from pending into memory, and drops
/// the refused ones, in one step for readers of both.
fn settle(mem: &Mem, batch: &[Request], results: &[Result<(), StoreError>]) {
    let mut pending = mem.pending.lock();
    let mut state = mem.state.write().unwrap_or_else(|p| p.into_inner());
    for (req, result) in batch.iter().zip(results) {
        for o in &req.objects {
            pending.remove(&o.row.id);
            if result.is_ok() {
                state.put(o.row.clone());
            }
        }
    }
}
