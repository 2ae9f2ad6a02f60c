//! A stored object as a row, as every part of the store reads it: the
//! row itself, a new one with its references, a list's filter, and the
//! columns and decoding of a query's answer. The operations on rows are in
//! [`super::objects`]; this module depends on none of the store's parts.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use sqlx::Row as _;
use sqlx::any::{AnyArguments, AnyRow};
use sqlx::query::Query;
use vmaas_model::query::Narrowing;
use vmaas_model::{Labels, Metadata, ObjectKind};

use super::statement::Statement;
use super::{StoreError, parse_ts, ts};

/// One stored object, its documents kept as JSON text.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Server-assigned id.
    pub id: String,
    /// Its kind.
    pub kind: ObjectKind,
    /// Owner; empty for global kinds.
    pub tenant: String,
    /// Unique per kind and tenant.
    pub name: String,
    /// The desired state, as the kind stores it.
    pub spec: Arc<str>,
    /// The last status the reconciler wrote.
    pub status: Arc<str>,
    /// `status.state`, for filtering.
    pub state: String,
    /// What the reconciler remembers of what the backend acted on.
    pub observed: Arc<str>,
    /// The version the status was derived from.
    pub observed_version: i64,
    /// Who created it.
    pub creators: Vec<String>,
    /// Incremented on every change of the desired state (spec, requests, deletion).
    pub version: i64,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last change of the desired state.
    pub updated_at: DateTime<Utc>,
    /// Set once deletion was requested.
    pub deleted_at: Option<DateTime<Utc>>,
    /// Labels and annotations.
    pub labels: Labels,
}

impl Row {
    /// The API's metadata of the object.
    pub fn metadata(&self) -> Metadata {
        Metadata::new(&self.name, &self.tenant, (self.created_at, self.deleted_at), &self.creators, self.version, &self.labels)
    }
}

/// A new object and what it refers to.
#[derive(Debug, Clone)]
pub struct NewObject {
    /// The row to insert (version 1).
    pub row: Row,
    /// `(target id, role)`: the objects it refers to, which must exist.
    pub refs: Vec<(String, String)>,
}

impl NewObject {
    /// Binds the row's values in `st`, in [`COLUMNS`]' order (its deletion
    /// mark `NULL`): the `VALUES` row that takes them.
    pub(super) fn bind_values(&self, st: &mut Statement) -> Result<String, StoreError> {
        let r = &self.row;
        let first = st.next();
        for v in [r.id.as_str(), r.kind.as_str(), r.tenant.as_str(), r.name.as_str(), &*r.spec, &*r.status, r.state.as_str(), &*r.observed]
        {
            st.text(v);
        }
        st.int(r.observed_version);
        st.text(serde_json::to_string(&r.creators)?);
        st.int(r.version);
        st.text(ts(r.created_at));
        st.text(ts(r.updated_at));
        st.text(serde_json::to_string(&r.labels)?);
        let p = |i: usize| format!("${}", first + i);
        Ok(format!("({}, NULL, {})", (0..13).map(p).collect::<Vec<_>>().join(", "), p(13)))
    }

    /// Binds its references in `st`, `(source, target, role)` each: the
    /// `VALUES` rows of an insert into `refs` that take them (none: no rows).
    pub(super) fn bind_refs(&self, st: &mut Statement) -> String {
        let rows = st.rows(self.refs.len(), 3);
        for (target, role) in &self.refs {
            st.text(self.row.id.as_str());
            st.text(&**target);
            st.text(&**role);
        }
        rows
    }
}

/// Filters and paging for lists.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Exact name.
    pub name: Option<String>,
    /// Exact `status.state`.
    pub state: Option<String>,
    /// What a CEL filter says of the id, name, creation time and labels.
    pub narrow: Narrowing,
    /// Skip this many.
    pub offset: u64,
    /// Return at most this many.
    pub limit: u64,
}

impl Filter {
    /// Everything.
    pub fn all() -> Self {
        Self { limit: u64::MAX, ..Default::default() }
    }
}

pub(super) const COLUMNS: &str =
    "id, kind, tenant, name, spec, status, state, observed, observed_version, creators, version, created_at, updated_at, deleted_at, meta";

/// The list order of a kind: global kinds by name, tenants' by creation.
pub(super) fn order_by(kind: ObjectKind) -> &'static str {
    if kind.is_tenant_scoped() { "created_at, id" } else { "name, id" }
}

pub(super) fn from_row(r: &AnyRow) -> Result<Row, StoreError> {
    let kind: String = r.try_get("kind")?;
    let kind = ObjectKind::parse(&kind).ok_or_else(|| StoreError::Corrupt(serde::de::Error::custom(format!("unknown kind {kind:?}"))))?;
    let deleted: Option<String> = r.try_get("deleted_at")?;
    Ok(Row {
        id: r.try_get("id")?,
        kind,
        tenant: r.try_get("tenant")?,
        name: r.try_get("name")?,
        spec: r.try_get::<String, _>("spec")?.into(),
        status: r.try_get::<String, _>("status")?.into(),
        state: r.try_get("state")?,
        observed: r.try_get::<String, _>("observed")?.into(),
        observed_version: r.try_get("observed_version")?,
        creators: serde_json::from_str(&r.try_get::<String, _>("creators")?)?,
        version: r.try_get("version")?,
        created_at: parse_ts(&r.try_get::<String, _>("created_at")?)?,
        updated_at: parse_ts(&r.try_get::<String, _>("updated_at")?)?,
        deleted_at: deleted.as_deref().map(parse_ts).transpose()?,
        labels: serde_json::from_str(&r.try_get::<String, _>("meta")?)?,
    })
}

/// A status seen on a row at its version, to write unless the row changed since.
#[derive(Debug, Clone)]
pub(super) struct StatusWrite {
    pub(super) seen: Row,
    pub(super) status: String,
    pub(super) state: String,
    pub(super) observed: String,
}

impl StatusWrite {
    /// The update that writes it unless the row's version moved on, its
    /// values `$1` to `$5` ([`Self::bind`]).
    pub(super) const UPDATE: &'static str =
        "UPDATE objects SET status = $1, state = $2, observed = $3, observed_version = $4 WHERE id = $5 AND version = $4";

    /// `q` with its values bound, `$1` to `$5`, as [`Self::UPDATE`] takes them.
    pub(super) fn bind<'q>(&self, q: Query<'q, sqlx::Any, AnyArguments>) -> Query<'q, sqlx::Any, AnyArguments> {
        q.bind(self.status.clone()).bind(self.state.clone()).bind(self.observed.clone()).bind(self.seen.version).bind(self.seen.id.clone())
    }

    /// Runs [`Self::UPDATE`] alone within `tx`: whether it wrote.
    pub(super) async fn apply(&self, tx: &mut sqlx::Transaction<'_, sqlx::Any>) -> Result<bool, super::StoreError> {
        Ok(self.bind(sqlx::query(Self::UPDATE)).execute(&mut **tx).await?.rows_affected() > 0)
    }

    /// Whether it changes the status (not only the version it was derived from).
    pub(super) fn changes_status(&self) -> bool {
        *self.seen.status != *self.status
    }

    /// The row once it is written.
    pub(super) fn written(&self) -> Row {
        Row { status: self.status.as_str().into(), state: self.state.clone(), ..self.seen.clone() }
    }
}
