//! Where a store operation runs: on a connection of the pool, or, inside
//! an admission on PostgreSQL ([`Store::admission`]), on the admission's
//! transaction: the admission's copy of the store runs every read and
//! write there (a write is a savepoint in it; a create is not, see
//! [`Store::insert_admitted`]).

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use sqlx::pool::PoolConnection;
use sqlx::{Any, AnyConnection, Transaction};
use tokio::sync::{Mutex, OwnedMappedMutexGuard, OwnedMutexGuard};

use super::{Store, StoreError};

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
}
