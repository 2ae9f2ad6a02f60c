//! Live migration: an administrator moves a running VM to another host
//! without stopping its guest. The VM is MIGRATING, then READY again where
//! it landed.

use serde::Deserialize;
use tracing::info;
use vmaas_model::{ConditionStatus, ConditionType, PowerState};

use crate::app::scope::scope;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;
use crate::store::VmRecord;

/// What a migration asks for.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MigrateRequest {
    /// The node (host) to move to; none: the backend's scheduler chooses.
    #[serde(default)]
    pub target_node: Option<String>,
}

/// A node name: a DNS subdomain (lowercase letters, digits, `-` and `.`).
fn check_node(node: &str) -> Result<(), ApiError> {
    let ok = !node.is_empty()
        && node.len() <= 253
        && node.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && node.starts_with(|c: char| c.is_ascii_alphanumeric())
        && node.ends_with(|c: char| c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(ApiError::field(
            "target_node",
            format!("{node:?} is not a node name (a DNS subdomain: lowercase letters, digits, '-' and '.')"),
        ))
    }
}

/// Migrates the running VM `id` (administrators only).
pub(crate) async fn migrate(s: &AppState, caller: &Caller, id: &str, req: MigrateRequest) -> Result<VmRecord, ApiError> {
    caller.require_admin("migrate virtual machines")?;
    if let Some(node) = &req.target_node {
        check_node(node)?;
    }
    if !s.backend.capabilities().live_migration {
        return Err(ApiError::precondition(format!("the {} backend cannot live-migrate VMs", s.backend.name())));
    }
    let sc = scope(caller);
    let current = s.store.get_vm(id, &sc).await?;
    if current.spec.state != PowerState::Started {
        let what = current.spec.state.as_str();
        return Err(ApiError::precondition(format!("virtual machine {:?} is {what}: only a running VM migrates", current.name)));
    }
    if let Some(c) = current.status.condition(ConditionType::LiveMigratable).filter(|c| c.status == ConditionStatus::False) {
        let why = c.reason.as_deref().unwrap_or("NotLiveMigratable");
        return Err(ApiError::precondition(format!("virtual machine {:?} cannot live-migrate ({why}): {}", current.name, c.message)));
    }
    let requested = s.store.request_migration(id, &sc, req.target_node.clone()).await?;
    info!(vm = %id, migrate = requested.requests.migrate, node = ?req.target_node, by = %caller.subject, "virtual machine migration requested");
    super::settle(s, &requested).await
}
