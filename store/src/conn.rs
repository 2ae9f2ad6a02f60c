//! Where a store operation runs: on a connection of the pool, or, inside
//! an admission on PostgreSQL, on the admission's own transaction.
//!
//! An admission ([`Store::admission`]) begins a transaction, takes a
//! PostgreSQL advisory lock in it, and hands back a copy of the store whose
//! every read and write runs in that transaction (a write is a savepoint
//! in it). The checks an admission makes and the object it stores are so
//! one transaction: another replica's admission waits on the lock and then
//! sees the stored object, and should this replica die or freeze, its
//! transaction ends, lock and half-made object with it. Nothing it stored
//! can outlive the lock it was decided under.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use sqlx::pool::PoolConnection;
use sqlx::{Any, AnyConnection, Transaction};
use tokio::sync::{Mutex, OwnedMappedMutexGuard, OwnedMutexGuard};

use super::{Store, StoreError};

/// The advisory lock every admission takes (any number, the same in every replica).
const ADMISSION_LOCK: i64 = 0x766d_6161_735f_6164;

/// How long an admission's transaction may wait on its replica between two
/// statements before PostgreSQL ends it: a replica frozen holding the
/// admission lock holds the others' admissions no longer than this.
const ADMISSION_IDLE_TIMEOUT: &str = "SET LOCAL idle_in_transaction_session_timeout = '800ms'";

/// The transaction of an admission, shared by the store copies made for it.
pub(super) type Pinned = Arc<Mutex<Option<Transaction<'static, Any>>>>;

/// A connection for one operation.
pub(super) enum Conn {
    /// Of the pool.
    Pooled(PoolConnection<Any>),
    /// The admission's transaction.
    Pinned(OwnedMappedMutexGuard<Option<Transaction<'static, Any>>, Transaction<'static, Any>>),
}

impl Deref for Conn {
    type Target = AnyConnection;

    fn deref(&self) -> &AnyConnection {
        match self {
            Self::Pooled(c) => c,
            Self::Pinned(t) => t,
        }
    }
}

impl DerefMut for Conn {
    fn deref_mut(&mut self) -> &mut AnyConnection {
        match self {
            Self::Pooled(c) => c,
            Self::Pinned(t) => t,
        }
    }
}

/// An admission under way on PostgreSQL: [`Admission::commit`] stores what
/// was done in it; dropped, it is undone.
#[must_use = "an admission stores nothing until committed"]
pub struct Admission {
    pinned: Option<Pinned>,
    store: Store,
}

impl Admission {
    /// The store to check and write through: every operation on it is part of the admission.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Whether it is a transaction of its own (PostgreSQL), not the store itself.
    pub fn is_transaction(&self) -> bool {
        self.pinned.is_some()
    }

    /// Commits everything written in the admission and ends it (the lock with it).
    pub async fn commit(self) -> Result<(), StoreError> {
        let Some(pinned) = self.pinned else { return Ok(()) };
        let tx = pinned.lock().await.take();
        if let Some(tx) = tx {
            tx.commit().await?;
            Store { pinned: None, ..self.store }.events_written().await;
        }
        Ok(())
    }
}

impl Store {
    /// A connection for one operation: the admission's transaction, while
    /// this is an admission's copy of the store, else one of the pool.
    pub(super) async fn conn(&self) -> Result<Conn, StoreError> {
        if let Some(pinned) = &self.pinned {
            let held = pinned.clone().lock_owned().await;
            if let Ok(tx) = OwnedMutexGuard::try_map(held, Option::as_mut) {
                return Ok(Conn::Pinned(tx));
            }
        }
        Ok(Conn::Pooled(self.pool.acquire().await?))
    }

    /// Begins an admission: on PostgreSQL, a transaction holding the
    /// admission lock, which every replica's admissions take in turn. On
    /// SQLite this process alone writes, and its own lock (the caller's) is
    /// enough: the admission is the store itself.
    pub async fn admission(&self) -> Result<Admission, StoreError> {
        if self.mem.is_some() || self.pinned.is_some() {
            return Ok(Admission { pinned: None, store: self.clone() });
        }
        let mut tx = self.pool.begin().await?;
        sqlx::query(ADMISSION_IDLE_TIMEOUT).execute(&mut *tx).await?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(ADMISSION_LOCK).execute(&mut *tx).await?;
        let pinned: Pinned = Arc::new(Mutex::new(Some(tx)));
        Ok(Admission { store: Self { pinned: Some(pinned.clone()), ..self.clone() }, pinned: Some(pinned) })
    }
}
