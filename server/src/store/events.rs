//! The event log: one row per change of an object, written in the change's
//! own transaction and numbered in commit order (`seq`), so a watcher that
//! resumes after seq N misses nothing and sees nothing twice. Writers are
//! serialised (SQLite has one writer; on PostgreSQL the table is locked for
//! the transaction), so a seq is never seen before a smaller one commits.

use chrono::Utc;
use sqlx::{AssertSqlSafe, Row as _};
use vmaas_model::ObjectKind;

use super::objects::Row;
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
    if dialect == Dialect::Postgres {
        sqlx::query("LOCK TABLE events IN EXCLUSIVE MODE").execute(&mut **tx).await?;
    }
    let object = super::mem::api_json(row)?;
    let seq: i64 = sqlx::query(
        "INSERT INTO events (seq, kind, object_id, tenant, type, object, at) \
         SELECT COALESCE(MAX(seq), 0) + 1, $1, $2, $3, $4, $5, $6 FROM events RETURNING seq",
    )
    .bind(row.kind.as_str())
    .bind(&row.id)
    .bind(&row.tenant)
    .bind(what.as_str())
    .bind(object)
    .bind(ts(Utc::now()))
    .fetch_one(&mut **tx)
    .await?
    .try_get("seq")?;
    if seq % 1024 == 0 {
        sqlx::query("DELETE FROM events WHERE seq <= $1").bind(seq - KEPT).execute(&mut **tx).await?;
    }
    Ok(())
}

impl Store {
    /// Tells this process's watchers that events were committed.
    pub(super) fn events_changed(&self) {
        self.events.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Changes when this process commits events (other replicas' show up
    /// only in [`Self::events_after`]: poll it too).
    pub fn event_signal(&self) -> tokio::sync::watch::Receiver<u64> {
        self.events.subscribe()
    }

    /// Up to `limit` events after `after`, in order, of every tenant.
    pub async fn events_after(&self, after: i64, limit: i64) -> Result<Vec<EventRow>, StoreError> {
        let rows = sqlx::query(AssertSqlSafe(
            "SELECT seq, kind, tenant, type, object FROM events WHERE seq > $1 ORDER BY seq LIMIT $2".to_owned(),
        ))
        .bind(after)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let kind: String = r.try_get("kind")?;
                Ok(EventRow {
                    seq: r.try_get("seq")?,
                    kind: ObjectKind::parse(&kind)
                        .ok_or_else(|| StoreError::Corrupt(serde::de::Error::custom(format!("unknown event kind {kind:?}"))))?,
                    tenant: r.try_get("tenant")?,
                    kind_of_change: r.try_get("type")?,
                    object: r.try_get("object")?,
                })
            })
            .collect()
    }

    /// The last event's seq (0 when there is none).
    pub async fn last_event(&self) -> Result<i64, StoreError> {
        let n: Option<i64> = sqlx::query("SELECT MAX(seq) AS n FROM events").fetch_one(&self.pool).await?.try_get("n")?;
        Ok(n.unwrap_or(0))
    }

    /// The oldest seq still kept (watchers resuming before it missed events).
    pub async fn first_event(&self) -> Result<i64, StoreError> {
        let n: Option<i64> = sqlx::query("SELECT MIN(seq) AS n FROM events").fetch_one(&self.pool).await?.try_get("n")?;
        Ok(n.unwrap_or(0))
    }
}
