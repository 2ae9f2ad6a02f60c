//! `/tenants/{name}/quota`: a tenant's limits (set by administrators) and
//! what it holds against them. A tenant reads its own; another tenant's
//! is 404 to it.

use axum::extract::{Path, State};
use axum::routing::get;
use axum::{Json, Router};
use vmaas_model::Envelope;

use crate::app::quotas::{self, Quota, SetQuota};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/tenants/{name}/quota", get(read).put(set).delete(clear)).route("/quotas", get(list))
}

/// A tenant's quota and usage (administrators: any tenant's; a tenant: its own).
#[utoipa::path(get, path = "/api/fulfillment/v1/tenants/{name}/quota", tag = "quotas",
    params(("name" = String, Path, description = "Tenant")),
    responses((status = 200, body = Envelope<Quota>), (status = 404, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn read(State(s): State<AppState>, caller: Caller, Path(name): Path<String>) -> Result<Json<Envelope<Quota>>, ApiError> {
    Ok(Json(Envelope { object: quotas::read(&s, &caller, &name).await? }))
}

/// Set a tenant's quota (administrators). Limits below what the tenant
/// holds refuse only what would take more.
#[utoipa::path(put, path = "/api/fulfillment/v1/tenants/{name}/quota", tag = "quotas",
    params(("name" = String, Path, description = "Tenant")),
    request_body = Envelope<SetQuota>,
    responses((status = 200, body = Envelope<Quota>), (status = 400, body = ApiError), (status = 403, body = ApiError),
        (status = 409, body = ApiError, description = "A stale metadata.version")),
    security(("bearer" = [])))]
pub(super) async fn set(
    State(s): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
    super::extract::ApiJson(req): super::extract::ApiJson<Envelope<SetQuota>>,
) -> Result<Json<Envelope<Quota>>, ApiError> {
    Ok(Json(Envelope { object: quotas::set(&s, &caller, &name, req.object).await? }))
}

/// Remove a tenant's quota: it is unlimited again (administrators).
#[utoipa::path(delete, path = "/api/fulfillment/v1/tenants/{name}/quota", tag = "quotas",
    params(("name" = String, Path, description = "Tenant")),
    responses((status = 200, body = Envelope<Quota>), (status = 403, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn clear(State(s): State<AppState>, caller: Caller, Path(name): Path<String>) -> Result<Json<Envelope<Quota>>, ApiError> {
    Ok(Json(Envelope { object: quotas::clear(&s, &caller, &name).await? }))
}

/// Every quota set, with usage (administrators).
#[utoipa::path(get, path = "/api/fulfillment/v1/quotas", tag = "quotas",
    responses((status = 200, body = vmaas_model::Page<Quota>), (status = 403, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn list(State(s): State<AppState>, caller: Caller) -> Result<Json<vmaas_model::Page<Quota>>, ApiError> {
    let items = quotas::list(&s, &caller).await?;
    let n = items.len() as u64;
    Ok(Json(vmaas_model::Page { size: n, total: n, items }))
}
