//! `POST /virtual_machines/{id}/restore`: a VM's disks go back to one of
//! its snapshots. A running VM is refused (409) unless the request says
//! `"stop": true`; then it is stopped for the restore and runs again once
//! its disks are back (PROGRESSING, reason `Restoring`, then READY).

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::{Json, Router};
use vmaas_model::{Envelope, RestoreRequest, VirtualMachine};

use crate::app::vms;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/virtual_machines/{id}/restore", axum::routing::post(restore))
}

/// Restore a virtual machine's disks from one of its snapshots.
#[utoipa::path(post, path = "/api/fulfillment/v1/virtual_machines/{id}/restore", tag = "virtual machines",
    params(("id" = String, Path, description = "VM id (UUID)")),
    request_body(content = RestoreRequest, description = "The snapshot, and whether a running VM may be stopped for it"),
    responses((status = 202, body = Envelope<VirtualMachine>, description = "Restore requested"),
        (status = 400, body = ApiError, description = "No such READY snapshot of this VM"), (status = 404, body = ApiError),
        (status = 409, body = ApiError, description = "Running without `stop`, being deleted, or the backend has no snapshots")),
    security(("bearer" = [])))]
pub(super) async fn restore(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<(StatusCode, Json<Envelope<VirtualMachine>>), ApiError> {
    let req: RestoreRequest = crate::decode::decode(&body)?;
    let rec = vms::restore(&s, &caller, &id, req).await?;
    Ok((StatusCode::ACCEPTED, Json(Envelope { object: rec.to_api() })))
}
