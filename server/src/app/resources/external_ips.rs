//! `external_ip_pools` (read-only: the administrator configures them with
//! `--external-ip-pool`) and `external_ips`: an address a tenant allocates
//! from a pool, kept until the external IP is deleted, and refused deletion
//! while an attachment holds it.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use tracing::info;
use vmaas_model::external_ip::{EXTERNAL_IP_POOL_TYPE_URL, ExternalIpPoolSpec, ExternalIpPoolStatus, IpFamily, PoolMetadata};
use vmaas_model::{ExternalIp, ExternalIpPool, ExternalIpSpec, ExternalIpState, ExternalIpStatus, ObjectKind, ValidationErrors};

use crate::app::kind::Kind;
use crate::app::simple;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::pools::Pool;
use crate::reconciler::{self, PassFuture, Reconciler};
use crate::state::AppState;
use crate::store::ExternalIpRecord;

/// The first free address of `pool` (one another process of this host holds
/// is not free), else a 409 saying it is exhausted.
pub(crate) async fn allocate(s: &AppState, pool: &Pool) -> Result<Ipv4Addr, ApiError> {
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

/// The external IP pools `caller` sees, the default one first (the
/// addresses of each only for administrators).
pub(crate) async fn pools(s: &AppState, caller: &Caller) -> Result<Vec<ExternalIpPool>, ApiError> {
    let used = crate::pools::taken(&s.store).await?;
    Ok(s.pools.all().iter().map(|p| pool_api(p, &used, caller.is_admin())).collect())
}

/// The external IP pool named `id`.
pub(crate) async fn pool(s: &AppState, caller: &Caller, id: &str) -> Result<ExternalIpPool, ApiError> {
    let pool = s.pools.get(id).filter(|_| !id.is_empty()).ok_or_else(|| ApiError::not_found("external IP pool", id))?;
    Ok(pool_api(pool, &crate::pools::taken(&s.store).await?, caller.is_admin()))
}

impl Kind for ExternalIp {
    type Patch = simple::Relabel;

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
