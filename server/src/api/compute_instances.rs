//! `compute_instances`: OSAC's `osac.public.v1` view of the same VM objects
//! `virtual_machines` serves (see `vmaas_model::vm::compute_instance` for
//! how the two differ). Each handler reads the request in the view's names,
//! lets the VM handler do the work, and answers in the view's names.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use vmaas_model::reference::{Names, Referred};
use vmaas_model::vm::compute_instance::{VmBody, from_compute_instance, to_compute_instance};
use vmaas_model::{CreateVirtualMachine, Envelope, ObjectKind, PatchVirtualMachine, VirtualMachine};

use super::extract::ApiJson;
use super::extract::ApiQuery;
use super::extract::decode;
use super::images::{self, Named};
use super::query::Selection;
use super::shared::Paging;
use super::shared::scope;
use super::vms;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;
use crate::store::{Filter, StoreError};

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/compute_instances", get(list).post(create))
        .route("/compute_instances/{id}", get(read).patch(patch).delete(remove))
}

/// Query of the compute instance list.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct ListQuery {
    /// Items to skip (default 0).
    offset: Option<u64>,
    /// Items to return, 1 to 1000 (default 100).
    limit: Option<u64>,
    /// Only the instance with this exact name.
    name: Option<String>,
    /// A CEL expression over the compute instance, e.g. `this.status.state == 'COMPUTE_INSTANCE_STATE_RUNNING'`.
    filter: Option<String>,
    /// Sort keys, e.g. `this.metadata.name desc`.
    order: Option<String>,
}

/// List compute instances (the caller's VMs, in OSAC's public names).
#[utoipa::path(get, path = "/api/fulfillment/v1/compute_instances", tag = "compute instances", params(ListQuery),
    responses((status = 200, description = "`{\"items\": [compute instances], \"size\", \"total\"}`"), (status = 400, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn list(State(s): State<AppState>, caller: Caller, ApiQuery(q): ApiQuery<ListQuery>) -> Result<Response, ApiError> {
    let (offset, limit) = Paging { offset: q.offset, limit: q.limit }.resolve()?;
    let mut selection = Selection::parse(q.filter.as_deref(), q.order.as_deref())?;
    let narrow = Selection::push_down(&mut selection);
    let (from, count) = Selection::window(&selection, offset, limit);
    let filter = Filter { name: q.name, state: None, narrow, offset: from, limit: count };
    let (items, total) = s.store.list_vms_json(&scope(&caller), &filter).await?;
    let items = items.iter().map(|vm| serde_json::from_str(vm).map_err(ApiError::internal)).collect::<Result<Vec<Value>, _>>()?;
    let names = names(&s, &caller, &items).await?;
    let items = items.into_iter().map(|vm| to_compute_instance(vm, &names).to_string().into()).collect::<Vec<Arc<str>>>();
    Ok(Selection::respond(selection, items, total, offset, limit))
}

/// Get one compute instance.
#[utoipa::path(get, path = "/api/fulfillment/v1/compute_instances/{id}", tag = "compute instances",
    params(("id" = String, Path, description = "VM id (UUID)")),
    responses((status = 200, description = "`{\"object\": compute instance}`"), (status = 404, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn read(State(s): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Response, ApiError> {
    let vm: Value = serde_json::from_str(&s.store.get_vm_json(&id, &scope(&caller)).await?).map_err(ApiError::internal)?;
    let names = names(&s, &caller, std::slice::from_ref(&vm)).await?;
    Ok(super::shared::raw_json(format!("{{\"object\":{}}}", to_compute_instance(vm, &names))))
}

/// Create a compute instance (a VM): `spec.run_strategy` `Always` or `Halted`.
#[utoipa::path(post, path = "/api/fulfillment/v1/compute_instances", tag = "compute instances",
    responses((status = 201, description = "`{\"object\": compute instance}`"), (status = 400, body = ApiError), (status = 409, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn create(
    State(s): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<Envelope<Value>>,
) -> Result<Response, ApiError> {
    let mut body = vm_body(req.object)?;
    image_named(&s, &caller, &mut body.vm).await?;
    let vm: Envelope<CreateVirtualMachine> =
        decode(&serde_json::to_vec(&json!({"object": body.vm})).map_err(ApiError::internal)?).map_err(in_view)?;
    let (status, Json(made)) = vms::create(State(s.clone()), caller.clone(), ApiJson(vm)).await.map_err(in_view)?;
    answer(&s, &caller, status, &made.object).await
}

/// Change a compute instance: only the fields sent (or named by the
/// gateway's `update_mask`) change; a `spec.restart_requested_at` restarts it.
#[utoipa::path(patch, path = "/api/fulfillment/v1/compute_instances/{id}", tag = "compute instances",
    params(("id" = String, Path, description = "VM id (UUID)")),
    responses((status = 200, description = "`{\"object\": compute instance}`"), (status = 400, body = ApiError), (status = 404, body = ApiError), (status = 409, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn patch(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<Envelope<Value>>,
) -> Result<Response, ApiError> {
    let mut body = vm_body(req.object)?;
    image_named(&s, &caller, &mut body.vm).await?;
    let vm: Envelope<PatchVirtualMachine> =
        decode(&serde_json::to_vec(&json!({"object": body.vm})).map_err(ApiError::internal)?).map_err(in_view)?;
    let Json(changed) = vms::patch(State(s.clone()), caller.clone(), Path(id.clone()), ApiJson(vm)).await.map_err(in_view)?;
    if body.restart_requested_at.is_none() {
        return answer(&s, &caller, StatusCode::OK, &changed.object).await;
    }
    let (_, Json(restarted)) = vms::restart(State(s.clone()), caller.clone(), Path(id)).await?;
    answer(&s, &caller, StatusCode::OK, &restarted.object).await
}

/// Delete a compute instance.
#[utoipa::path(delete, path = "/api/fulfillment/v1/compute_instances/{id}", tag = "compute instances",
    params(("id" = String, Path, description = "VM id (UUID)"), vms::DeleteQuery),
    responses((status = 202, description = "`{\"object\": compute instance}`, being deleted"), (status = 404, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn remove(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    q: ApiQuery<vms::DeleteQuery>,
) -> Result<Response, ApiError> {
    let (status, Json(gone)) = vms::remove(State(s.clone()), caller.clone(), Path(id), q).await?;
    answer(&s, &caller, status, &gone.object).await
}

/// A disk image given by its id (OSAC's `{"id": …}`) as a VM names its
/// image: by the image's name (an id that is no image of the caller's is
/// left for the VM's checks to refuse, naming the field).
async fn image_named(s: &AppState, caller: &Caller, vm: &mut Value) -> Result<(), ApiError> {
    let Some(held) = vm.pointer_mut("/spec/image/source_ref") else { return Ok(()) };
    let Some(id) = held.as_str().filter(|k| uuid::Uuid::parse_str(k).is_ok()).map(str::to_owned) else { return Ok(()) };
    if let Named::One(i) = images::lookup(s, caller, &id).await? {
        *held = Value::from(i.name.clone());
    }
    Ok(())
}

/// The VM body a compute instance body stands for.
fn vm_body(object: Value) -> Result<VmBody, ApiError> {
    if let Some(t) = object.get("@type").and_then(Value::as_str).filter(|t| !t.ends_with("osac.public.v1.ComputeInstance")) {
        return Err(ApiError::field("object.@type", format!("must be osac.public.v1.ComputeInstance, got {t}")));
    }
    from_compute_instance(object, "object").map_err(ApiError::invalid)
}

/// `{"object": vm}` in the view, with `status`.
async fn answer(s: &AppState, caller: &Caller, status: StatusCode, vm: &VirtualMachine) -> Result<Response, ApiError> {
    let value = serde_json::to_value(vm).map_err(ApiError::internal)?;
    let names = names(s, caller, std::slice::from_ref(&value)).await?;
    Ok((status, Json(json!({"object": to_compute_instance(value, &names)}))).into_response())
}

/// The names of the subnets, security groups and images the VMs `vms`
/// (their JSON) refer to, each looked up once, as `caller` sees them.
async fn names(s: &AppState, caller: &Caller, vms: &[Value]) -> Result<Names, ApiError> {
    let mut names = Names::new();
    for (kind, key) in referred(vms) {
        if names.contains_key(&(kind, key.clone())) {
            continue;
        }
        let found = match kind {
            Referred::Subnet => row_names(s, caller, ObjectKind::Subnet, &key).await?,
            Referred::SecurityGroup => row_names(s, caller, ObjectKind::SecurityGroup, &key).await?,
            // An imported image the caller sees, by id or name (as a VM names it), else one of the catalog's.
            Referred::Image => match images::lookup(s, caller, &key).await? {
                Named::One(image) => Some((image.id, image.name)),
                Named::Several(mut all) => Some(all.swap_remove(0)).map(|i| (i.id, i.name)),
                Named::None => catalog_names(&key),
            },
        };
        if let Some(found) = found {
            names.insert((kind, key), found);
        }
    }
    Ok(names)
}

/// The id and name of the `kind` object `id` the caller sees, if there is one.
async fn row_names(s: &AppState, caller: &Caller, kind: ObjectKind, id: &str) -> Result<Option<(String, String)>, ApiError> {
    match s.store.get(kind, id, &scope(caller)).await {
        Ok(row) => Ok(Some((row.id, row.name))),
        Err(StoreError::NotFound { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// A catalog image's id and name (both its name); none for a URL.
fn catalog_names(key: &str) -> Option<(String, String)> {
    (!key.contains("://")).then(|| (key.to_owned(), key.to_owned()))
}

/// What the VMs `vms` refer to: `(kind, what they hold)`.
fn referred(vms: &[Value]) -> Vec<(Referred, String)> {
    let mut out = Vec::new();
    let text = |v: &Value| v.as_str().map(str::to_owned);
    for spec in vms.iter().map(|vm| &vm["spec"]) {
        out.extend(text(&spec["image"]["source_ref"]).map(|r| (Referred::Image, r)));
        for nic in spec["network_attachments"].as_array().into_iter().flatten() {
            out.extend(text(&nic["subnet"]).map(|id| (Referred::Subnet, id)));
            let groups = nic["security_groups"].as_array().into_iter().flatten();
            out.extend(groups.filter_map(text).map(|id| (Referred::SecurityGroup, id)));
        }
    }
    out
}

/// An error of the VM handlers in the view's field names.
fn in_view(mut e: ApiError) -> ApiError {
    for d in &mut e.details {
        if d.field == "object.spec.state" {
            d.field = "object.spec.run_strategy".into();
        }
    }
    e
}
