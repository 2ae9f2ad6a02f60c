//! `external_ip_pools` (read-only: the administrator configures them with
//! `--external-ip-pool`) and `external_ips`: an address a tenant allocates
//! from a pool, kept until the external IP is deleted, and refused deletion
//! while an attachment holds it.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use axum::extract::{Path, State};
use axum::routing::get;
use axum::{Json, Router};
use tracing::info;
use vmaas_model::external_ip::{EXTERNAL_IP_POOL_TYPE_URL, ExternalIpPoolSpec, ExternalIpPoolStatus, IpFamily, PoolMetadata};
use vmaas_model::{
    Envelope, ExternalIp, ExternalIpPool, ExternalIpSpec, ExternalIpState, ExternalIpStatus, ObjectKind, Page, ValidationErrors,
};

use crate::api::resource::{Docs, FIXED_SPEC, Resource};
use crate::api::simple;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::pools::Pool;
use crate::reconciler::{self, PassFuture, Reconciler};
use crate::state::AppState;
use crate::store::ExternalIpRecord;

pub(in crate::api) fn routes() -> Router<AppState> {
    Router::new().route("/external_ip_pools", get(list_pools)).route("/external_ip_pools/{id}", get(read_pool))
}

/// The first free address of `pool` (one another process of this host holds
/// is not free), else a 409 saying it is exhausted.
pub(in crate::api) async fn allocate(s: &AppState, pool: &Pool) -> Result<Ipv4Addr, ApiError> {
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
#[utoipa::path(get, path = "/api/fulfillment/v1/external_ip_pools", tag = "external IPs", operation_id = "list_external_ip_pools",
    responses((status = 200, body = Page<ExternalIpPool>), (status = 401, body = ApiError)),
    security(("bearer" = [])))]
pub(in crate::api) async fn list_pools(State(s): State<AppState>, caller: Caller) -> Result<Json<Page<ExternalIpPool>>, ApiError> {
    let used = crate::pools::taken(&s.store).await?;
    let items: Vec<ExternalIpPool> = s.pools.all().iter().map(|p| pool_api(p, &used, caller.is_admin())).collect();
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
    let pool = s.pools.get(&id).filter(|_| !id.is_empty()).ok_or_else(|| ApiError::not_found("external IP pool", &id))?;
    Ok(Json(Envelope { object: pool_api(pool, &crate::pools::taken(&s.store).await?, caller.is_admin()) }))
}

impl Resource for ExternalIp {
    type Patch = simple::Relabel;
    const STATES: &'static [&'static str] = ExternalIpState::NAMES;
    const DOCS: Docs = Docs {
        create: "Allocate an external IP from a pool (`spec.pool`; empty: the default pool).\nIts address is in `status.address` at once.",
        patch: FIXED_SPEC,
        remove: "Release an external IP; refused (409) while it is attached.",
        create_errors: &[(409, "The name is taken, or the pool is exhausted"), (429, "The tenant's external_ips quota is reached")],
        patch_errors: &[(409, "The version sent is stale")],
        remove_errors: &[(409, "FAILED_PRECONDITION: an attachment holds it")],
    };

    fn check_spec(_spec: &ExternalIpSpec) -> Result<(), ValidationErrors> {
        Ok(())
    }

    async fn check(s: &AppState, _caller: &Caller, spec: &ExternalIpSpec, errs: &mut ValidationErrors) -> Result<(), ApiError> {
        if s.pools.get(spec.pool.trim()).is_none() {
            let names: Vec<&str> = s.pools.all().iter().map(|p| p.name.as_str()).collect();
            errs.push("object.spec.pool", format!("there is no external IP pool {:?}: pools are {}", spec.pool, names.join(", ")));
        }
        Ok(())
    }

    async fn create(s: &AppState, caller: &Caller, mut rec: ExternalIpRecord) -> Result<ExternalIpRecord, ApiError> {
        let pool = s.pools.get(rec.spec.pool.trim()).ok_or_else(|| ApiError::field("object.spec.pool", "the pool is gone"))?;
        // Allocation and insertion under one lock: two requests never get one address.
        let adm = s.admit().await?;
        let s = adm.state().clone();
        crate::quota::enforce(&s.store, &caller.tenant, crate::quota::Amounts::external_ip()).await?;
        let address = allocate(&s, pool).await?;
        rec.spec = ExternalIpSpec { pool: pool.name.clone() };
        rec.status = ExternalIpStatus {
            state: ExternalIpState::Allocated,
            address: address.to_string(),
            pool: pool.name.clone(),
            ..Default::default()
        };
        s.store.insert_record(&rec, Vec::new()).await?;
        adm.commit().await?;
        s.queue.enqueue(ObjectKind::ExternalIp, &rec.id);
        info!(external_ip = %rec.id, name = %rec.name, %address, pool = %pool.name, tenant = %rec.tenant, "external IP allocated");
        Ok(rec)
    }

    async fn patch(s: &AppState, caller: &Caller, id: &str, p: simple::Relabel) -> Result<ExternalIpRecord, ApiError> {
        simple::relabel::<Self>(s, caller, id, p).await
    }

    fn reconcile<'a>(r: &'a Reconciler, id: &'a str) -> PassFuture<'a> {
        Box::pin(reconciler::external::reconcile_ip(r, id))
    }
}
