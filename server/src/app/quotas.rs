//! Quotas: a tenant's limits (set by administrators) and what it holds
//! against them. A tenant reads its own; another tenant's is 404 to it.

use chrono::Utc;
use serde::{Deserialize, Serialize};
use tracing::info;
use vmaas_model::Quantity;

use crate::auth::Caller;
use crate::error::ApiError;
use crate::quota::{self, Amounts, QuotaLimits};
use crate::state::AppState;
use crate::store::StoreError;

/// A tenant's quota and usage.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Quota {
    /// The tenant.
    pub tenant: String,
    /// The quota's version (0 while none is set).
    pub metadata: QuotaMetadata,
    /// The limits; an absent one is unlimited.
    pub spec: QuotaLimits,
    /// What the tenant holds.
    pub status: QuotaStatus,
}

/// Version of a quota.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct QuotaMetadata {
    /// Incremented on every change; send it back to refuse lost updates.
    #[serde(default)]
    pub version: i64,
}

/// What a tenant holds against its quota.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct QuotaStatus {
    /// VMs, cores, memory, disk and external IPs held now.
    pub usage: QuotaUsage,
}

/// Amounts held, in the limits' units.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct QuotaUsage {
    /// Virtual machines (running or stopped).
    pub virtual_machines: u64,
    /// Cores of all VMs.
    pub cores: u64,
    /// Memory of all VMs.
    #[schema(value_type = String)]
    pub memory: Quantity,
    /// VMs' disks, volumes and imported images' files.
    #[schema(value_type = String)]
    pub disk: Quantity,
    /// Addresses of the shared pool: external IPs and load balancers.
    pub external_ips: u64,
}

impl From<Amounts> for QuotaUsage {
    fn from(a: Amounts) -> Self {
        Self {
            virtual_machines: a.virtual_machines,
            cores: a.cores,
            memory: Quantity::from_bytes(a.memory_bytes),
            disk: Quantity::from_bytes(a.disk_bytes),
            external_ips: a.external_ips,
        }
    }
}

/// A quota to set.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetQuota {
    /// Expected version; a stale one gets 409.
    #[serde(default)]
    pub metadata: Option<QuotaMetadata>,
    /// The limits; an absent one is unlimited.
    pub spec: QuotaLimits,
}

/// A tenant name in a path: what tokens carry (no `/`, at most 253 bytes).
fn checked_tenant(name: &str) -> Result<(), ApiError> {
    if name.is_empty() || name.len() > 253 || name.chars().any(|c| c.is_control() || c == '/') {
        return Err(ApiError::field("name", format!("{name:?} is not a tenant name")));
    }
    Ok(())
}

/// A tenant's quota as the API shows it.
fn shown(tenant: &str, spec: QuotaLimits, version: i64, usage: Amounts) -> Quota {
    Quota { tenant: tenant.to_owned(), metadata: QuotaMetadata { version }, spec, status: QuotaStatus { usage: usage.into() } }
}

/// The quota of `tenant` with its usage.
async fn quota_of(s: &AppState, tenant: &str) -> Result<Quota, ApiError> {
    let (spec, version) = quota::limits(&s.store, tenant).await?.unwrap_or_default();
    Ok(shown(tenant, spec, version, quota::usage(&s.store, tenant).await?))
}

/// The quota of tenant `name` and its usage (administrators: any tenant's; a tenant: its own).
pub(crate) async fn read(s: &AppState, caller: &Caller, name: &str) -> Result<Quota, ApiError> {
    checked_tenant(name)?;
    if !caller.is_admin() && caller.tenant != name {
        return Err(StoreError::NotFound { kind: "quota", id: name.to_owned() }.into());
    }
    quota_of(s, name).await
}

/// Sets tenant `name`'s quota (administrators). Limits below what the
/// tenant holds refuse only what would take more.
pub(crate) async fn set(s: &AppState, caller: &Caller, name: &str, req: SetQuota) -> Result<Quota, ApiError> {
    caller.require_admin("set quotas")?;
    checked_tenant(name)?;
    req.spec.check("object.spec").map_err(ApiError::invalid)?;
    let current = s.store.get_quota(name).await?.map_or(0, |q| q.version);
    let expected = req.metadata.map_or(current, |m| m.version);
    let spec = serde_json::to_string(&req.spec).map_err(ApiError::internal)?;
    // Under the admission lock: no create is admitted against the old limits meanwhile.
    let adm = s.admit().await?;
    adm.state().store.put_quota(name, &spec, expected, Utc::now()).await?;
    adm.commit().await?;
    info!(tenant = %name, quota = %spec, by = %caller.subject, "quota set");
    quota_of(s, name).await
}

/// Removes tenant `name`'s quota: it is unlimited again (administrators).
pub(crate) async fn clear(s: &AppState, caller: &Caller, name: &str) -> Result<Quota, ApiError> {
    caller.require_admin("remove quotas")?;
    checked_tenant(name)?;
    if s.store.delete_quota(name).await? {
        info!(tenant = %name, by = %caller.subject, "quota removed");
    }
    quota_of(s, name).await
}

/// Every quota set, with usage (administrators).
pub(crate) async fn list(s: &AppState, caller: &Caller) -> Result<Vec<Quota>, ApiError> {
    caller.require_admin("list quotas")?;
    let used = quota::usage_by_tenant(&s.store).await?;
    let mut items = Vec::new();
    for row in s.store.all_quotas().await? {
        let usage = used.get(&row.tenant).copied().unwrap_or_default();
        items.push(shown(&row.tenant, quota::parsed(&row)?, row.version, usage));
    }
    Ok(items)
}
