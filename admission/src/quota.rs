//! Quotas per tenant: limits on VMs, cores, memory, disk and external IPs
//! that administrators set, checked on every create and change that takes
//! more, in an admission (so two requests cannot both take the last of a
//! quota), against what the tenant holds as the store counts it
//! ([`vmaas_store::usage`]). Every VM counts, running or stopped (a stopped VM may
//! start at any time); disk is the VMs' disks plus the tenant's volumes.
//! A quota set below what a tenant holds refuses only what would take more.
//! `external_ips` counts every address a tenant holds of the shared pool:
//! its external IPs and its load balancers; `disk` counts its VMs' disks,
//! its volumes and its imported images' files (an import is refused once
//! the tenant holds all of its `disk`; one under way may go past it by at
//! most its own size).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use vmaas_model::{Quantity, ValidationErrors};

use vmaas_store::quota::QuotaRow;
use vmaas_store::{Store, StoreError};

use crate::AdmissionError;

/// A tenant's limits; an absent one is unlimited.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct QuotaLimits {
    /// Virtual machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtual_machines: Option<u64>,
    /// Virtual CPU cores over all VMs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<u64>,
    /// Memory over all VMs, e.g. `16Gi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub memory: Option<Quantity>,
    /// Disk over all VMs' disks, the tenant's volumes and imported images, e.g. `500Gi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub disk: Option<Quantity>,
    /// Addresses of the shared pool: external IPs and load balancers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_ips: Option<u64>,
    /// The longest a VM may live, e.g. `8h`: every VM of the tenant then
    /// expires, after this at the latest (one created without a TTL gets
    /// this one). Existing VMs keep their end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_vm_ttl: Option<String>,
}

impl QuotaLimits {
    /// Checks the quantities are byte counts; errors name `at.FIELD`.
    pub fn check(&self, at: &str) -> Result<(), ValidationErrors> {
        let mut errs = ValidationErrors::default();
        for (name, q) in [("memory", &self.memory), ("disk", &self.disk)] {
            if let Some(q) = q
                && q.to_units_ceil().is_none()
            {
                errs.push(format!("{at}.{name}"), format!("{q} is not a size in bytes (e.g. 16Gi)"));
            }
        }
        if let Some(Err(e)) = self.max_vm_ttl.as_deref().map(vmaas_model::vm::expiry::parse_ttl) {
            errs.push(format!("{at}.max_vm_ttl"), e.to_string());
        }
        if errs.is_empty() { Ok(()) } else { Err(errs) }
    }

    /// The longest a VM may live, if limited.
    pub fn max_ttl(&self) -> Option<chrono::Duration> {
        self.max_vm_ttl.as_deref().and_then(|t| vmaas_model::vm::expiry::parse_ttl(t).ok())
    }

    /// The limits as amounts (`u64::MAX` where unlimited).
    fn amounts(&self) -> Amounts {
        let bytes = |q: &Option<Quantity>| q.as_ref().map_or(u64::MAX, |q| q.to_units_ceil().unwrap_or(u64::MAX));
        Amounts {
            virtual_machines: self.virtual_machines.unwrap_or(u64::MAX),
            cores: self.cores.unwrap_or(u64::MAX),
            memory_bytes: bytes(&self.memory),
            disk_bytes: bytes(&self.disk),
            external_ips: self.external_ips.unwrap_or(u64::MAX),
        }
    }
}

pub use vmaas_store::usage::Amounts;

/// What every tenant holds now (a tenant holding nothing is absent).
pub async fn usage_by_tenant(store: &Store) -> Result<HashMap<String, Amounts>, StoreError> {
    store.all_usage().await
}

/// What `tenant` holds now: its counters, not a recount.
pub async fn usage(store: &Store, tenant: &str) -> Result<Amounts, StoreError> {
    store.usage(tenant).await
}

/// The limits a stored quota holds.
pub fn parsed(row: &QuotaRow) -> Result<QuotaLimits, AdmissionError> {
    serde_json::from_str(&row.spec)
        .map_err(|e| AdmissionError::Corrupt { what: format!("quota of tenant {:?}", row.tenant), reason: e.to_string() })
}

/// The quota of `tenant` and its version, if one is set.
pub async fn limits(store: &Store, tenant: &str) -> Result<Option<(QuotaLimits, i64)>, AdmissionError> {
    let Some(row) = store.get_quota(tenant).await? else { return Ok(None) };
    Ok(Some((parsed(&row)?, row.version)))
}

/// The longest a VM of `tenant` may live, if its quota limits it.
pub async fn max_vm_ttl(store: &Store, tenant: &str) -> Result<Option<chrono::Duration>, AdmissionError> {
    Ok(limits(store, tenant).await?.and_then(|(l, _)| l.max_ttl()))
}

/// Refuses `asked` (more than `tenant` holds now) if it goes beyond the
/// tenant's quota: RESOURCE_EXHAUSTED naming the limit. Call it under the
/// admission lock and store before releasing it.
pub async fn enforce(store: &Store, tenant: &str, asked: Amounts) -> Result<(), AdmissionError> {
    if asked.is_zero() {
        return Ok(());
    }
    let Some((limits, _)) = limits(store, tenant).await? else { return Ok(()) };
    check(tenant, &limits, usage(store, tenant).await?, asked)
}

/// Refuses (429 naming `quota.disk`) what adds to `tenant`'s disk use
/// by an amount not known yet (`what`, e.g. an image import) once the
/// tenant holds all of its `disk` quota.
pub async fn require_disk_left(store: &Store, tenant: &str, what: &str) -> Result<(), AdmissionError> {
    let Some((limits, _)) = limits(store, tenant).await? else { return Ok(()) };
    let Some(limit) = limits.disk.as_ref().and_then(Quantity::to_units_ceil) else { return Ok(()) };
    let held = usage(store, tenant).await?.disk_bytes;
    if held < limit {
        return Ok(());
    }
    Err(AdmissionError::exhausted(
        "quota.disk",
        format!(
            "tenant {tenant:?} may have {} disk; its VMs, volumes and images hold {}: {what} needs room (delete something first)",
            show(limit, true),
            show(held, true)
        ),
    ))
}

/// Every quota's limits and usage, for `/metrics`: `(tenant, resource, limit, usage)`.
pub async fn figures(store: &Store) -> Result<Vec<(String, &'static str, Option<u64>, u64)>, AdmissionError> {
    let used = usage_by_tenant(store).await?;
    let mut out = Vec::new();
    for row in store.all_quotas().await? {
        let held = used.get(&row.tenant).copied().unwrap_or_default();
        for ((resource, limit, _), (_, held, _)) in parsed(&row)?.amounts().named().into_iter().zip(held.named()) {
            out.push((row.tenant.clone(), resource, (limit != u64::MAX).then_some(limit), held));
        }
    }
    Ok(out)
}

fn show(v: u64, bytes: bool) -> String {
    if bytes { Quantity::from_bytes(v).to_string() } else { v.to_string() }
}

/// Whether `asked` fits beside `used` within `limits`.
pub fn check(tenant: &str, limits: &QuotaLimits, used: Amounts, asked: Amounts) -> Result<(), AdmissionError> {
    let cap = limits.amounts().named();
    for (((name, used, bytes), (_, asked, _)), (_, limit, _)) in used.named().into_iter().zip(asked.named()).zip(cap) {
        if asked > 0 && used.saturating_add(asked) > limit {
            return Err(AdmissionError::exhausted(
                format!("quota.{name}"),
                format!(
                    "tenant {tenant:?} may have {} {name}; it holds {} and this asks for {} more",
                    show(limit, bytes),
                    show(used, bytes),
                    show(asked, bytes)
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(json: &str) -> QuotaLimits {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn the_first_limit_passed_is_named_with_what_is_held() {
        let l = limits(r#"{"virtual_machines": 2, "cores": 4, "memory": "1Gi"}"#);
        let vm = Amounts { virtual_machines: 1, cores: 2, memory_bytes: 512 << 20, ..Amounts::default() };
        assert!(check("acme", &l, Amounts::default(), vm).is_ok());
        let AdmissionError::Exhausted { field, message } = check("acme", &l, vm, Amounts { cores: 3, ..vm }).unwrap_err() else { panic!() };
        assert_eq!(field, "quota.cores");
        assert!(message.contains("may have 4 cores; it holds 2 and this asks for 3 more"), "{message}");
        let AdmissionError::Exhausted { field, message } = check("acme", &l, vm, Amounts { memory_bytes: 600 << 20, ..vm }).unwrap_err()
        else {
            panic!()
        };
        assert_eq!(field, "quota.memory");
        assert!(message.contains("1Gi"), "{message}");
        assert!(check("acme", &l, Amounts { virtual_machines: 9, ..vm }, Amounts::external_ip()).is_ok(), "unlimited");
    }

    #[test]
    fn a_quota_below_what_is_held_refuses_only_more() {
        let l = limits(r#"{"cores": 1}"#);
        let held = Amounts { cores: 8, ..Amounts::default() };
        assert!(check("acme", &l, held, Amounts { disk_bytes: 1, ..Amounts::default() }).is_ok());
        assert!(check("acme", &l, held, Amounts { cores: 1, ..Amounts::default() }).is_err());
    }

    #[test]
    fn unknown_fields_and_bad_sizes_are_refused() {
        assert!(serde_json::from_str::<QuotaLimits>(r#"{"vms": 2}"#).is_err());
        let l = limits(r#"{"memory": "-1Gi"}"#);
        let e = l.check("object.spec").unwrap_err();
        assert_eq!(e.0[0].field, "object.spec.memory");
    }
}
