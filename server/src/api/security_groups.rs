//! `security_groups`: rules for the NICs of one of a tenant's virtual
//! networks (OSAC's `SecurityGroup`). A PATCH replaces its rules, and every
//! NIC that has the group enforces the new rules at once (its VMs are
//! reconciled); a group in use cannot be deleted.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::{Json, Router};
use chrono::Utc;
use tracing::info;
use vmaas_model::{
    CreateSecurityGroup, Envelope, ObjectKind, Page, PatchSecurityGroup, SecurityGroup, SecurityGroupState, ValidationErrors,
};

use super::{ApiJson, ApiQuery, AppState, checked_name, owned_by, scope, simple};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::store::{SecurityGroupKind, SecurityGroupRecord};

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/security_groups", get(list).post(create)).route("/security_groups/{id}", get(read).patch(patch).delete(remove))
}

/// List security groups, oldest first.
#[utoipa::path(get, path = "/api/fulfillment/v1/security_groups", tag = "security groups", params(simple::ListQuery),
    responses((status = 200, body = Page<SecurityGroup>), (status = 400, body = ApiError), (status = 401, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn list(
    State(s): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<simple::ListQuery>,
) -> Result<Response, ApiError> {
    simple::list::<SecurityGroupKind>(&s, &caller, q, &SecurityGroupState::ALL.map(SecurityGroupState::as_str)).await
}

/// Get one security group.
#[utoipa::path(get, path = "/api/fulfillment/v1/security_groups/{id}", tag = "security groups",
    params(("id" = String, Path, description = "Security group id (UUID)")),
    responses((status = 200, body = Envelope<SecurityGroup>), (status = 404, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn read(State(s): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Response, ApiError> {
    simple::read::<SecurityGroupKind>(&s, &caller, &id).await
}

/// Create a security group for the NICs of one of your virtual networks.
#[utoipa::path(post, path = "/api/fulfillment/v1/security_groups", tag = "security groups",
    request_body = Envelope<CreateSecurityGroup>,
    responses((status = 201, body = Envelope<SecurityGroup>), (status = 400, body = ApiError), (status = 409, body = ApiError, description = "The name is taken")),
    security(("bearer" = [])))]
pub(super) async fn create(
    State(s): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<Envelope<CreateSecurityGroup>>,
) -> Result<(StatusCode, Json<Envelope<SecurityGroup>>), ApiError> {
    let obj = req.object;
    let mut errs = ValidationErrors::default();
    let name = checked_name(obj.requested_name(), &mut errs);
    let labels = vmaas_model::Labels::from_input(obj.metadata.as_ref(), &mut errs);
    if let Err(e) = obj.spec.check("object.spec") {
        errs.extend(e);
    }
    let (Some(name), true) = (name, errs.is_empty()) else { return Err(ApiError::invalid(errs)) };
    let net = simple::network(&s, &owned_by(&caller.tenant), &obj.spec.virtual_network).await?;
    let mut spec = obj.spec.clone();
    spec.virtual_network = net.id.clone();
    let mut rec = SecurityGroupRecord::new(uuid::Uuid::new_v4().to_string(), &caller.tenant, &name, &caller.subject, spec, Utc::now());
    rec.labels = labels;
    s.store.insert_record(&rec, vec![(net.id.clone(), "virtual_network".to_owned())]).await?;
    s.queue.enqueue(ObjectKind::SecurityGroup, &rec.id);
    s.queue.enqueue(ObjectKind::VirtualNetwork, &net.id);
    info!(security_group = %rec.id, name = %rec.name, network = %net.id, "security group created");
    Ok((StatusCode::CREATED, Json(Envelope { object: rec.to_api() })))
}

/// Replace a security group's `ingress` and/or `egress` rules; every NIC
/// that has it enforces them at once, without a restart.
///
/// Send `object.metadata.version` to refuse lost updates: a stale version gets 409.
#[utoipa::path(patch, path = "/api/fulfillment/v1/security_groups/{id}", tag = "security groups",
    params(("id" = String, Path, description = "Security group id (UUID)")),
    request_body = Envelope<PatchSecurityGroup>,
    responses((status = 200, body = Envelope<SecurityGroup>), (status = 400, body = ApiError), (status = 404, body = ApiError), (status = 409, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn patch(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<Envelope<PatchSecurityGroup>>,
) -> Result<Json<Envelope<SecurityGroup>>, ApiError> {
    let current = s.store.get_record::<SecurityGroupKind>(&id, &scope(&caller)).await?;
    let p = req.object;
    let expected = p.metadata.as_ref().and_then(|m| m.version).unwrap_or(current.version);
    let mut spec = current.spec.clone();
    if let Some(rules) = p.spec.ingress {
        spec.ingress = rules;
    }
    if let Some(rules) = p.spec.egress {
        spec.egress = rules;
    }
    spec.check("object.spec").map_err(ApiError::invalid)?;
    let current = simple::relabelled(current, p.metadata.as_ref())?;
    let updated = s.store.update_record_spec(&current, expected, spec, Utc::now()).await?;
    s.queue.enqueue(ObjectKind::SecurityGroup, &id);
    // The NICs that have it take the new rules with their VMs' next reconcile: now.
    for vm in s.store.referrers(&id).await?.iter().filter(|r| r.kind == ObjectKind::VirtualMachine) {
        s.queue.enqueue(ObjectKind::VirtualMachine, &vm.id);
    }
    info!(security_group = %id, name = %updated.name, version = updated.version, "security group rules replaced");
    Ok(Json(Envelope { object: updated.to_api() }))
}

/// Delete a security group; refused (409) while NICs have it.
#[utoipa::path(delete, path = "/api/fulfillment/v1/security_groups/{id}", tag = "security groups",
    params(("id" = String, Path, description = "Security group id (UUID)")),
    responses((status = 202, body = Envelope<SecurityGroup>, description = "Deletion started"), (status = 404, body = ApiError),
        (status = 409, body = ApiError, description = "FAILED_PRECONDITION: NICs have it")),
    security(("bearer" = [])))]
pub(super) async fn remove(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Envelope<SecurityGroup>>), ApiError> {
    simple::remove::<SecurityGroupKind>(&s, &caller, &id).await
}
