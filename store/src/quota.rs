//! Tenants' quotas in the store: one row per tenant that has one, its
//! limits kept as JSON, versioned so that two administrators' changes do
//! not overwrite each other unseen. On SQLite memory keeps a copy, read
//! at every admission.

use chrono::{DateTime, Utc};
use sqlx::Row as _;
use sqlx::any::AnyRow;

use super::{Store, StoreError, parse_ts, ts};

/// A stored quota.
#[derive(Debug, Clone, PartialEq)]
pub struct QuotaRow {
    /// The tenant it limits.
    pub tenant: String,
    /// Its limits, as JSON.
    pub spec: String,
    /// Incremented on every change.
    pub version: i64,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

fn quota_row(r: &AnyRow) -> Result<QuotaRow, StoreError> {
    Ok(QuotaRow {
        tenant: r.try_get("tenant")?,
        spec: r.try_get("spec")?,
        version: r.try_get("version")?,
        updated_at: parse_ts(&r.try_get::<String, _>("updated_at")?)?,
    })
}

fn stale(tenant: &str, expected: i64, current: i64) -> StoreError {
    StoreError::Conflict(format!(
        "the quota of tenant {tenant:?} was changed concurrently: version {expected} is not current (it is {current}); read it again and retry"
    ))
}

impl Store {
    /// The quota of `tenant`, if one is set.
    pub async fn get_quota(&self, tenant: &str) -> Result<Option<QuotaRow>, StoreError> {
        if let Some(mem) = &self.mem {
            return Ok(mem.quotas.read().unwrap_or_else(|p| p.into_inner()).get(tenant).cloned());
        }
        let row = sqlx::query("SELECT tenant, spec, version, updated_at FROM quotas WHERE tenant = $1")
            .bind(tenant)
            .fetch_optional(&mut *self.conn().await?)
            .await?;
        row.as_ref().map(quota_row).transpose()
    }

    /// Sets the quota of `tenant` to `spec`, if it is at version `expected`
    /// (0: none is set). The row as stored.
    pub async fn put_quota(&self, tenant: &str, spec: &str, expected: i64, now: DateTime<Utc>) -> Result<QuotaRow, StoreError> {
        let _w = self.write_lock().await;
        let current = self.get_quota(tenant).await?.map_or(0, |q| q.version);
        if current != expected {
            return Err(stale(tenant, expected, current));
        }
        let done = if expected == 0 {
            sqlx::query("INSERT INTO quotas (tenant, spec, version, updated_at) VALUES ($1, $2, 1, $3) ON CONFLICT (tenant) DO NOTHING")
                .bind(tenant)
                .bind(spec)
                .bind(ts(now))
                .execute(&mut *self.conn().await?)
                .await?
        } else {
            sqlx::query("UPDATE quotas SET spec = $1, version = version + 1, updated_at = $2 WHERE tenant = $3 AND version = $4")
                .bind(spec)
                .bind(ts(now))
                .bind(tenant)
                .bind(expected)
                .execute(&mut *self.conn().await?)
                .await?
        };
        if done.rows_affected() == 0 {
            let now_at = self.get_quota(tenant).await?.map_or(0, |q| q.version);
            return Err(stale(tenant, expected, now_at));
        }
        let row = QuotaRow { tenant: tenant.to_owned(), spec: spec.to_owned(), version: expected + 1, updated_at: now };
        self.remember_quota(tenant, Some(row.clone()));
        Ok(row)
    }

    /// Removes the quota of `tenant` (it is then unlimited); whether there was one.
    pub async fn delete_quota(&self, tenant: &str) -> Result<bool, StoreError> {
        let _w = self.write_lock().await;
        let gone =
            sqlx::query("DELETE FROM quotas WHERE tenant = $1").bind(tenant).execute(&mut *self.conn().await?).await?.rows_affected() > 0;
        self.remember_quota(tenant, None);
        Ok(gone)
    }

    /// Keeps memory's copy of `tenant`'s quota as the database has it now.
    fn remember_quota(&self, tenant: &str, row: Option<QuotaRow>) {
        if let Some(mem) = &self.mem {
            let mut quotas = mem.quotas.write().unwrap_or_else(|p| p.into_inner());
            match row {
                Some(r) => quotas.insert(tenant.to_owned(), r),
                None => quotas.remove(tenant),
            };
        }
    }

    /// Every tenant's quota, by tenant.
    pub async fn all_quotas(&self) -> Result<Vec<QuotaRow>, StoreError> {
        let rows =
            sqlx::query("SELECT tenant, spec, version, updated_at FROM quotas ORDER BY tenant").fetch_all(&mut *self.conn().await?).await?;
        rows.iter().map(quota_row).collect()
    }
}
