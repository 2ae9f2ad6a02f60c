//! `load_balancers`: an address from the default external IP pool whose
//! ports spread connections over the caller's VMs on one subnet
//! (`spec.targets`, each checked to have a NIC there). A PATCH replaces the
//! targets or the port mappings; the subnet cannot be deleted while a load
//! balancer is on it.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::{Json, Router};
use chrono::Utc;
use tracing::info;
use vmaas_model::load_balancer::{check_mappings, check_targets};
use vmaas_model::{
    CreateObject, Envelope, LoadBalancer, LoadBalancerSpec, LoadBalancerState, LoadBalancerStatus, ObjectKind, Page, PatchLoadBalancer,
    ValidationErrors,
};

use super::{ApiJson, ApiQuery, AppState, checked_name, owned_by, scope, simple};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::store::{BALANCER_ON, LoadBalancerKind, LoadBalancerRecord, Scope, SubnetKind, SubnetRecord};

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/load_balancers", get(list).post(create)).route("/load_balancers/{id}", get(read).patch(patch).delete(remove))
}

/// List load balancers, oldest first.
#[utoipa::path(get, path = "/api/fulfillment/v1/load_balancers", tag = "load balancers", params(simple::ListQuery),
    responses((status = 200, body = Page<LoadBalancer>), (status = 400, body = ApiError), (status = 401, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn list(
    State(s): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<simple::ListQuery>,
) -> Result<Response, ApiError> {
    let states: Vec<&'static str> = LoadBalancerState::ALL.iter().map(|x| x.as_str()).collect();
    simple::list::<LoadBalancerKind>(&s, &caller, q, &states).await
}

/// Get one load balancer.
#[utoipa::path(get, path = "/api/fulfillment/v1/load_balancers/{id}", tag = "load balancers",
    params(("id" = String, Path, description = "Load balancer id (UUID)")),
    responses((status = 200, body = Envelope<LoadBalancer>), (status = 404, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn read(State(s): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Response, ApiError> {
    simple::read::<LoadBalancerKind>(&s, &caller, &id).await
}

/// The caller's VMs named in `targets`, as ids, each with a NIC on `subnet`.
async fn resolve_targets(s: &AppState, scope: &Scope, targets: &[String], subnet: &SubnetRecord) -> Result<Vec<String>, ApiError> {
    let mut ids: Vec<String> = Vec::with_capacity(targets.len());
    for (i, t) in targets.iter().enumerate() {
        let field = format!("object.spec.targets[{i}]");
        let row = simple::row(s, scope, ObjectKind::VirtualMachine, t, &field).await?;
        let vm = s.store.get_vm(&row.id, scope).await?;
        if !vm.spec.network_attachments.iter().any(|a| a.subnet == subnet.id) {
            return Err(ApiError::field(field, format!("virtual machine {:?} has no NIC on subnet {:?}", vm.name, subnet.name)));
        }
        if ids.contains(&vm.id) {
            return Err(ApiError::field(field, format!("virtual machine {:?} is a target twice", vm.name)));
        }
        ids.push(vm.id);
    }
    Ok(ids)
}

/// Create a load balancer; its address is in `status.address` at once.
#[utoipa::path(post, path = "/api/fulfillment/v1/load_balancers", tag = "load balancers",
    request_body = Envelope<CreateObject<LoadBalancerSpec>>,
    responses((status = 201, body = Envelope<LoadBalancer>), (status = 400, body = ApiError),
        (status = 409, body = ApiError, description = "The name is taken, or the default pool is exhausted"),
        (status = 429, body = ApiError, description = "The tenant's external_ips quota (external IPs and load balancers) is reached")),
    security(("bearer" = [])))]
pub(super) async fn create(
    State(s): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<Envelope<CreateObject<LoadBalancerSpec>>>,
) -> Result<(StatusCode, Json<Envelope<LoadBalancer>>), ApiError> {
    let obj = req.object;
    let mut errs = ValidationErrors::default();
    let name = checked_name(obj.requested_name(), &mut errs);
    let labels = vmaas_model::Labels::from_input(obj.metadata.as_ref(), &mut errs);
    if let Err(e) = obj.spec.check("object.spec") {
        errs.extend(e);
    }
    let (Some(name), true) = (name, errs.is_empty()) else { return Err(ApiError::invalid(errs)) };
    let scope = owned_by(&caller.tenant);
    let subnet = simple::find::<SubnetKind>(&s, &scope, obj.spec.subnet.trim())
        .await?
        .filter(|n| n.deleted_at.is_none())
        .ok_or_else(|| ApiError::field("object.spec.subnet", format!("you have no subnet {:?}", obj.spec.subnet)))?;
    let targets = resolve_targets(&s, &scope, &obj.spec.targets, &subnet).await?;
    let pool = s.pools.get("").ok_or_else(|| ApiError::internal("no external IP pool is configured"))?;
    let adm = s.admit().await?;
    let s = adm.state().clone();
    // Its address comes from the shared pool: it counts as an external IP.
    crate::quota::enforce(&s.store, &caller.tenant, crate::quota::Amounts::external_ip()).await?;
    let address = super::external_ips::allocate(&s, pool).await?;
    let spec = LoadBalancerSpec { subnet: subnet.id.clone(), targets, port_mappings: obj.spec.port_mappings };
    let mut rec = LoadBalancerRecord::new(uuid::Uuid::new_v4().to_string(), &caller.tenant, &name, &caller.subject, spec, Utc::now());
    rec.labels = labels;
    rec.status = LoadBalancerStatus { address: address.to_string(), ..Default::default() };
    s.store.insert_record(&rec, vec![(subnet.id.clone(), BALANCER_ON.to_owned())]).await?;
    adm.commit().await?;
    s.queue.enqueue(ObjectKind::LoadBalancer, &rec.id);
    s.queue.enqueue(ObjectKind::Subnet, &subnet.id);
    for vm in &rec.spec.targets {
        s.queue.enqueue(ObjectKind::VirtualMachine, vm);
    }
    info!(load_balancer = %rec.id, name = %rec.name, %address, targets = rec.spec.targets.len(), "load balancer created");
    Ok((StatusCode::CREATED, Json(Envelope { object: rec.to_api() })))
}

/// Replace a load balancer's targets and/or port mappings.
#[utoipa::path(patch, path = "/api/fulfillment/v1/load_balancers/{id}", tag = "load balancers",
    params(("id" = String, Path, description = "Load balancer id (UUID)")),
    request_body = Envelope<PatchLoadBalancer>,
    responses((status = 200, body = Envelope<LoadBalancer>), (status = 400, body = ApiError), (status = 404, body = ApiError), (status = 409, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn patch(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<Envelope<PatchLoadBalancer>>,
) -> Result<Json<Envelope<LoadBalancer>>, ApiError> {
    let scope = scope(&caller);
    let current = s.store.get_record::<LoadBalancerKind>(&id, &scope).await?;
    let p = req.object;
    let expected = p.metadata.as_ref().and_then(|m| m.version).unwrap_or(current.version);
    let mut errs = ValidationErrors::default();
    if let Some(t) = &p.spec.targets {
        check_targets(t, "object.spec.targets", &mut errs);
    }
    if let Some(m) = &p.spec.port_mappings {
        check_mappings(m, "object.spec.port_mappings", &mut errs);
    }
    if !errs.is_empty() {
        return Err(ApiError::invalid(errs));
    }
    let mut spec = current.spec.clone();
    if let Some(t) = p.spec.targets {
        let refs = owned_by(&current.tenant);
        let subnet = s.store.get_record::<SubnetKind>(&current.spec.subnet, &refs).await?;
        spec.targets = resolve_targets(&s, &refs, &t, &subnet).await?;
    }
    if let Some(m) = p.spec.port_mappings {
        spec.port_mappings = m;
    }
    let current = simple::relabelled(current, p.metadata.as_ref())?;
    let updated = s.store.update_record_spec(&current, expected, spec, Utc::now()).await?;
    for vm in current.spec.targets.iter().chain(&updated.spec.targets) {
        s.queue.enqueue(ObjectKind::VirtualMachine, vm);
    }
    s.queue.enqueue(ObjectKind::LoadBalancer, &id);
    info!(load_balancer = %id, version = updated.version, "load balancer changed");
    Ok(Json(Envelope { object: updated.to_api() }))
}

/// Delete a load balancer: it stops listening and its address is freed.
#[utoipa::path(delete, path = "/api/fulfillment/v1/load_balancers/{id}", tag = "load balancers",
    params(("id" = String, Path, description = "Load balancer id (UUID)")),
    responses((status = 202, body = Envelope<LoadBalancer>, description = "Deletion started"), (status = 404, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn remove(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Envelope<LoadBalancer>>), ApiError> {
    simple::remove::<LoadBalancerKind>(&s, &caller, &id).await
}
