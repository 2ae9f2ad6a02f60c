//! # vmaas-store
//!
//! Durable state: SQLite embedded by default, PostgreSQL for several replicas.
//!
//! Every kind of object lives in one table (`objects`: id, kind, tenant,
//! name, version, spec, status, deletion mark), and the references between
//! objects in another (`refs`), so that the database itself refuses to
//! delete an object something still refers to. One portable schema and one
//! set of queries serve both databases, through sqlx's `Any` driver.
//!
//! - [`objects`]: the generic operations every kind uses.
//! - [`Admission`]: checks and the writes they allow as one step, in turn
//!   (on PostgreSQL across replicas, queued admissions sharing a transaction).
//! - `mem`: the in-memory read path over an exclusively owned SQLite file.
//! - [`links`]: the objects each VM is named by without being pinned
//!   (attachments, load balancers), found without reading their kind.
//! - [`record`]: the typed record of every kind the model declares an
//!   `Object` of (all but VMs and templates): a new kind needs no code here.
//! - [`vm`], [`template`] and [`image`]: what VMs, templates and images add on top.
//! - [`tickets`] and [`console_clients`]: console tickets, and the console
//!   connection each client holds, shared by every replica.
//! - [`secrets`]: sealed secrets objects hold, outside their JSON.

#![forbid(unsafe_code)]

mod admit;
mod commit;
mod conn;
pub mod console_clients;
mod create_pg;
mod db_errors;
pub mod events;
pub mod image;
pub mod links;
mod mem;
mod migrations;
mod narrow;
pub mod objects;
mod open;
mod postings;
pub mod quota;
pub mod record;
mod row;
pub mod secrets;
mod sqlite_writes;
mod statement;
pub mod template;
pub mod tickets;
pub mod usage;
pub mod vm;

use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use sqlx::AnyPool;
use vmaas_model::ObjectKind;

pub use admit::Admission;
pub use commit::Staged;
pub use image::{BootImage, ImageUser};
pub use objects::{Filter, NewObject, Row};
pub use record::{
    ATTACHMENT_OF, AttachmentRecord, BALANCER_ON, ExternalIpRecord, ImageRecord, LoadBalancerRecord, NetworkRecord, Record, SUBNET_OF,
    SecurityGroupRecord, SnapshotRecord, SubnetRecord, VOLUME_OF, VolumeAttachmentRecord, VolumeRecord,
};
pub use template::TemplateRecord;
pub use vm::VmRecord;

use self::mem::MemState;

#[cfg(test)]
mod tests;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No such object (or not visible in the caller's scope).
    #[error("{kind} {id:?} not found")]
    NotFound {
        /// `virtual machine` or `template`.
        kind: &'static str,
        /// The id asked for.
        id: String,
    },
    /// A unique key is taken.
    #[error("{0}")]
    AlreadyExists(String),
    /// The version given is not the current one.
    #[error("{0}")]
    Conflict(String),
    /// The object is referenced, or being deleted, and cannot be changed so.
    #[error("{0}")]
    InUse(String),
    /// An object refers to one that does not exist (any more).
    #[error("{0}")]
    MissingReference(String),
    /// The database failed.
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    /// Migrations failed.
    #[error("schema migration: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A stored document does not decode: a bug or a hand-edited database.
    #[error("corrupt stored document: {0}")]
    Corrupt(#[from] serde_json::Error),
}

impl StoreError {
    /// A change of `kind` `name` based on version `expected` when it is at `current`.
    pub fn stale(kind: ObjectKind, name: &str, expected: i64, current: i64) -> Self {
        Self::Conflict(format!(
            "{} {name:?} was changed concurrently: version {expected} is not current (it is {current}); read it again and retry",
            kind.human()
        ))
    }

    /// A VM change based on version `expected` when the VM is at `current`.
    pub fn stale_vm(name: &str, expected: i64, current: i64) -> Self {
        Self::stale(ObjectKind::VirtualMachine, name, expected, current)
    }
}

/// Which database is behind the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// Embedded SQLite file.
    Sqlite,
    /// Shared PostgreSQL.
    Postgres,
}

impl Dialect {
    /// `sqlite` or `postgres`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sqlite => "sqlite",
            Self::Postgres => "postgres",
        }
    }
}

/// Which objects a caller may see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Only this tenant's (and global ones).
    Tenant(String),
    /// Every tenant's (administrators and the reconciler).
    All,
}

impl Scope {
    fn tenant(&self) -> Option<&str> {
        match self {
            Self::Tenant(t) => Some(t),
            Self::All => None,
        }
    }
}

/// The store.
///
/// With SQLite, this process is the only one using the database file, so the
/// store also keeps every object in memory: reads are served from memory,
/// and writes go to SQLite first and then to memory, one at a time. With
/// PostgreSQL, other replicas write too, so every read goes to the database.
#[derive(Clone)]
pub struct Store {
    pool: AnyPool,
    dialect: Dialect,
    mem: Option<Arc<Mem>>,
    /// Commits creates in groups, when memory mirrors the database.
    commits: Option<commit::Committer>,
    /// Bumped after every commit that recorded events (this process's own).
    events: Arc<tokio::sync::watch::Sender<u64>>,
    /// In an admission's copy of the store (PostgreSQL): its transaction.
    pinned: Option<conn::Pinned>,
    /// Numbers the events this process queued (PostgreSQL).
    numberer: Option<events::Numberer>,
    /// This process's admissions, taken in turn.
    gate: Arc<admit::Gate>,
}

/// The in-memory copy of an exclusively owned database.
struct Mem {
    /// Serialises writes, so memory is updated in the order the database was.
    write: tokio::sync::Mutex<()>,
    state: RwLock<MemState>,
    /// Creates staged and not committed yet (taken before `state` when both are).
    pending: commit::Pending,
    /// Every tenant's quota, by tenant (read at each admission).
    quotas: RwLock<std::collections::HashMap<String, quota::QuotaRow>>,
}

fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Nanos, true)
}

fn parse_ts(s: &str) -> Result<DateTime<Utc>, StoreError> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| StoreError::Corrupt(serde::de::Error::custom(format!("timestamp {s:?}: {e}"))))
}

impl Store {
    /// Opens (creating if needed) the SQLite database `vmaas.db` in `data_dir`.
    pub async fn open_sqlite(data_dir: &Path) -> Result<Self, StoreError> {
        let path = data_dir.join("vmaas.db");
        Self::connect(&format!("sqlite://{}?mode=rwc", path.display())).await
    }

    /// Connects to `url` (`sqlite://…` or `postgres://…`) and migrates the schema.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        sqlx::any::install_default_drivers();
        let dialect = if url.starts_with("postgres:") || url.starts_with("postgresql:") { Dialect::Postgres } else { Dialect::Sqlite };
        let pool = open::pool(url, dialect).await?;
        if dialect == Dialect::Sqlite {
            // Persistent for the file: readers never block the writer.
            sqlx::query("PRAGMA journal_mode=WAL").execute(&pool).await?;
        }
        migrations::all().run(&pool).await?;
        if dialect == Dialect::Postgres {
            sqlx::query(migrations::POSTGRES_ONLY).execute(&pool).await?;
        }
        let numberer = (dialect == Dialect::Postgres).then(|| events::Numberer::start(pool.clone()));
        let events = Arc::new(tokio::sync::watch::channel(0).0);
        let gate = Default::default();
        let mut store = Self { pool, dialect, mem: None, commits: None, events, pinned: None, numberer, gate };
        store.count_usage_once().await?;
        store.index_links_once().await?;
        if dialect == Dialect::Sqlite {
            let mut state = MemState::default();
            for row in store.sql_all().await? {
                state.put(row);
            }
            let quotas = store.all_quotas().await?.into_iter().map(|q| (q.tenant.clone(), q)).collect();
            let mem = Arc::new(Mem {
                write: tokio::sync::Mutex::new(()),
                state: RwLock::new(state),
                pending: Default::default(),
                quotas: RwLock::new(quotas),
            });
            store.commits = Some(commit::Committer::start(store.pool.clone(), mem.clone(), store.events.clone()));
            store.mem = Some(mem);
        }
        Ok(store)
    }

    /// Takes the write lock when memory mirrors the database.
    async fn write_lock(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        match &self.mem {
            Some(m) => Some(m.write.lock().await),
            None => None,
        }
    }

    /// Runs `f` on the in-memory state, if there is one.
    fn with_mem<R>(&self, f: impl FnOnce(&mut MemState) -> R) -> Option<R> {
        self.mem.as_ref().map(|m| f(&mut m.state.write().unwrap_or_else(|p| p.into_inner())))
    }

    /// Reads the in-memory state, if there is one.
    fn read_mem<R>(&self, f: impl FnOnce(&MemState) -> R) -> Option<R> {
        self.mem.as_ref().map(|m| f(&m.state.read().unwrap_or_else(|p| p.into_inner())))
    }

    /// Which database this is.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// Checks the database answers.
    pub async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    /// The store's identity, made on first use: `(id, made_now)`. A store
    /// made just now is new (or was emptied), whatever the host holds.
    pub async fn identity(&self) -> Result<(String, bool), StoreError> {
        let fresh = uuid::Uuid::new_v4().to_string();
        let made =
            sqlx::query("INSERT INTO store_identity (singleton, id, created_at) VALUES (1, $1, $2) ON CONFLICT (singleton) DO NOTHING")
                .bind(&fresh)
                .bind(ts(Utc::now()))
                .execute(&self.pool)
                .await?
                .rows_affected()
                > 0;
        let id: String = sqlx::query_scalar("SELECT id FROM store_identity WHERE singleton = 1").fetch_one(&self.pool).await?;
        Ok((id, made))
    }

    // ---- leases ----

    /// Takes or renews the lease `name` for `holder` until `ttl` from `now`.
    /// True when `holder` holds it afterwards.
    pub async fn acquire_lease(&self, name: &str, holder: &str, now: DateTime<Utc>, ttl: Duration) -> Result<bool, StoreError> {
        let now_ms = now.timestamp_millis();
        let until = now_ms + i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX / 2);
        let r = sqlx::query(
            "INSERT INTO leases (name, holder, expires_at) VALUES ($1, $2, $3) \
             ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at \
             WHERE leases.holder = excluded.holder OR leases.expires_at < $4",
        )
        .bind(name)
        .bind(holder)
        .bind(until)
        .bind(now_ms)
        .execute(&self.pool)
        .await?;
        Ok(r.rows_affected() > 0)
    }

    /// Who holds the lease `name`, if anyone.
    pub async fn lease_holder(&self, name: &str) -> Result<Option<String>, StoreError> {
        Ok(sqlx::query_scalar("SELECT holder FROM leases WHERE name = $1").bind(name).fetch_optional(&self.pool).await?)
    }

    /// Takes the lease `name` from `gone` (a holder known to be dead) for
    /// `holder` until `ttl` from `now`; false if `gone` no longer holds it.
    pub async fn take_over_lease(
        &self,
        name: &str,
        gone: &str,
        holder: &str,
        now: DateTime<Utc>,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let until = now.timestamp_millis() + i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX / 2);
        let r = sqlx::query("UPDATE leases SET holder = $1, expires_at = $2 WHERE name = $3 AND holder = $4")
            .bind(holder)
            .bind(until)
            .bind(name)
            .bind(gone)
            .execute(&self.pool)
            .await?;
        Ok(r.rows_affected() > 0)
    }

    /// Gives up the lease `name` if `holder` has it.
    pub async fn release_lease(&self, name: &str, holder: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM leases WHERE name = $1 AND holder = $2").bind(name).bind(holder).execute(&self.pool).await?;
        Ok(())
    }
}
