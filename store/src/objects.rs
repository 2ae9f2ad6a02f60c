//! The generic operations every kind uses: insert with references, read,
//! list, change the spec, mark for deletion, write status (the reconciler's
//! alone), remove. Reads come from memory when the store has a copy there.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use sqlx::{AssertSqlSafe, Connection as _, Row as _};
use vmaas_model::ObjectKind;

use super::events::{self, EventType};
use super::narrow::{Columns, Where};
use super::row::StatusWrite;
use super::usage;
use super::{Dialect, Scope, Store, StoreError, ts};

pub(super) use super::db_errors::refused;
pub(super) use super::row::{COLUMNS, from_row, order_by};
pub use super::row::{Filter, NewObject, Row};

/// The tenant a query is limited to, if any.
fn tenant_of(kind: ObjectKind, scope: &Scope) -> Option<&str> {
    if kind.is_tenant_scoped() { scope.tenant() } else { None }
}

fn not_found(kind: ObjectKind, id: &str) -> StoreError {
    StoreError::NotFound { kind: kind.human(), id: id.to_owned() }
}

/// Inserts `new`, in order, each with its references and its creation
/// event, within `tx`.
pub(super) async fn insert_created(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    dialect: Dialect,
    new: &[&NewObject],
) -> Result<(), StoreError> {
    for n in new {
        match dialect {
            Dialect::Postgres => super::create_pg::insert(tx, n).await?,
            Dialect::Sqlite => super::sqlite_writes::insert(tx, n).await?,
        }
    }
    Ok(())
}

/// Writes `w`'s status on its row within `tx` unless the row's version
/// moved on: whether it was written, and the row as it now is when its
/// status changed (for its event).
pub(super) async fn update_status(tx: &mut sqlx::Transaction<'_, sqlx::Any>, w: &StatusWrite) -> Result<(bool, Option<Row>), StoreError> {
    let written = w.apply(tx).await?;
    Ok((written, (written && w.changes_status()).then(|| w.written())))
}

/// Inserts the reference of role `role` from `source` to `target` within
/// `tx` (`taken`: the message should the insert find a name taken).
async fn insert_ref(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    source: &str,
    target: &str,
    role: &str,
    taken: impl FnOnce() -> String,
) -> Result<(), StoreError> {
    sqlx::query("INSERT INTO refs (source, target, role) VALUES ($1, $2, $3)")
        .bind(source)
        .bind(target)
        .bind(role)
        .execute(&mut **tx)
        .await
        .map_err(|e| refused(e, taken, || format!("{role} {target:?} does not exist")))?;
    Ok(())
}

/// Points the reference of role `role` from `source` at `target` (none: drops it).
async fn set_ref(tx: &mut sqlx::Transaction<'_, sqlx::Any>, source: &str, role: &str, target: Option<&str>) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM refs WHERE source = $1 AND role = $2").bind(source).bind(role).execute(&mut **tx).await?;
    match target {
        Some(target) => insert_ref(tx, source, target, role, String::new).await,
        None => Ok(()),
    }
}

/// A change of an object's spec: the version it is based on, the new spec,
/// the new stored state when the kind's state is in its spec, and when.
struct SpecChange<'a> {
    expected: i64,
    spec: String,
    state: Option<&'a str>,
    now: DateTime<Utc>,
}

impl Store {
    /// Records `what` for `changed` (when a row changed) in `tx`, commits,
    /// and tells this process's watchers when it recorded anything.
    async fn commit_recording(
        &self,
        mut tx: sqlx::Transaction<'_, sqlx::Any>,
        changed: Option<&Row>,
        what: EventType,
    ) -> Result<(), StoreError> {
        if let Some(row) = changed {
            events::record(&mut tx, self.dialect, row, what).await?;
        }
        tx.commit().await?;
        if changed.is_some() {
            self.events_written();
        }
        Ok(())
    }

    /// Every row of every kind, from the database (to fill memory at start-up).
    pub(super) async fn sql_all(&self) -> Result<Vec<Row>, StoreError> {
        let rows = sqlx::query(AssertSqlSafe(format!("SELECT {COLUMNS} FROM objects"))).fetch_all(&self.pool).await?;
        rows.iter().map(from_row).collect()
    }

    async fn sql_get(&self, id: &str) -> Result<Option<Row>, StoreError> {
        let row = sqlx::query(AssertSqlSafe(format!("SELECT {COLUMNS} FROM objects WHERE id = $1")))
            .bind(id)
            .fetch_optional(&mut *self.conn().await?)
            .await?;
        row.as_ref().map(from_row).transpose()
    }

    /// Re-reads object `id` into memory after a write (nothing to do without memory).
    async fn refresh(&self, id: &str) -> Result<(), StoreError> {
        if self.mem.is_none() {
            return Ok(());
        }
        let row = self.sql_get(id).await?;
        self.with_mem(|m| match row {
            Some(r) => m.put(r),
            None => m.remove(id),
        });
        Ok(())
    }

    /// Stores a new object and its references in one transaction: its name
    /// must be free, and everything it refers to must exist.
    pub async fn insert(&self, new: &NewObject) -> Result<(), StoreError> {
        self.insert_all(&[new]).await
    }

    /// Stores new objects, in order, in one transaction: all or none.
    pub async fn insert_all(&self, new: &[&NewObject]) -> Result<(), StoreError> {
        self.stage_all(new).await.committed().await
    }

    /// Hands new objects to be stored as [`Self::insert_all`] does, and
    /// returns once admission checks count them ([`Self::usage`], [`Self::vms_referring`]); they
    /// are stored once [`super::Staged::committed`] says so. On SQLite they are
    /// committed together with the others staged meanwhile (group commit).
    pub async fn stage_all(&self, new: &[&NewObject]) -> super::Staged {
        match (&self.mem, &self.commits) {
            (Some(mem), Some(commits)) => commits.stage(mem, new),
            _ => super::Staged::done(self.insert_now(new).await),
        }
    }

    /// Stores new objects, in order, in one transaction of their own (in
    /// an admission's, as [`Store::insert_admitted`] says).
    async fn insert_now(&self, new: &[&NewObject]) -> Result<(), StoreError> {
        if let Some(pinned) = &self.pinned
            && let Some(inserted) = self.insert_admitted(pinned, new).await
        {
            return inserted;
        }
        let _w = self.write_lock().await;
        let mut c = self.conn().await?;
        let mut tx = c.begin().await?;
        insert_created(&mut tx, self.dialect, new).await?;
        tx.commit().await?;
        drop(c);
        self.events_written();
        self.with_mem(|m| new.iter().for_each(|n| m.put(n.row.clone())));
        Ok(())
    }

    /// Object `id` of `kind`, if `scope` may see it.
    pub async fn get(&self, kind: ObjectKind, id: &str, scope: &Scope) -> Result<Row, StoreError> {
        if let Some(found) = self.read_mem(|m| m.visible(kind, id, scope).map(|c| c.row.clone())) {
            return found.ok_or_else(|| not_found(kind, id));
        }
        let sql = format!("SELECT {COLUMNS} FROM objects WHERE id = $1 AND kind = $2 AND ($3 IS NULL OR tenant = $3)");
        let row = sqlx::query(AssertSqlSafe(sql))
            .bind(id)
            .bind(kind.as_str())
            .bind(tenant_of(kind, scope))
            .fetch_optional(&mut *self.conn().await?)
            .await?
            .ok_or_else(|| not_found(kind, id))?;
        from_row(&row)
    }

    /// Object `id` as the API's JSON, served from memory when there is a copy.
    pub async fn get_json(&self, kind: ObjectKind, id: &str, scope: &Scope) -> Result<Arc<str>, StoreError> {
        if let Some(found) = self.read_mem(|m| m.visible(kind, id, scope).map(|c| c.json.clone())) {
            return found.ok_or_else(|| not_found(kind, id));
        }
        Ok(super::mem::api_json(&self.get(kind, id, scope).await?)?.into())
    }

    /// A page of the objects of `kind` that `scope` may see, in list order, and the total matching.
    pub async fn list(&self, kind: ObjectKind, scope: &Scope, f: &Filter) -> Result<(Vec<Row>, u64), StoreError> {
        if let Some(page) = self.read_mem(|m| m.list(kind, scope, f, |c| c.row.clone())) {
            return Ok(page);
        }
        let columns = Columns { kind: kind.as_str(), tenant: tenant_of(kind, scope), name: f.name.as_deref(), state: f.state.as_deref() };
        let cond = Where::list(columns, &f.narrow, self.dialect);
        let query = |sql: String| cond.binds.iter().fold(sqlx::query(AssertSqlSafe(sql)), |q, v| q.bind(v.as_str()));
        // One row more than the page: when it does not come, the page is
        // the last one and the total is known without counting.
        let (limit, offset) = (i64::try_from(f.limit.saturating_add(1)).unwrap_or(i64::MAX), i64::try_from(f.offset).unwrap_or(i64::MAX));
        let page = format!("LIMIT ${} OFFSET ${}", cond.binds.len() + 1, cond.binds.len() + 2);
        let cond = &cond.sql;
        let mut c = self.conn().await?;
        let mut rows = query(format!("SELECT {COLUMNS} FROM objects WHERE {cond} ORDER BY {} {page}", order_by(kind)))
            .bind(limit)
            .bind(offset)
            .fetch_all(&mut *c)
            .await?;
        let total = if (rows.len() as u64) <= f.limit && (!rows.is_empty() || f.offset == 0) {
            f.offset + rows.len() as u64
        } else {
            let n: i64 = query(format!("SELECT COUNT(*) AS n FROM objects WHERE {cond}")).fetch_one(&mut *c).await?.try_get("n")?;
            u64::try_from(n).unwrap_or(0)
        };
        rows.truncate(usize::try_from(f.limit).unwrap_or(usize::MAX));
        let items = rows.iter().map(from_row).collect::<Result<_, _>>()?;
        Ok((items, total))
    }

    /// A page of objects as the API's JSON, and the total matching.
    pub async fn list_json(&self, kind: ObjectKind, scope: &Scope, f: &Filter) -> Result<(Vec<Arc<str>>, u64), StoreError> {
        if let Some(page) = self.read_mem(|m| m.list(kind, scope, f, |c| c.json.clone())) {
            return Ok(page);
        }
        let (rows, total) = self.list(kind, scope, f).await?;
        let items = rows.iter().map(|r| super::mem::api_json(r).map(Arc::from)).collect::<Result<_, _>>()?;
        Ok((items, total))
    }

    /// How many objects of `kind` are in each `status.state`.
    pub async fn state_counts(&self, kind: ObjectKind) -> Result<std::collections::HashMap<String, u64>, StoreError> {
        if let Some(counts) = self.read_mem(|m| m.states(kind).map(|(s, n)| (s.to_owned(), n)).collect()) {
            return Ok(counts);
        }
        let rows = sqlx::query("SELECT state, COUNT(*) AS n FROM objects WHERE kind = $1 GROUP BY state")
            .bind(kind.as_str())
            .fetch_all(&mut *self.conn().await?)
            .await?;
        rows.iter().map(|r| Ok((r.try_get("state")?, u64::try_from(r.try_get::<i64, _>("n")?).unwrap_or(0)))).collect()
    }

    /// Every object of `kind`, in list order (for the reconciler).
    pub async fn all(&self, kind: ObjectKind) -> Result<Vec<Row>, StoreError> {
        Ok(self.list(kind, &Scope::All, &Filter::all()).await?.0)
    }

    /// Replaces the desired state of `current` (its spec, and its labels
    /// and annotations as `current` has them) if its version is still
    /// `expected`; returns the row with the new version.
    pub async fn update_spec(&self, current: &Row, expected: i64, spec: String, now: DateTime<Utc>) -> Result<Row, StoreError> {
        self.update_spec_and_ref(current, expected, spec, now, None, None).await
    }

    /// [`Self::update_spec`] of a kind whose state is in its spec: the
    /// stored state becomes `state` with it (a kind whose state is its
    /// status's leaves it to the reconciler's writes).
    pub async fn update_spec_and_state(
        &self,
        current: &Row,
        expected: i64,
        spec: String,
        state: &str,
        now: DateTime<Utc>,
    ) -> Result<Row, StoreError> {
        self.update_row(current, SpecChange { expected, spec, state: Some(state), now }, None, None).await
    }

    /// [`Self::update_spec`], and in the same transaction inserts `also`
    /// (an object the new spec refers to) and points the object's reference
    /// of role `role.0` at `role.1` (none: drops it). All or nothing.
    pub async fn update_spec_and_ref(
        &self,
        current: &Row,
        expected: i64,
        spec: String,
        now: DateTime<Utc>,
        role: Option<(&str, Option<&str>)>,
        also: Option<&NewObject>,
    ) -> Result<Row, StoreError> {
        self.update_row(current, SpecChange { expected, spec, state: None, now }, role, also).await
    }

    /// The update of [`Self::update_spec_and_ref`], and of the stored state
    /// when `state` is given (else a status write of the reconciler's meanwhile stands).
    async fn update_row(
        &self,
        current: &Row,
        change: SpecChange<'_>,
        role: Option<(&str, Option<&str>)>,
        also: Option<&NewObject>,
    ) -> Result<Row, StoreError> {
        let SpecChange { expected, spec, state, now } = change;
        let _w = self.write_lock().await;
        let mut c = self.conn().await?;
        let mut tx = c.begin().await?;
        if let Some(n) = also {
            insert_created(&mut tx, self.dialect, &[n]).await?;
        }
        let r = sqlx::query(
            "UPDATE objects SET spec = $1, version = version + 1, updated_at = $2, meta = $5, state = COALESCE($6, state) \
             WHERE id = $3 AND version = $4 AND deleted_at IS NULL",
        )
        .bind(&spec)
        .bind(ts(now))
        .bind(&current.id)
        .bind(expected)
        .bind(serde_json::to_string(&current.labels)?)
        .bind(state)
        .execute(&mut *tx)
        .await?;
        if r.rows_affected() == 0 {
            tx.rollback().await?;
            drop(c);
            let latest = self.sql_get(&current.id).await?.ok_or_else(|| not_found(current.kind, &current.id))?;
            if latest.deleted_at.is_some() {
                return Err(StoreError::InUse(format!("{} {:?} is being deleted", current.kind.human(), current.name)));
            }
            return Err(StoreError::stale(current.kind, &current.name, expected, latest.version));
        }
        if let Some((role, target)) = role {
            set_ref(&mut tx, &current.id, role, target).await?;
        }
        let mut out = current.clone();
        if let Some(state) = state {
            state.clone_into(&mut out.state);
        }
        out.spec = spec.into();
        out.version = expected + 1;
        out.updated_at = now;
        usage::record(&mut tx, self.dialect, Some(current), Some(&out)).await?;
        super::links::record(&mut tx, self.dialect, current, &out).await?;
        self.commit_recording(tx, Some(&out), EventType::Updated).await?;
        self.with_mem(|m| {
            also.into_iter().for_each(|n| m.put(n.row.clone()));
            m.put(out.clone());
        });
        Ok(out)
    }

    /// Marks object `id` for deletion (idempotent: the first mark stands) and
    /// returns it; the reconciler removes it once the backend has cleaned up.
    pub async fn mark_deleted(&self, kind: ObjectKind, id: &str, scope: &Scope, now: DateTime<Utc>) -> Result<Row, StoreError> {
        let _w = self.write_lock().await;
        // RETURNING: the reconciler of another replica may remove the row
        // as soon as it is marked, before it could be read back.
        let sql = format!(
            "UPDATE objects SET deleted_at = $1, version = version + 1 \
             WHERE id = $2 AND kind = $3 AND ($4 IS NULL OR tenant = $4) AND deleted_at IS NULL RETURNING {COLUMNS}"
        );
        let mut c = self.conn().await?;
        let mut tx = c.begin().await?;
        let marked = sqlx::query(AssertSqlSafe(sql))
            .bind(ts(now))
            .bind(id)
            .bind(kind.as_str())
            .bind(tenant_of(kind, scope))
            .fetch_optional(&mut *tx)
            .await?
            .map(|r| from_row(&r))
            .transpose()?;
        if let Some(m) = &marked {
            usage::record(&mut tx, self.dialect, Some(&Row { deleted_at: None, ..m.clone() }), Some(m)).await?;
        }
        self.commit_recording(tx, marked.as_ref(), EventType::Updated).await?;
        drop(c);
        self.refresh(id).await?;
        match marked {
            Some(r) => Ok(r),
            // Marked already (or not the caller's): as it is now.
            None => self.get(kind, id, scope).await,
        }
    }

    /// Writes the status derived from `seen`, unless the object changed
    /// since (a new version, or removed): the next pass observes it afresh.
    pub async fn write_status(&self, seen: &Row, status: String, state: &str, observed: String) -> Result<bool, StoreError> {
        let write = StatusWrite { seen: seen.clone(), status, state: state.to_owned(), observed };
        if let Some(commits) = &self.commits {
            return commits.write_status(write).await;
        }
        let _w = self.write_lock().await;
        let mut c = self.conn().await?;
        let mut tx = c.begin().await?;
        let before = self.status_held(&mut tx, seen).await?;
        let (written, changed) = update_status(&mut tx, &write).await?;
        if let (Some(before), Some(after)) = (&before, &changed) {
            usage::record(&mut tx, self.dialect, Some(before), Some(after)).await?;
        }
        self.commit_recording(tx, changed.as_ref(), EventType::Updated).await?;
        if written {
            let StatusWrite { status, state, observed, .. } = write;
            self.with_mem(|m| m.set_status(&seen.id, status.into(), &state, observed.into(), seen.version));
        }
        Ok(written)
    }

    /// On PostgreSQL, for a kind whose status says what it holds (images, snapshots):
    /// `seen` with its status as stored now, locked until `tx` ends.
    async fn status_held(&self, tx: &mut sqlx::Transaction<'_, sqlx::Any>, seen: &Row) -> Result<Option<Row>, StoreError> {
        if self.dialect != Dialect::Postgres || !usage::held_by_status(seen.kind) {
            return Ok(None);
        }
        let status: Option<String> = sqlx::query("SELECT status FROM objects WHERE id = $1 FOR UPDATE")
            .bind(&seen.id)
            .fetch_optional(&mut **tx)
            .await?
            .map(|r| r.try_get("status"))
            .transpose()?;
        Ok(status.map(|s| Row { status: s.into(), ..seen.clone() }))
    }

    /// Removes an object marked for deletion, for good.
    pub async fn remove(&self, id: &str) -> Result<(), StoreError> {
        let _w = self.write_lock().await;
        let mut c = self.conn().await?;
        let mut tx = c.begin().await?;
        let gone = sqlx::query(AssertSqlSafe(format!("DELETE FROM objects WHERE id = $1 AND deleted_at IS NOT NULL RETURNING {COLUMNS}")))
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?
            .map(|r| from_row(&r))
            .transpose()?;
        if let Some(g) = &gone {
            // A VM holds the host until it is gone.
            usage::record(&mut tx, self.dialect, Some(g), None).await?;
        }
        self.commit_recording(tx, gone.as_ref(), EventType::Deleted).await?;
        drop(c);
        self.refresh(id).await
    }

    /// Deletes object `id` at once, unless something refers to it: then the
    /// refusal names the referrers.
    pub async fn delete_now(&self, kind: ObjectKind, id: &str) -> Result<(), StoreError> {
        let _w = self.write_lock().await;
        let row = self.sql_get(id).await?.filter(|r| r.kind == kind).ok_or_else(|| not_found(kind, id))?;
        let in_use = |referrers: Vec<Row>| in_use(&row, &referrers);
        let referrers = self.referrers(id).await?;
        if !referrers.is_empty() {
            return Err(in_use(referrers));
        }
        let mut c = self.conn().await?;
        let mut tx = c.begin().await?;
        match sqlx::query("DELETE FROM objects WHERE id = $1").bind(id).execute(&mut *tx).await {
            Ok(_) => {
                usage::record(&mut tx, self.dialect, Some(&row), None).await?;
                self.commit_recording(tx, Some(&row), EventType::Deleted).await?;
                drop(c);
            }
            Err(e) => {
                drop(tx);
                drop(c);
                return match refused(e, String::new, String::new) {
                    StoreError::MissingReference(_) => Err(in_use(self.referrers(id).await?)),
                    other => Err(other),
                };
            }
        }
        self.refresh(id).await
    }

    /// Refuses (`InUse`, naming them) if anything refers to `row`.
    pub async fn ensure_unused(&self, row: &Row) -> Result<(), StoreError> {
        let referrers = self.referrers(&row.id).await?;
        if referrers.is_empty() { Ok(()) } else { Err(in_use(row, &referrers)) }
    }

    /// The objects that refer to object `id`.
    pub async fn referrers(&self, id: &str) -> Result<Vec<Row>, StoreError> {
        let sql = format!(
            "SELECT {} FROM objects o WHERE o.id IN (SELECT source FROM refs WHERE target = $1) ORDER BY o.created_at, o.id",
            COLUMNS.split(", ").map(|c| format!("o.{c}")).collect::<Vec<_>>().join(", ")
        );
        let rows = sqlx::query(AssertSqlSafe(sql)).bind(id).fetch_all(&mut *self.conn().await?).await?;
        rows.iter().map(from_row).collect()
    }
}

/// The refusal to delete `row`, naming what uses it, kind by kind.
fn in_use(row: &Row, referrers: &[Row]) -> StoreError {
    let mut kinds: Vec<(ObjectKind, Vec<&str>)> = Vec::new();
    for r in referrers {
        match kinds.iter_mut().find(|(k, _)| *k == r.kind) {
            Some((_, names)) => names.push(&r.name),
            None => kinds.push((r.kind, vec![&r.name])),
        }
    }
    let users: Vec<String> = kinds.iter().map(|(k, names)| format!("{} {}(s): {}", names.len(), k.human(), names.join(", "))).collect();
    StoreError::InUse(format!("{} {:?} is used by {}; delete them first", row.kind.human(), row.name, users.join("; ")))
}
