//! `external_ip_pools` (read-only: the administrator configures them with
//! `--external-ip-pool`) and `external_ips`: an address a tenant allocates
//! from a pool, kept until the external IP is deleted, and refused deletion
//! while an attachment holds it.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::{Json, Router};
use chrono::Utc;
use tracing::info;
use vmaas_model::external_ip::{EXTERNAL_IP_POOL_TYPE_URL, ExternalIpPoolSpec, ExternalIpPoolStatus, IpFamily, PoolMetadata};
use vmaas_model::{
    CreateObject, Envelope, ExternalIp, ExternalIpPool, ExternalIpSpec, ExternalIpState, ExternalIpStatus, ObjectKind, Page,
    ValidationErrors,
};

use super::{ApiJson, ApiQuery, AppState, checked_name, simple};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::pools::Pool;
use crate::store::{ExternalIpKind, ExternalIpRecord};

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/external_ip_pools", get(list_pools))
        .route("/external_ip_pools/{id}", get(read_pool))
        .route("/external_ips", get(list).post(create))
        .route("/external_ips/{id}", get(read).delete(remove))
}

/// The first free address of `pool` (one another process of this host holds
/// is not free), else a 409 saying it is exhausted.
pub(super) async fn allocate(s: &AppState, pool: &Pool) -> Result<Ipv4Addr, ApiError> {
    let backend = s.backend.clone();
    let held = tokio::task::spawn_blocking(move || backend.held_addresses()).await.ok().flatten().unwrap_or_default();
    Ok(crate::pools::allocate(&s.store, pool, held).await?)
}

fn pool_api(pool: &Pool, used: &BTreeSet<Ipv4Addr>, admin: bool) -> ExternalIpPool {
    let in_use = used.iter().filter(|a| pool.cidr.contains((**a).into())).count() as i64;
    ExternalIpPool {
        type_url: EXTERNAL_IP_POOL_TYPE_URL.into(),
        id: pool.name.clone(),
        metadata: PoolMetadata { name: pool.name.clone() },
        spec: ExternalIpPoolSpec { ip_family: IpFamily::Ipv4, cidrs: if admin { vec![pool.text.clone()] } else { Vec::new() } },
        status: ExternalIpPoolStatus { available: pool.size() - in_use },
    }
}

/// List the external IP pools, the default one first.
#[utoipa::path(get, path = "/api/fulfillment/v1/external_ip_pools", tag = "external IPs",
    responses((status = 200, body = Page<ExternalIpPool>), (status = 401, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn list_pools(State(s): State<AppState>, caller: Caller) -> Result<Json<Page<ExternalIpPool>>, ApiError> {
    let used = crate::pools::taken(&s.store).await?;
    let items: Vec<ExternalIpPool> = s.pools.all().iter().map(|p| pool_api(p, &used, caller.is_admin())).collect();
    let n = items.len() as u64;
    Ok(Json(Page { items, size: n, total: n }))
}

/// Get one external IP pool, by name.
#[utoipa::path(get, path = "/api/fulfillment/v1/external_ip_pools/{id}", tag = "external IPs",
    params(("id" = String, Path, description = "Pool name")),
    responses((status = 200, body = Envelope<ExternalIpPool>), (status = 404, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn read_pool(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Envelope<ExternalIpPool>>, ApiError> {
    let pool = s.pools.get(&id).filter(|_| !id.is_empty()).ok_or_else(|| ApiError::not_found("external IP pool", &id))?;
    Ok(Json(Envelope { object: pool_api(pool, &crate::pools::taken(&s.store).await?, caller.is_admin()) }))
}

/// List external IPs, oldest first.
#[utoipa::path(get, path = "/api/fulfillment/v1/external_ips", tag = "external IPs", params(simple::ListQuery),
    responses((status = 200, body = Page<ExternalIp>), (status = 400, body = ApiError), (status = 401, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn list(
    State(s): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<simple::ListQuery>,
) -> Result<Response, ApiError> {
    simple::list::<ExternalIpKind>(&s, &caller, q, &ExternalIpState::ALL.iter().map(|x| x.as_str()).collect::<Vec<_>>()).await
}

/// Get one external IP.
#[utoipa::path(get, path = "/api/fulfillment/v1/external_ips/{id}", tag = "external IPs",
    params(("id" = String, Path, description = "External IP id (UUID)")),
    responses((status = 200, body = Envelope<ExternalIp>), (status = 404, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn read(State(s): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Response, ApiError> {
    simple::read::<ExternalIpKind>(&s, &caller, &id).await
}

/// Allocate an external IP from a pool (`spec.pool`; empty: the default
/// pool). Its address is in `status.address` at once.
#[utoipa::path(post, path = "/api/fulfillment/v1/external_ips", tag = "external IPs",
    request_body = Envelope<CreateObject<ExternalIpSpec>>,
    responses((status = 201, body = Envelope<ExternalIp>), (status = 400, body = ApiError),
        (status = 409, body = ApiError, description = "The name is taken, or the pool is exhausted")),
    security(("bearer" = [])))]
pub(super) async fn create(
    State(s): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<Envelope<CreateObject<ExternalIpSpec>>>,
) -> Result<(StatusCode, Json<Envelope<ExternalIp>>), ApiError> {
    let obj = req.object;
    let mut errs = ValidationErrors::default();
    let name = checked_name(obj.requested_name(), &mut errs);
    let labels = vmaas_model::Labels::from_input(obj.metadata.as_ref(), &mut errs);
    let pool = s.pools.get(obj.spec.pool.trim());
    if pool.is_none() {
        let names: Vec<&str> = s.pools.all().iter().map(|p| p.name.as_str()).collect();
        errs.push("object.spec.pool", format!("there is no external IP pool {:?}: pools are {}", obj.spec.pool, names.join(", ")));
    }
    let (Some(name), Some(pool), true) = (name, pool, errs.is_empty()) else { return Err(ApiError::invalid(errs)) };
    // Allocation and insertion under one lock: two requests never get one address.
    let adm = s.admit().await?;
    let s = adm.state().clone();
    crate::quota::enforce(&s.store, &caller.tenant, crate::quota::Amounts::external_ip()).await?;
    let address = allocate(&s, pool).await?;
    let spec = ExternalIpSpec { pool: pool.name.clone() };
    let mut rec = ExternalIpRecord::new(uuid::Uuid::new_v4().to_string(), &caller.tenant, &name, &caller.subject, spec, Utc::now());
    rec.labels = labels;
    rec.status =
        ExternalIpStatus { state: ExternalIpState::Allocated, address: address.to_string(), pool: pool.name.clone(), ..Default::default() };
    s.store.insert_record(&rec, Vec::new()).await?;
    adm.commit().await?;
    s.queue.enqueue(ObjectKind::ExternalIp, &rec.id);
    info!(external_ip = %rec.id, name = %rec.name, %address, pool = %pool.name, tenant = %rec.tenant, "external IP allocated");
    Ok((StatusCode::CREATED, Json(Envelope { object: rec.to_api() })))
}

/// Release an external IP; refused (409) while it is attached.
#[utoipa::path(delete, path = "/api/fulfillment/v1/external_ips/{id}", tag = "external IPs",
    params(("id" = String, Path, description = "External IP id (UUID)")),
    responses((status = 202, body = Envelope<ExternalIp>, description = "Release started"), (status = 404, body = ApiError),
        (status = 409, body = ApiError, description = "FAILED_PRECONDITION: an attachment holds it")),
    security(("bearer" = [])))]
pub(super) async fn remove(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Envelope<ExternalIp>>), ApiError> {
    simple::remove::<ExternalIpKind>(&s, &caller, &id).await
}
