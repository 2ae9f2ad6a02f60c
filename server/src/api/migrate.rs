//! `POST /virtual_machines/{id}/migrate`: an administrator moves a running
//! VM to another host without stopping its guest (live migration). The VM
//! is MIGRATING, then READY again where it landed.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::{Json, Router};
use vmaas_model::{Envelope, VirtualMachine};

use crate::app::vms::{self, MigrateRequest};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/virtual_machines/{id}/migrate", axum::routing::post(migrate))
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
    let req: MigrateRequest =
        if body.iter().all(u8::is_ascii_whitespace) { MigrateRequest::default() } else { crate::decode::decode(&body)? };
    let rec = vms::migrate(&s, &caller, &id, req).await?;
    Ok((StatusCode::ACCEPTED, Json(Envelope { object: rec.to_api() })))
}
