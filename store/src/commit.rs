//! Group commit of new objects on an exclusively owned SQLite database.
//!
//! A create is acknowledged only once its transaction is durable (WAL,
//! synchronous FULL: fsync at commit), and SQLite has one writer, so
//! creates one at a time cost one commit each. Instead, a create is
//! *staged* — queued, and counted by admission checks ([`Store::usage`](super::Store::usage),
//! [`Store::vms_referring`](super::Store::vms_referring)) — and one task commits every create queued meanwhile in one
//! transaction, then tells each its result. The reconciler's status writes
//! go the same way: each waits for the commit that holds it, but hundreds
//! of VMs coming up at once share a sync instead of queueing for one each.
//! Should a batch fail, each of its requests is tried again alone, so one
//! create's error (a name taken, a reference gone) is its own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot};

use super::objects::{NewObject, Row, insert_created};
use super::row::StatusWrite;
use super::{Dialect, Mem, StoreError, sqlite_writes};

/// Most requests in one transaction.
const MAX_BATCH: usize = 256;

/// Creates staged and not committed yet.
#[derive(Default)]
pub(super) struct Pending(Mutex<HashMap<String, Row>>);

impl Pending {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Row>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What one request writes.
enum Work {
    /// A create: its objects, inserted in order, all or none.
    Create(Vec<NewObject>),
    /// A status, written unless its row changed since it was seen.
    Status(Box<StatusWrite>),
}

/// One request, told whether it wrote (a create always does).
struct Request {
    work: Work,
    done: oneshot::Sender<Result<bool, StoreError>>,
}

impl Request {
    /// The objects a create stages (none for a status write).
    fn objects(&self) -> &[NewObject] {
        match &self.work {
            Work::Create(objects) => objects,
            Work::Status(_) => &[],
        }
    }
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
    Queued(oneshot::Receiver<Result<bool, StoreError>>),
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
            StagedInner::Queued(rx) => received(rx).await.map(|_| ()),
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
        if let Err(mpsc::error::SendError(req)) = self.0.send(Request { work: Work::Create(objects), done }) {
            req.objects().iter().for_each(|o| drop(pending.remove(&o.row.id)));
            return Staged::done(Err(StoreError::Database(sqlx::Error::PoolClosed)));
        }
        Staged(StagedInner::Queued(rx))
    }

    /// Writes a status with the next commit; whether it was written.
    pub(super) async fn write_status(&self, write: StatusWrite) -> Result<bool, StoreError> {
        let (done, rx) = oneshot::channel();
        if self.0.send(Request { work: Work::Status(Box::new(write)), done }).is_err() {
            return Err(StoreError::Database(sqlx::Error::PoolClosed));
        }
        received(rx).await
    }
}

/// What the committer said of one request (closed: the store is gone).
async fn received(rx: oneshot::Receiver<Result<bool, StoreError>>) -> Result<bool, StoreError> {
    rx.await.unwrap_or_else(|_| Err(StoreError::Database(sqlx::Error::PoolClosed)))
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
        let evented = settle(&mem, &batch, &results);
        drop(_w);
        if evented {
            signal.send_modify(|n| *n = n.wrapping_add(1));
        }
        for (req, result) in batch.into_iter().zip(results) {
            // A requester that went away still had its create committed.
            let _ = req.done.send(result);
        }
    }
}

/// Commits `batch` in one transaction; should that fail, each request alone.
async fn commit(pool: &sqlx::AnyPool, batch: &[Request]) -> Vec<Result<bool, StoreError>> {
    match write(pool, batch.iter()).await {
        Ok(written) => written.into_iter().map(Ok).collect(),
        Err(e) if batch.len() == 1 => vec![Err(e)],
        Err(_) => {
            let mut out = Vec::with_capacity(batch.len());
            for r in batch {
                out.push(write(pool, std::iter::once(r)).await.map(|w| w.first().copied().unwrap_or(false)));
            }
            out
        }
    }
}

/// Writes `requests`, in order, with their events, in one transaction:
/// whether each wrote.
async fn write(pool: &sqlx::AnyPool, requests: impl Iterator<Item = &Request>) -> Result<Vec<bool>, StoreError> {
    let mut tx = pool.begin().await?;
    let mut written = Vec::new();
    for r in requests {
        written.push(match &r.work {
            Work::Create(objects) => {
                insert_created(&mut tx, Dialect::Sqlite, &objects.iter().collect::<Vec<_>>()).await?;
                true
            }
            Work::Status(w) => sqlite_writes::write_status(&mut tx, w).await?,
        });
    }
    tx.commit().await?;
    Ok(written)
}

/// Moves the committed rows of `batch` from pending into memory, drops
/// the refused ones, and takes the statuses written into memory, in one
/// step for readers of both; whether any event was recorded.
fn settle(mem: &Mem, batch: &[Request], results: &[Result<bool, StoreError>]) -> bool {
    let mut pending = mem.pending.lock();
    let mut state = mem.state.write().unwrap_or_else(|p| p.into_inner());
    let mut evented = false;
    for (req, result) in batch.iter().zip(results) {
        match (&req.work, result) {
            (Work::Create(objects), _) => {
                for o in objects {
                    pending.remove(&o.row.id);
                    if result.is_ok() {
                        state.put(o.row.clone());
                    }
                }
                evented |= result.is_ok();
            }
            (Work::Status(w), Ok(true)) => {
                evented |= *w.seen.status != *w.status;
                state.set_status(&w.seen.id, w.status.as_str().into(), &w.state, w.observed.as_str().into(), w.seen.version);
            }
            (Work::Status(_), _) => {}
        }
    }
    evented
}
