//! The event log: one row per change of an object, written in the change's
//! own transaction and numbered in commit order (`seq`), so a watcher that
//! resumes after seq N misses nothing and sees nothing twice.
//!
//! - On SQLite the one writer numbers each event as it writes it.
//! - On PostgreSQL several replicas write at once and nobody locks the log:
//!   a change writes its event unnumbered into `event_queue`, and once it
//!   is committed, a numbering step moves the queue's committed events into
//!   `events`, numbered after the last one. One replica numbers at a time
//!   (an advisory lock, tried and never waited for, held only while it
//!   numbers), so a seq is never seen before a smaller one. Writers number
//!   after they commit, and readers before they read, so an event whose
//!   writer died before numbering it is numbered by the next reader.

use chrono::Utc;
use sqlx::{AssertSqlSafe, Row as _};
use vmaas_model::ObjectKind;

use super::row::Row;
use super::{Dialect, Store, StoreError, ts};

/// Rows kept: older ones are trimmed as new ones come.
pub const KEPT: i64 = 100_000;

/// What happened to the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// It was made.
    Created,
    /// Its spec, status or deletion mark changed.
    Updated,
    /// It is gone.
    Deleted,
}

impl EventType {
    /// OSAC's name, e.g. `EVENT_TYPE_OBJECT_CREATED`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "EVENT_TYPE_OBJECT_CREATED",
            Self::Updated => "EVENT_TYPE_OBJECT_UPDATED",
            Self::Deleted => "EVENT_TYPE_OBJECT_DELETED",
        }
    }
}

/// One stored event.
#[derive(Debug, Clone)]
pub struct EventRow {
    /// Its place in commit order.
    pub seq: i64,
    /// The object's kind.
    pub kind: ObjectKind,
    /// The object's id.
    pub object_id: String,
    /// The object's tenant (empty for global kinds).
    pub tenant: String,
    /// `EVENT_TYPE_OBJECT_*`.
    pub kind_of_change: String,
    /// The object as the API showed it then.
    pub object: String,
}

impl EventRow {
    /// OSAC's `Event` JSON: `{"id", "type", "<kind>": object}`.
    pub fn to_json(&self) -> String {
        format!("{{\"id\":\"{}\",\"type\":\"{}\",\"{}\":{}}}", self.seq, self.kind_of_change, payload_field(self.kind), self.object)
    }
}

/// The field of OSAC's `Event` that holds an object of `kind`.
pub fn payload_field(kind: ObjectKind) -> &'static str {
    match kind {
        ObjectKind::Template => "virtual_machine_template",
        other => other.as_str(),
    }
}

/// Records that `row` (as it is now) was created, updated or deleted, in `tx`.
pub(super) async fn record(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    dialect: Dialect,
    row: &Row,
    what: EventType,
) -> Result<(), StoreError> {
    let object = super::mem::api_json(row)?;
    if dialect == Dialect::Postgres {
        return queue(tx, row, what, object).await;
    }
    let insert = record_sql(1);
    let seq: i64 = bind_event(sqlx::query(AssertSqlSafe(insert)), row, what, object).fetch_one(&mut **tx).await?.try_get("seq")?;
    trim(tx, seq).await
}

/// The insert of an event numbered after the last (SQLite), returning
/// its `seq`, its values' placeholders from `$first` in [`bind_event`]'s order.
pub(super) fn record_sql(first: usize) -> String {
    numbered_insert(first, "")
}

/// [`record_sql`], inserting only if the statement before it in the same
/// query changed a row (`changes()`): no row is returned otherwise.
pub(super) fn record_if_written_sql(first: usize) -> String {
    numbered_insert(first, " WHERE changes() > 0")
}

/// The last seq is read by a subquery of its own: SQLite answers a lone
/// `MAX` of the key from the index's end, but an aggregate with anything
/// after it (a `HAVING`) by reading every row kept, 100 000 of them.
fn numbered_insert(first: usize, only: &str) -> String {
    let [k, o, t, ty, obj, at] = std::array::from_fn(|i| first + i);
    format!(
        "INSERT INTO events (seq, kind, object_id, tenant, type, object, at) \
         SELECT (SELECT COALESCE(MAX(seq), 0) + 1 FROM events), ${k}, ${o}, ${t}, ${ty}, ${obj}, ${at}{only} RETURNING seq"
    )
}

/// After the event numbered `seq` was recorded (SQLite): every 1024th
/// drops those more than [`KEPT`] behind.
pub(super) async fn trim(tx: &mut sqlx::Transaction<'_, sqlx::Any>, seq: i64) -> Result<(), StoreError> {
    if seq % 1024 == 0 {
        sqlx::query("DELETE FROM events WHERE seq <= $1").bind(seq - KEPT).execute(&mut **tx).await?;
    }
    Ok(())
}

/// The advisory lock of the numbering step (any number, the same in every replica).
const NUMBERING_LOCK: i64 = 0x766d_6161_735f_6e6f;

/// Events queued by this process so far: orders the events of one
/// transaction among themselves should the database's clock not tick
/// between them.
static QUEUED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Queues the event of `row` unnumbered in `tx` (PostgreSQL). Its order
/// among the queue is the database's clock when written: a change that
/// waited for another's row lock writes its event after that one committed.
async fn queue(tx: &mut sqlx::Transaction<'_, sqlx::Any>, row: &Row, what: EventType, object: String) -> Result<(), StoreError> {
    let insert = sqlx::query(AssertSqlSafe(queue_sql(1)));
    bind_event(insert, row, what, object).bind(queue_id()).execute(&mut **tx).await?;
    Ok(())
}

/// The insert into the queue with its placeholders numbered from `$first`:
/// kind, object id, tenant, type, object, time, then the id ([`queue_id`]).
pub(super) fn queue_sql(first: usize) -> String {
    let [k, o, t, ty, obj, at, id] = std::array::from_fn(|i| first + i);
    format!(
        "INSERT INTO event_queue (ord, id, kind, object_id, tenant, type, object, at) \
         VALUES ((extract(epoch FROM clock_timestamp()) * 1000000)::bigint, ${id}, ${k}, ${o}, ${t}, ${ty}, ${obj}, ${at})"
    )
}

/// A queued event's id: this process's count first, which orders the
/// events of one transaction should the database's clock not tick between them.
pub(super) fn queue_id() -> String {
    let n = QUEUED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{n:020}-{}", uuid::Uuid::new_v4())
}

/// Binds the event of `row` to `$1`…`$6` of `q`: kind, object id, tenant, type, object, time.
pub(super) fn bind_event<'q>(
    q: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>,
    row: &Row,
    what: EventType,
    object: String,
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments> {
    q.bind(row.kind.as_str()).bind(row.id.clone()).bind(row.tenant.clone()).bind(what.as_str()).bind(object).bind(ts(Utc::now()))
}

/// Numbers the committed events of the queue after the last numbered one,
/// unless another replica is numbering now (it takes these too, or the
/// next reader does). PostgreSQL only.
async fn number_queued(pool: &sqlx::AnyPool) -> Result<(), StoreError> {
    let mut tx = pool.begin().await?;
    // A replica frozen while numbering holds the others' numbering no longer than this.
    sqlx::query("SET LOCAL idle_in_transaction_session_timeout = '800ms'").execute(&mut *tx).await?;
    let got: bool =
        sqlx::query("SELECT pg_try_advisory_xact_lock($1) AS got").bind(NUMBERING_LOCK).fetch_one(&mut *tx).await?.try_get("got")?;
    if !got {
        return Ok(());
    }
    let numbered: Vec<i64> = sqlx::query(
        "WITH moved AS (DELETE FROM event_queue RETURNING id, ord, kind, object_id, tenant, type, object, at), \
              base AS (SELECT COALESCE(MAX(seq), 0) AS m FROM events) \
         INSERT INTO events (seq, kind, object_id, tenant, type, object, at) \
         SELECT base.m + row_number() OVER (ORDER BY moved.ord, moved.id), kind, object_id, tenant, type, object, at \
         FROM moved, base RETURNING seq",
    )
    .fetch_all(&mut *tx)
    .await?
    .iter()
    .map(|r| r.try_get::<i64, _>("seq"))
    .collect::<Result<_, _>>()?;
    if let Some(trim) = numbered.iter().find(|seq| *seq % 1024 == 0) {
        sqlx::query("DELETE FROM events WHERE seq <= $1").bind(trim - KEPT).execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// This process's numbering task (PostgreSQL): writers ask it to number
/// and go on; asks made while it numbers are served by one more pass.
#[derive(Clone)]
pub(super) struct Numberer(tokio::sync::mpsc::Sender<()>);

impl Numberer {
    /// Starts the task numbering `pool`'s queue; it ends when the last
    /// [`Numberer`] is dropped.
    pub(super) fn start(pool: sqlx::AnyPool) -> Self {
        let (tx, mut rx) = tokio::sync::mpsc::channel(1);
        tokio::spawn(async move {
            while rx.recv().await.is_some() {
                if let Err(e) = number_queued(&pool).await {
                    tracing::debug!(error = %e, "numbering events (the next reader will)");
                }
            }
        });
        Self(tx)
    }

    /// Asks for a pass (one already asked for serves this ask too).
    fn ask(&self) {
        let _ = self.0.try_send(());
    }
}

impl Store {
    /// After a commit that wrote events: has them numbered (PostgreSQL)
    /// and tells this process's watchers. The writer does not wait for the
    /// numbering: its events are numbered by the next pass of this
    /// process's numbering task, or by the next reader, whichever comes
    /// first. In an admission nothing is committed yet, and nobody is told:
    /// its group's commit tells them once (a watcher woken before would
    /// only read, and number, nothing).
    pub(super) fn events_written(&self) {
        if self.pinned.is_some() {
            return;
        }
        if let Some(n) = &self.numberer {
            n.ask();
        }
        self.events_changed();
    }

    /// Tells this process's watchers that events were committed.
    pub(super) fn events_changed(&self) {
        self.events.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Changes when this process commits events (other replicas' show up
    /// only in [`Self::events_after`]: poll it too).
    pub fn event_signal(&self) -> tokio::sync::watch::Receiver<u64> {
        self.events.subscribe()
    }

    /// Held while the log is read when memory mirrors the database: a
    /// write commits its event and then updates memory, both under the
    /// write lock, so a read of the log between the two would find an
    /// event whose change a read of the object does not show yet (a caller
    /// reading the object and then watching for its next event would wait
    /// for a change it already missed).
    async fn settled(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        self.write_lock().await
    }

    /// Up to `limit` events after `after`, in order, of every tenant. With
    /// memory mirroring the database, only events whose change reads
    /// already show (see [`Self::settled`]).
    pub async fn events_after(&self, after: i64, limit: i64) -> Result<Vec<EventRow>, StoreError> {
        if self.dialect == Dialect::Postgres {
            number_queued(&self.pool).await?;
        }
        let _settled = self.settled().await;
        let rows = sqlx::query(AssertSqlSafe(
            "SELECT seq, kind, object_id, tenant, type, object FROM events WHERE seq > $1 ORDER BY seq LIMIT $2".to_owned(),
        ))
        .bind(after)
        .bind(limit)
        .fetch_all(&mut *self.conn().await?)
        .await?;
        rows.iter()
            .map(|r| {
                let kind: String = r.try_get("kind")?;
                Ok(EventRow {
                    seq: r.try_get("seq")?,
                    kind: ObjectKind::parse(&kind)
                        .ok_or_else(|| StoreError::Corrupt(serde::de::Error::custom(format!("unknown event kind {kind:?}"))))?,
                    object_id: r.try_get("object_id")?,
                    tenant: r.try_get("tenant")?,
                    kind_of_change: r.try_get("type")?,
                    object: r.try_get("object")?,
                })
            })
            .collect()
    }

    /// The last event's seq (0 when there is none): with memory mirroring
    /// the database, the last whose change reads already show, so a caller
    /// that watches from here after reading an object misses none of its
    /// changes (see [`Self::settled`]).
    pub async fn last_event(&self) -> Result<i64, StoreError> {
        let _settled = self.settled().await;
        let n: Option<i64> = sqlx::query("SELECT MAX(seq) AS n FROM events").fetch_one(&mut *self.conn().await?).await?.try_get("n")?;
        Ok(n.unwrap_or(0))
    }

    /// The oldest seq still kept (watchers resuming before it missed events).
    pub async fn first_event(&self) -> Result<i64, StoreError> {
        let n: Option<i64> = sqlx::query("SELECT MIN(seq) AS n FROM events").fetch_one(&mut *self.conn().await?).await?.try_get("n")?;
        Ok(n.unwrap_or(0))
    }
}
