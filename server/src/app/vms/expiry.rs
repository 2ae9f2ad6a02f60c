//! A VM's end (`spec.ttl`, `spec.expires_at`) as a create sets it and a
//! PATCH moves it, under the tenant's maximum TTL (its quota's
//! `max_vm_ttl`); the reaper ([`crate::expiry`]) deletes it then.

use chrono::Utc;
use vmaas_model::vm::SpecPatch;
use vmaas_model::vm::expiry::{self, ExpiryAsk, format_ttl};
use vmaas_model::{ValidationErrors, VirtualMachineSpec};

use crate::error::ApiError;
use crate::quota;
use crate::state::AppState;

/// Sets the end of a new VM of `tenant` from what `spec` asks.
pub(super) async fn at_create(
    s: &AppState,
    tenant: &str,
    spec: &mut VirtualMachineSpec,
    errs: &mut ValidationErrors,
) -> Result<(), ApiError> {
    let max = quota::max_vm_ttl(&s.store, tenant).await?;
    let ask = ExpiryAsk { ttl: spec.ttl.as_deref(), expires_at: spec.expires_at };
    spec.expires_at = expiry::settle(&ask, Utc::now(), max, "object.spec", errs);
    Ok(())
}

/// Moves the end of a VM of `tenant` as `asked` says, if it says: a new TTL
/// from now, a new `expires_at`, or none (`"ttl": ""`, refused under a
/// maximum TTL).
pub(super) async fn on_patch(
    s: &AppState,
    tenant: &str,
    asked: &SpecPatch,
    spec: &mut VirtualMachineSpec,
    errs: &mut ValidationErrors,
) -> Result<(), ApiError> {
    if asked.ttl.is_none() && asked.expires_at.is_none() {
        return Ok(());
    }
    let max = quota::max_vm_ttl(&s.store, tenant).await?;
    if asked.ttl.as_deref() == Some("") && asked.expires_at.is_none() {
        match max {
            Some(m) => errs.push("object.spec.ttl", format!("cannot be removed: this tenant's VMs live {} at most", format_ttl(m))),
            None => (spec.ttl, spec.expires_at) = (None, None),
        }
        return Ok(());
    }
    let ask = ExpiryAsk { ttl: asked.ttl.as_deref(), expires_at: asked.expires_at };
    if let Some(at) = expiry::settle(&ask, Utc::now(), max, "object.spec", errs) {
        (spec.ttl, spec.expires_at) = (asked.ttl.clone(), Some(at));
    }
    Ok(())
}
