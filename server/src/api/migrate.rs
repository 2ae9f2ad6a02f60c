//! `POST /virtual_machines/{id}/migrate`: an administrator moves a running
//! VM to another host without stopping its guest (live migration). The VM
//! is MIGRATING, then READY again where it landed.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::{Json, Router};
use serde::Deserialize;
use tracing::info;
use vmaas_model::{Envelope, PowerState, VirtualMachine};

use super::shared::scope;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

/// What a migration asks for.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MigrateRequest {
    /// The node (host) to move to; none: the backend's scheduler chooses.
    #[serde(default)]
    pub target_node: Option<String>,
}

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/virtual_machines/{id}/migrate", axum::routing::post(migrate))
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

/// Live-migrate a running virtual machine (administrators only).
#[utoipa::path(post, path = "/api/fulfillment/v1/virtual_machines/{id}/migrate", tag = "virtual machines",
    params(("id" = String, Path, description = "VM id (UUID)")),
    request_body(content = Option<MigrateRequest>, description = "Optional: the node to move to"),
    responses((status = 202, body = Envelope<VirtualMachine>, description = "Migration requested"), (status = 400, body = ApiError),
        (status = 403, body = ApiError, description = "Not an administrator"), (status = 404, body = ApiError),
        (status = 409, body = ApiError, description = "Stopped, being deleted, or the backend cannot migrate")),
    security(("bearer" = [])))]
pub(super) async fn migrate(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<(StatusCode, Json<Envelope<VirtualMachine>>), ApiError> {
    caller.require_admin("migrate virtual machines")?;
    let req: MigrateRequest =
        if body.iter().all(u8::is_ascii_whitespace) { MigrateRequest::default() } else { super::extract::decode(&body)? };
    if let Some(node) = &req.target_node {
        check_node(node)?;
    }
    if !s.backend.capabilities().live_migration {
        return Err(ApiError::precondition(format!("the {} backend cannot live-migrate VMs", s.backend.name())));
    }
    let sc = scope(&caller);
    let current = s.store.get_vm(&id, &sc).await?;
    if current.spec.state == PowerState::Stopped {
        return Err(ApiError::precondition(format!("virtual machine {:?} is stopped: only a running VM migrates", current.name)));
    }
    let requested = s.store.request_migration(&id, &sc, req.target_node.clone()).await?;
    info!(vm = %id, migrate = requested.requests.migrate, node = ?req.target_node, by = %caller.subject, "virtual machine migration requested");
    let rec = super::vms::settle(&s, &requested).await?;
    Ok((StatusCode::ACCEPTED, Json(Envelope { object: rec.to_api() })))
}
