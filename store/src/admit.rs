//! Admissions: the checks of a create or a change and the writes they
//! allow, as one step, one at a time in this process and, on PostgreSQL,
//! across every replica.
//!
//! - On SQLite this process alone writes: an admission is the store
//!   itself, taken in turn (a lock of this process).
//! - On PostgreSQL an admission runs in a transaction holding an advisory
//!   lock that every replica's admissions take. The admissions of this
//!   process that queue behind one another share that transaction: each
//!   runs after a savepoint (the first too), following the one before, so
//!   its checks see what those wrote, and the last of the group (the one nobody queues
//!   behind, or the [`MAX_GROUP`]th) commits it for all. Each is answered
//!   only once the group is committed. One that fails is rolled back to
//!   its savepoint, and the group goes on without it. A create in an
//!   admission takes no savepoint of its own ([`Store::insert_admitted`]):
//!   one that fails takes its admission back to where it began. So creates under
//!   load share one transaction (its lock, its commit) instead of taking
//!   them one each, and nothing one stored can outlive the lock it was
//!   decided under: should the replica die or freeze, the transaction
//!   ends, the lock and the whole group with it, and no member was told
//!   it was stored.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use sqlx::{Any, Transaction};
use tokio::sync::{Mutex, OwnedMutexGuard, watch};

use super::conn::Pinned;
use super::objects::insert_created;
use super::row::NewObject;
use super::{Store, StoreError};

/// The advisory lock every admission takes (any number, the same in every replica).
const ADMISSION_LOCK: i64 = 0x766d_6161_735f_6164;

/// How long an admission's transaction may wait on its replica between two
/// statements before PostgreSQL ends it: a replica frozen holding the
/// admission lock holds the others' admissions no longer than this.
const ADMISSION_IDLE_TIMEOUT: &str = "SET LOCAL idle_in_transaction_session_timeout = '800ms'";

/// Where each admission in a group begins.
const MARK: &str = "SAVEPOINT vmaas_admission";

/// Takes the group's transaction back to where the admission under way began.
const UNDO: &str = "ROLLBACK TO SAVEPOINT vmaas_admission";

/// Most admissions one transaction holds: bounds how long the lock is
/// held for the other replicas, and how long the first member waits.
pub(crate) const MAX_GROUP: usize = 32;

/// How a group ended, told to its members: committed, or why not.
type Outcome = watch::Sender<Option<Result<(), Arc<str>>>>;

/// This process's admissions: taken in turn, and on PostgreSQL the open
/// group that the next one joins.
#[derive(Default)]
pub(super) struct Gate {
    turn: Arc<Mutex<()>>,
    /// The group left open for the next turn (touched only in a turn).
    open: std::sync::Mutex<Option<Group>>,
    /// Admissions waiting for their turn.
    queued: AtomicUsize,
}

impl Gate {
    /// The open group, taken.
    fn take(&self) -> Option<Group> {
        self.open.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Leaves `group` open for the next turn.
    fn leave(&self, group: Group) {
        *self.open.lock().unwrap_or_else(|p| p.into_inner()) = Some(group);
    }
}

/// A turn of this process's admissions.
type TurnGuard = OwnedMutexGuard<()>;

/// A transaction holding the admission lock and the admissions done in it.
struct Group {
    tx: Transaction<'static, Any>,
    members: usize,
    outcome: Arc<Outcome>,
}

/// An admission under way: [`Admission::commit`] stores what was done in
/// it; dropped, it is undone.
#[must_use = "an admission stores nothing until committed"]
pub struct Admission {
    store: Store,
    turn: Option<Turn>,
}

/// An admission's turn: the gate held, and on PostgreSQL its place in a group.
struct Turn {
    gate: TurnGuard,
    member: Option<Member>,
}

/// An admission's place in a group (PostgreSQL).
struct Member {
    /// The group's transaction, lent to the admission's copy of the store.
    pinned: Pinned,
    /// Admissions done in the group before this one (none: no savepoint).
    before: usize,
    outcome: Arc<Outcome>,
}

impl Admission {
    /// The store to check and write through: every operation on it is part of the admission.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Whether it is a transaction of its own (PostgreSQL), not the store itself.
    pub fn is_transaction(&self) -> bool {
        self.turn.as_ref().is_some_and(|t| t.member.is_some())
    }

    /// Stores everything written in the admission: returns once the
    /// transaction holding it is committed. The commit runs on a task of
    /// its own: a caller going away cannot cut it short for the others.
    pub async fn commit(mut self) -> Result<(), StoreError> {
        let Some(Turn { gate, member: Some(member) }) = self.turn.take() else { return Ok(()) };
        let mut told = member.outcome.subscribe();
        let base = Store { pinned: None, ..self.store.clone() };
        tokio::spawn(async move {
            let Some(tx) = member.pinned.lock().await.take() else { return };
            pass_on(gate, Group { tx, members: member.before + 1, outcome: member.outcome }, &base, true).await;
        });
        match told.wait_for(Option::is_some).await.map(|o| o.clone()) {
            Ok(Some(Ok(()))) => Ok(()),
            Ok(Some(Err(why))) => Err(group_failed(&why)),
            _ => Err(ended()),
        }
    }
}

impl Drop for Admission {
    /// Undoes the admission: the first of its group takes the transaction
    /// with it; a later one is rolled back to its savepoint (which stays,
    /// for the next), and the group goes on (on a task: dropping cannot wait).
    fn drop(&mut self) {
        let Some(Turn { gate, member: Some(member) }) = self.turn.take() else { return };
        let tx = member.pinned.try_lock().ok().and_then(|mut t| t.take());
        if member.before == 0 {
            return;
        }
        let (Some(tx), Ok(rt)) = (tx, tokio::runtime::Handle::try_current()) else { return };
        let base = Store { pinned: None, ..self.store.clone() };
        rt.spawn(async move {
            let mut group = Group { tx, members: member.before, outcome: member.outcome };
            match sqlx::query(UNDO).execute(&mut *group.tx).await {
                Ok(_) => pass_on(gate, group, &base, false).await,
                Err(e) => tracing::warn!(error = %e, "an admission could not be rolled back alone: its group is undone"),
            }
        });
    }
}

/// Leaves `group` open for the admission queued next, after a savepoint
/// the next one can be rolled back to (made unless `mark` is false: one
/// is there already), or, when none is queued (or the group is full),
/// commits it and tells its members. A group left open always ends in a
/// savepoint: joining it costs nothing, and a member committed in the
/// group is never released (the commit does that).
async fn pass_on(gate: TurnGuard, mut group: Group, store: &Store, mark: bool) {
    if store.gate.queued.load(Ordering::SeqCst) > 0 && group.members < MAX_GROUP {
        if mark && let Err(e) = sqlx::query(MARK).execute(&mut *group.tx).await {
            // The group is undone: its members are told so.
            return tracing::warn!(error = %e, "an admission group could not go on");
        }
        store.gate.leave(group);
        return;
    }
    let Group { tx, outcome, .. } = group;
    let result = tx.commit().await;
    drop(gate);
    outcome.send_replace(Some(result.map_err(|e| Arc::from(e.to_string()))));
    store.events_written();
}

/// Counts an admission as waiting for its turn while it lives. One that
/// goes away while waiting may have been counted on to carry the open
/// group on: a task does so in its stead.
struct Waiting {
    base: Store,
    served: bool,
}

impl Waiting {
    fn new(base: &Store) -> Self {
        base.gate.queued.fetch_add(1, Ordering::SeqCst);
        Self { base: base.clone(), served: false }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.base.gate.queued.fetch_sub(1, Ordering::SeqCst);
        let (false, Ok(rt)) = (self.served, tokio::runtime::Handle::try_current()) else { return };
        let base = self.base.clone();
        rt.spawn(async move {
            let gate = base.gate.turn.clone().lock_owned().await;
            if let Some(group) = base.gate.take() {
                pass_on(gate, group, &base, false).await;
            }
        });
    }
}

/// The group an admission was in ended before it was committed.
fn ended() -> StoreError {
    group_failed("the replica's admission ended before it was committed")
}

/// The group an admission was in was not committed: the change is not stored.
fn group_failed(why: &str) -> StoreError {
    StoreError::Database(sqlx::Error::Io(std::io::Error::new(
        std::io::ErrorKind::ConnectionAborted,
        format!("the admission was not stored: {why}"),
    )))
}

impl Store {
    /// Begins an admission once the ones before it in this process are
    /// done: on PostgreSQL, in the open group's transaction, or in a new
    /// one holding the admission lock, which every replica's admissions
    /// take in turn. On SQLite this process alone writes, and its turn is
    /// enough: the admission is the store itself.
    pub async fn admission(&self) -> Result<Admission, StoreError> {
        if self.pinned.is_some() {
            return Ok(Admission { store: self.clone(), turn: None });
        }
        let mut waiting = Waiting::new(self);
        let gate = self.gate.turn.clone().lock_owned().await;
        waiting.served = true;
        drop(waiting);
        if self.mem.is_some() {
            return Ok(Admission { store: self.clone(), turn: Some(Turn { gate, member: None }) });
        }
        let (tx, before, outcome) = match self.gate.take() {
            Some(g) => (g.tx, g.members, g.outcome),
            None => (self.locked_transaction().await?, 0, Arc::new(watch::channel(None).0)),
        };
        let pinned: Pinned = Arc::new(Mutex::new(Some(tx)));
        let member = Member { pinned: pinned.clone(), before, outcome };
        let store = Self { pinned: Some(pinned), ..self.clone() };
        Ok(Admission { store, turn: Some(Turn { gate, member: Some(member) }) })
    }

    /// A new transaction holding the admission lock (PostgreSQL), at the
    /// savepoint its first admission begins at.
    async fn locked_transaction(&self) -> Result<Transaction<'static, Any>, StoreError> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(ADMISSION_IDLE_TIMEOUT).execute(&mut *tx).await?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(ADMISSION_LOCK).execute(&mut *tx).await?;
        sqlx::query(MARK).execute(&mut *tx).await?;
        Ok(tx)
    }

    /// Stores new objects in the admission whose transaction is `pinned`
    /// (PostgreSQL) with no savepoint of their own (two round trips fewer
    /// while every replica's admissions wait): a create that fails takes
    /// the admission back to its savepoint, where it began, so that the
    /// transaction stays good for the rest of its group. Should even that
    /// fail, the transaction is let go, and none of its group is told it
    /// was stored. `None`: the admission holds no transaction any more.
    pub(super) async fn insert_admitted(&self, pinned: &Pinned, new: &[&NewObject]) -> Option<Result<(), StoreError>> {
        let mut held = pinned.lock().await;
        let tx = held.as_mut()?;
        let inserted = insert_created(tx, self.dialect, new).await;
        if inserted.is_err() && sqlx::query(UNDO).execute(&mut **tx).await.is_err() {
            held.take();
        }
        Some(inserted)
    }
}
