//! The REST declaration of [`crate::app::resources::external_ips`]: its state
//! names and what the OpenAPI document says of its operations.

use axum::extract::{Path, State};
use axum::routing::get;
use axum::{Json, Router};
use vmaas_model::{Envelope, ExternalIp, ExternalIpPool, ExternalIpState, Page};

use crate::api::resource::{Docs, FIXED_SPEC, Resource};
use crate::app::resources::external_ips::{pool, pools};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

/// The pools' routes (read-only: the administrator configures them with `--external-ip-pool`).
pub(in crate::api) fn routes() -> Router<AppState> {
    Router::new().route("/external_ip_pools", get(list_pools)).route("/external_ip_pools/{id}", get(read_pool))
}

/// List the external IP pools, the default one first.
#[utoipa::path(get, path = "/api/fulfillment/v1/external_ip_pools", tag = "external IPs", operation_id = "list_external_ip_pools",
    responses((status = 200, body = Page<ExternalIpPool>), (status = 401, body = ApiError)),
    security(("bearer" = [])))]
pub(in crate::api) async fn list_pools(State(s): State<AppState>, caller: Caller) -> Result<Json<Page<ExternalIpPool>>, ApiError> {
    let items = pools(&s, &caller).await?;
    let n = items.len() as u64;
    Ok(Json(Page { items, size: n, total: n }))
}

/// Get one external IP pool, by name.
#[utoipa::path(get, path = "/api/fulfillment/v1/external_ip_pools/{id}", tag = "external IPs", operation_id = "get_external_ip_pool",
    params(("id" = String, Path, description = "Pool name")),
    responses((status = 200, body = Envelope<ExternalIpPool>), (status = 404, body = ApiError)),
    security(("bearer" = [])))]
pub(in crate::api) async fn read_pool(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Envelope<ExternalIpPool>>, ApiError> {
    Ok(Json(Envelope { object: pool(&s, &caller, &id).await? }))
}

impl Resource for ExternalIp {
    const STATES: &'static [&'static str] = ExternalIpState::NAMES;
    const DOCS: Docs = Docs {
        create: "Allocate an external IP from a pool (`spec.pool`; empty: the default pool).\nIts address is in `status.address` at once.",
        patch: FIXED_SPEC,
        remove: "Release an external IP; refused (409) while it is attached.",
        create_errors: &[(409, "The name is taken, or the pool is exhausted"), (429, "The tenant's external_ips quota is reached")],
        patch_errors: &[(409, "The version sent is stale")],
        remove_errors: &[(409, "FAILED_PRECONDITION: an attachment holds it")],
    };
}
