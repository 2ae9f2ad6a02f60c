//! The reconciler: the only writer of status. Level-triggered, per object.
//!
//! Objects come off a [`Queue`]: enqueued by the API when their desired state
//! changes, by the backend when something happens to them, by following the
//! event log (changes made through other replicas), and by a full sweep when
//! this replica starts reconciling, and as often as the backend asks
//! ([`Backend::resync`]: every 10 s on qemu, whose processes and files can
//! change unseen; every 5 min on kubevirt, whose watches wake each object
//! that changes; never with no backend). An idle server with a backend that
//! needs no resync does no work per object.
//! Each kind has a reconcile function (`vm`) that reads the object, resolves
//! what its driver needs, makes one step through the driver, writes the
//! status and says when to look again. No object is reconciled twice at
//! once. With several replicas on one PostgreSQL, a lease in the database
//! makes sure only one replica reconciles at a time.

pub(crate) mod external;
mod image;
pub mod lease;
pub(crate) mod nat;
pub(crate) mod network;
mod progress;
mod queue;
pub(crate) mod snapshot;
mod status;
mod vm;
pub(crate) mod volume;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use chrono::Utc;
use tokio::sync::watch;
use tracing::{Instrument, debug, info, info_span, warn};
use vmaas_backend::{Backend, Wake};
use vmaas_model::ObjectKind;

pub use progress::{Progress, ProgressReport};
pub use queue::{Key, Queue};
pub(crate) use vm::{acknowledged_status, deleting_status};

use crate::metrics::Metrics;
use crate::store::events::EventType;
use crate::store::{Scope, Store, StoreError, VmRecord};

/// Name of the lease that elects the reconciling replica.
pub const LEASE: &str = "reconciler";

/// Whether the reconciler drives objects of `kind`: every tenant's kind
/// (templates are global and have no status).
fn reconciled(kind: ObjectKind) -> bool {
    kind.is_tenant_scoped()
}

/// Tuning of the loop.
#[derive(Debug, Clone)]
pub struct ReconcilerConfig {
    /// Time between sweeps for changes the API of another replica made.
    pub interval: Duration,
    /// How long a lease lasts without renewal (at least three intervals);
    /// a holder on this host that is gone is taken over at once.
    pub lease_ttl: Duration,
    /// How many objects are reconciled at once.
    pub concurrency: usize,
    /// This replica's identity in the lease.
    pub holder: String,
    /// The largest image file imported.
    pub image_max_bytes: u64,
    /// How long an imported image may go unused before it is pruned.
    pub image_retention: Option<Duration>,
    /// Opens the registry credentials images are pulled with.
    pub sealer: Option<std::sync::Arc<crate::seal::Sealer>>,
}

impl Default for ReconcilerConfig {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(1),
            lease_ttl: Duration::from_secs(5),
            concurrency: 8,
            holder: lease::holder(),
            image_max_bytes: 64 << 30,
            image_retention: None,
            sealer: None,
        }
    }
}

/// The reconciler.
pub struct Reconciler {
    store: Store,
    backend: Arc<dyn Backend>,
    queue: Arc<Queue>,
    metrics: Arc<Metrics>,
    config: ReconcilerConfig,
    leader: AtomicBool,
    progress: Arc<Progress>,
    /// Where each VM's volumes were at its last reconcile.
    volumes_seen: volume::Seen,
    /// How each kind but VMs, images and templates is reconciled, by kind.
    kinds: [Option<ReconcileFn>; ObjectKind::ALL.len()],
}

/// What one pass did, for tests and logs.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PassReport {
    /// Objects looked at.
    pub seen: usize,
    /// Statuses written.
    pub updated: usize,
    /// Records removed after cleanup.
    pub removed: usize,
    /// Backend errors.
    pub errors: usize,
}

/// What one reconcile of one object did, and when to look at it again.
pub(crate) type Pass = Result<(Outcome, Option<Duration>), StoreError>;

/// One reconcile of one object, running.
pub(crate) type PassFuture<'a> = Pin<Box<dyn Future<Output = Pass> + Send + 'a>>;

/// How the objects of one kind are reconciled, given the reconciler and the
/// object's id: what the API's table of kinds registers ([`Reconciler::with_kinds`]).
pub(crate) type ReconcileFn = for<'a> fn(&'a Reconciler, &'a str) -> PassFuture<'a>;

/// What one reconcile of one object did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Unchanged,
    Updated,
    Removed,
    BackendError,
}

impl Reconciler {
    /// A reconciler over `store` and `backend`, fed by `queue`; the backend is
    /// given a way to wake it for one object.
    pub fn new(store: Store, backend: Arc<dyn Backend>, queue: Arc<Queue>, metrics: Arc<Metrics>, config: ReconcilerConfig) -> Self {
        Self {
            store,
            backend,
            queue,
            metrics,
            config,
            leader: AtomicBool::new(false),
            progress: Arc::default(),
            volumes_seen: Default::default(),
            kinds: [None; ObjectKind::ALL.len()],
        }
    }

    /// Reconciles each of `kinds` with its function (the API's table of kinds).
    pub(crate) fn with_kinds(mut self, kinds: impl IntoIterator<Item = (ObjectKind, ReconcileFn)>) -> Self {
        for (kind, reconcile) in kinds {
            self.kinds[kind as usize] = Some(reconcile);
        }
        self
    }

    /// Reports its progress into `progress` (shown by `/healthz`).
    pub fn with_progress(mut self, progress: Arc<Progress>) -> Self {
        progress.set_workers(self.config.concurrency.max(1));
        self.progress = progress;
        self
    }

    /// Runs until `shutdown` turns true: the lease, the sweeps and the workers.
    pub async fn run(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        info!(backend = self.backend.name(), holder = %self.config.holder, "reconciler started");
        let (wake, mut woken) = Wake::channel();
        self.backend.attach(wake);
        let q = self.queue.clone();
        let forward = tokio::spawn(async move {
            while let Some((kind, id)) = woken.recv().await {
                q.enqueue(kind, &id);
            }
        });
        let workers: Vec<_> = (0..self.config.concurrency.max(1)).map(|_| tokio::spawn(self.clone().work())).collect();
        let mut last_resync: Option<Instant> = None;
        // The last event followed; none until a full sweep started from it.
        let mut followed: Option<i64> = None;
        loop {
            let leader = self.renew_lease().await;
            if !leader {
                followed = None;
            } else if let Some(after) = followed {
                let due = |every| last_resync.is_none_or(|t| t.elapsed() >= every);
                let resync = self.backend.resync().is_some_and(due);
                followed = self.follow(after).await.filter(|_| !resync);
            }
            if leader && followed.is_none() {
                // From the log's end first: what changes during the sweep is followed after it.
                match self.store.last_event().await {
                    Ok(end) => match self.sweep().await {
                        Ok(()) => {
                            followed = Some(end);
                            last_resync = Some(Instant::now());
                        }
                        Err(e) => warn!(error = %e, "reconcile sweep failed"),
                    },
                    Err(e) => warn!(error = %e, "reading the event log"),
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(self.config.interval) => {}
                _ = shutdown.changed() => break,
            }
            if *shutdown.borrow() {
                break;
            }
        }
        for w in workers {
            w.abort();
        }
        forward.abort();
        if self.leader.load(Ordering::SeqCst) {
            let _ = self.store.release_lease(LEASE, &self.config.holder).await;
        }
        info!("reconciler stopped");
    }

    async fn renew_lease(&self) -> bool {
        let held = match self.try_lease().await {
            Ok(held) => held,
            Err(e) => {
                warn!(error = %e, "cannot renew the reconciler lease");
                false
            }
        };
        self.progress.set_leader(held);
        if self.leader.swap(held, Ordering::SeqCst) != held {
            info!(leader = held, "reconciler lease {}", if held { "acquired" } else { "lost" });
        }
        held
    }

    /// Takes or renews the lease, taking it over at once from a holder on
    /// this host that is gone (a server killed before it could release it).
    async fn try_lease(&self) -> Result<bool, StoreError> {
        let ttl = self.config.lease_ttl.max(self.config.interval * 3);
        let me = &self.config.holder;
        if self.store.acquire_lease(LEASE, me, Utc::now(), ttl).await? {
            return Ok(true);
        }
        match self.store.lease_holder(LEASE).await? {
            Some(gone) if lease::is_gone(&gone) => {
                let taken = self.store.take_over_lease(LEASE, &gone, me, Utc::now(), ttl).await?;
                if taken {
                    info!(previous = %gone, "took over the reconciler lease from a process that is gone");
                }
                Ok(taken)
            }
            _ => Ok(false),
        }
    }

    /// Enqueues every object, and lets the backend quarantine what belongs
    /// to no VM. Works on the stored rows: nothing is decoded.
    async fn sweep(&self) -> Result<(), StoreError> {
        let mut seen = Vec::new();
        for kind in ObjectKind::ALL.into_iter().filter(|k| reconciled(*k)) {
            let rows = self.store.all(kind).await?;
            seen.extend(rows.iter().map(|r| (kind, r.id.clone())));
            for row in &rows {
                self.queue.enqueue(kind, &row.id);
            }
            if kind == ObjectKind::VirtualMachine {
                let ids: Vec<String> = rows.iter().map(|r| r.id.clone()).collect();
                self.quarantine_unknown(&ids).await;
            }
        }
        self.progress.first_sweep(seen);
        Ok(())
    }

    /// Enqueues the objects the event log says changed after `after` (by
    /// any replica's API, or status writes); the last event followed, or
    /// `None` when the log no longer holds what came after `after` (or
    /// cannot be read): a full sweep is due.
    async fn follow(&self, after: i64) -> Option<i64> {
        const BATCH: i64 = 1000;
        let mut last = after;
        // Bounded per tick; the rest is followed at the next.
        for _ in 0..100 {
            let batch = match self.store.events_after(last, BATCH).await {
                Ok(b) => b,
                Err(e) => {
                    warn!(error = %e, "following the event log");
                    return None;
                }
            };
            if batch.first().is_some_and(|e| e.seq > last + 1) {
                warn!(after = last, first = batch[0].seq, "the event log was trimmed past what was followed: sweeping");
                return None;
            }
            for e in &batch {
                if e.kind_of_change != EventType::Deleted.as_str() && reconciled(e.kind) {
                    self.queue.enqueue(e.kind, &e.object_id);
                }
                last = e.seq;
            }
            if (batch.len() as i64) < BATCH {
                break;
            }
        }
        Some(last)
    }

    /// Lets the backend quarantine the VMs not among `known`, and counts them.
    async fn quarantine_unknown(&self, known: &[String]) {
        if let Err(e) = self.backend.vms().retain(known).await {
            warn!(error = %e, "backend check of unknown VMs failed");
        }
        self.metrics.set_quarantined(self.backend.quarantine().len());
    }

    /// One worker: takes due objects off the queue while this replica leads.
    async fn work(self: Arc<Self>) {
        loop {
            let key = self.queue.next().await;
            if !self.leader.load(Ordering::SeqCst) {
                self.queue.done(key, None);
                tokio::time::sleep(self.config.interval).await;
                continue;
            }
            let started = Instant::now();
            let span = info_span!("reconcile", kind = %key.0, id = %key.1);
            let (outcome, requeue) = match self.reconcile(&key).instrument(span).await {
                Ok(r) => r,
                Err(e) => {
                    warn!(kind = %key.0, id = %key.1, error = %e, "reconcile failed; will retry");
                    (Outcome::BackendError, Some(Duration::from_secs(1)))
                }
            };
            self.metrics.observe_pass(started.elapsed(), usize::from(outcome == Outcome::BackendError));
            if outcome != Outcome::BackendError {
                self.progress.reconciled(&key);
            }
            self.queue.done(key, requeue);
        }
    }

    /// One pass over one object, by kind: what it did, and when to look again.
    async fn reconcile(&self, key: &Key) -> Pass {
        match (key.0, self.kinds[key.0 as usize]) {
            (ObjectKind::VirtualMachine, _) => vm::reconcile(self, &key.1).await,
            (ObjectKind::Image, _) => image::reconcile(self, &key.1).await,
            (ObjectKind::Template, _) => Ok((Outcome::Unchanged, None)),
            (_, Some(reconcile)) => reconcile(self, &key.1).await,
            (kind, None) => {
                warn!(%kind, "no reconcile is registered for this kind");
                Ok((Outcome::Unchanged, None))
            }
        }
    }

    /// One pass over every object, in order, now (for tests and tools).
    pub async fn pass(&self) -> Result<PassReport, StoreError> {
        let vms = self.store.all_vms().await?;
        let mut report = PassReport { seen: vms.len(), ..Default::default() };
        for v in &vms {
            match vm::reconcile(self, &v.id).await?.0 {
                Outcome::Unchanged => {}
                Outcome::Updated => report.updated += 1,
                Outcome::Removed => report.removed += 1,
                Outcome::BackendError => report.errors += 1,
            }
        }
        let ids: Vec<String> = vms.iter().map(|v| v.id.clone()).collect();
        self.quarantine_unknown(&ids).await;
        debug!(?report, "reconcile pass");
        Ok(report)
    }
}

/// Waits (at most `at_most`) until the reconciler has written a status for
/// version `version` of VM `id`, and returns the VM as it is then. The API
/// answers a change with this, so the answer already shows where the VM is
/// going, and the reconciler stays the only writer of status.
pub async fn acknowledged(store: &Store, queue: &Queue, id: &str, version: i64, at_most: Duration) -> Result<VmRecord, StoreError> {
    let deadline = Instant::now() + at_most;
    loop {
        let vm = store.get_vm(id, &Scope::All).await?;
        let left = deadline.saturating_duration_since(Instant::now());
        if vm.observed_version >= version || left.is_zero() {
            return Ok(vm);
        }
        // Another replica may be the one reconciling: look again soon either way.
        queue.wait_status(left.min(Duration::from_millis(50))).await;
    }
}

#[cfg(test)]
mod tests;
