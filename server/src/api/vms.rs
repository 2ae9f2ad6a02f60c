//! `virtual_machines`: each tenant sees and changes only its own; administrators see all.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::{Json, Router};
use chrono::Utc;
use tracing::info;
use vmaas_model::{
    CreateVirtualMachine, Envelope, MachineSpec, ObjectKind, Page, PatchVirtualMachine, Resolved, Template, ValidationErrors,
    VirtualMachine, VirtualMachineSpec, VmState,
};

use super::extract::ApiJson;
use super::extract::ApiQuery;
use super::query::{ListQuery, Selection};
use super::shared::Paging;
use super::shared::checked_name;
use super::shared::owned_by;
use super::shared::raw_json;
use super::shared::scope;
use crate::auth::Caller;
use crate::capacity::{self, Usage};
use crate::error::ApiError;
use crate::quota::{self, Amounts};
use crate::reconciler;
use crate::state::AppState;
use crate::store::vm::missing_of;
use crate::store::{Filter, StoreError, VmRecord};

/// How long a change waits for the reconciler to acknowledge it.
const ACK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/virtual_machines", get(list).post(create))
        .route("/virtual_machines/{id}", get(read).patch(patch).delete(remove))
        .route("/virtual_machines/{id}/restart", axum::routing::post(restart))
}

/// Validates `spec` against its template, naming fields from `object.spec`.
/// `previous` is the instance type the VM has, on a change; `creating`
/// for a new VM.
async fn resolve(
    s: &AppState,
    spec: &mut VirtualMachineSpec,
    previous: Option<&str>,
    creating: bool,
    errs: &mut ValidationErrors,
) -> Result<Option<(Template, Resolved)>, ApiError> {
    let record = match s.store.get_template(&spec.template).await {
        Ok(r) => r,
        Err(StoreError::NotFound { .. }) => {
            errs.push(
                "object.spec.template",
                format!("template {:?} does not exist; list them with GET /api/fulfillment/v1/virtual_machine_templates", spec.template),
            );
            return Ok(None);
        }
        Err(e) => return Err(e.into()),
    };
    let template = Template::compile(record.template)
        .map_err(|e| ApiError::internal(format!("stored template {:?} is invalid: {e}", spec.template)))?;
    match template.resolve(&spec.template_parameters, "object.spec.template_parameters") {
        Ok(mut r) => {
            let before = errs.0.len();
            super::vm_shape::apply(s, spec, &template, &mut r.spec, previous, creating, errs).await?;
            spec.apply_guest_config(&mut r.spec, "object.spec", errs);
            apply_image(&template, spec, &mut r.spec, errs);
            Ok((errs.0.len() == before).then_some((template, r)))
        }
        Err(e) => {
            errs.extend(e);
            Ok(None)
        }
    }
}

/// Checks `spec.placement` against the clusters the backend drives: a
/// cluster it names exists, and some cluster has the labels it asks.
fn check_placement(backend: &dyn vmaas_backend::Backend, placement: Option<&vmaas_model::Placement>, errs: &mut ValidationErrors) {
    let Some(p) = placement.filter(|p| !p.is_empty()) else { return };
    let mut bad = ValidationErrors::default();
    p.check("object.spec.placement", &mut bad);
    if !bad.is_empty() {
        return errs.extend(bad);
    }
    let clusters = backend.clusters();
    if clusters.is_empty() {
        return errs.push("object.spec.placement", "this server drives one cluster: there is nothing to choose among (see --cluster)");
    }
    if let Some(why) = p.unmatched(clusters.iter().map(|c| (c.name.as_str(), &c.labels))) {
        errs.push("object.spec.placement", why);
    }
}

/// Boots `spec.image` (OSAC's `ComputeInstanceImage`) in place of the
/// image the template chose; refused beside a parameter choosing it too.
fn apply_image(template: &Template, spec: &VirtualMachineSpec, machine: &mut MachineSpec, errs: &mut ValidationErrors) {
    let Some(image) = &spec.image else { return };
    if let Some(p) = template.parameter_setting("image").filter(|p| spec.template_parameters.contains_key(*p)) {
        return errs
            .push("object.spec.image", format!("conflicts with template parameter {p:?}, which chooses the image too; set one of them"));
    }
    match image.boot_source() {
        Ok(boot) => machine.boot = boot,
        Err(e) => errs.push(format!("object.spec.image.{}", e.field), e.reason),
    }
}

/// List virtual machines, oldest first.
#[utoipa::path(get, path = "/api/fulfillment/v1/virtual_machines", tag = "virtual machines", params(ListQuery),
    responses((status = 200, body = Page<VirtualMachine>), (status = 400, body = ApiError), (status = 401, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn list(State(s): State<AppState>, caller: Caller, ApiQuery(q): ApiQuery<ListQuery>) -> Result<Response, ApiError> {
    let (offset, limit) = Paging { offset: q.offset, limit: q.limit }.resolve()?;
    let state = q.state.as_deref().map(str::parse::<VmState>).transpose().map_err(|e| ApiError::field("state", e))?;
    let mut selection = Selection::parse(q.filter.as_deref(), q.order.as_deref())?;
    let narrow = Selection::push_down(&mut selection);
    let (from, count) = Selection::window(&selection, offset, limit);
    let filter = Filter { name: q.name, state: state.map(|s| s.as_str().to_owned()), narrow, offset: from, limit: count };
    let (items, total) = s.store.list_vms_json(&scope(&caller), &filter).await?;
    Ok(Selection::respond(selection, items, total, offset, limit))
}

/// Get one virtual machine.
#[utoipa::path(get, path = "/api/fulfillment/v1/virtual_machines/{id}", tag = "virtual machines",
    params(("id" = String, Path, description = "VM id (UUID)")),
    responses((status = 200, body = Envelope<VirtualMachine>), (status = 404, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn read(State(s): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Response, ApiError> {
    let vm = s.store.get_vm_json(&id, &scope(&caller)).await?;
    Ok(raw_json(super::shared::enveloped(&vm)))
}

/// Create a virtual machine from a template.
///
/// The name is `object.metadata.name`, or else `object.id` as in the seed
/// design; the server assigns the real id.
#[utoipa::path(post, path = "/api/fulfillment/v1/virtual_machines", tag = "virtual machines",
    request_body = Envelope<CreateVirtualMachine>,
    responses((status = 201, body = Envelope<VirtualMachine>), (status = 400, body = ApiError), (status = 409, body = ApiError, description = "The name is taken"),
        (status = 429, body = ApiError, description = "RESOURCE_EXHAUSTED: the host has no room for the CPU, memory or disk asked for, or the tenant's quota does not allow it")),
    security(("bearer" = [])))]
pub(super) async fn create(
    State(s): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<Envelope<CreateVirtualMachine>>,
) -> Result<(StatusCode, Json<Envelope<VirtualMachine>>), ApiError> {
    let mut obj = req.object;
    let mut errs = ValidationErrors::default();
    let name = checked_name(obj.requested_name(), &mut errs);
    let labels = vmaas_model::Labels::from_input(obj.metadata.as_ref(), &mut errs);
    if let Some(m) = &obj.metadata {
        m.check_owned(&caller.tenant, std::slice::from_ref(&caller.subject), true, &mut errs);
    }
    super::vm_clone::at_create(&s, &caller.tenant, &mut obj.spec, &mut errs).await?;
    let resolved = resolve(&s, &mut obj.spec, None, true, &mut errs).await?;
    check_placement(s.backend.as_ref(), obj.spec.placement.as_ref(), &mut errs);
    super::vm_expiry::at_create(&s, &caller.tenant, &mut obj.spec, &mut errs).await?;
    if let Some((template, r)) = &resolved {
        super::images::check_image(&s, &caller, &r.spec, &image_field(template, &obj.spec), None, &mut errs).await?;
    }
    let (Some(name), Some((_, resolved)), true) = (name, resolved, errs.is_empty()) else {
        return Err(ApiError::invalid(errs));
    };
    let mut rec =
        VmRecord::new(uuid::Uuid::new_v4().to_string(), &caller.tenant, &name, &caller.subject, obj.spec, resolved.spec, Utc::now());
    rec.labels = labels;
    // Capacity, quota, addresses and an image made on demand: one admission.
    let adm = s.admit().await?;
    fits(adm.state(), &rec, None).await?;
    quota::enforce(&adm.state().store, &caller.tenant, Amounts::vm(&rec.machine)).await?;
    let wanted = std::mem::take(&mut rec.spec.network_attachments);
    rec.spec.network_attachments =
        vmaas_admission::attach::resolve(&adm.state().store, &owned_by(&caller.tenant), &wanted, &mut errs).await?;
    if !errs.is_empty() {
        return Err(ApiError::invalid(errs));
    }
    let image = super::images::boot_image(&adm, &caller, &rec.machine).await?;
    let staged = adm.state().store.stage_vm_booting(&rec, image.as_ref()).await?;
    // Admission counts the VM from here (on SQLite, staged: the group
    // commit goes on meanwhile); an image made for it is looked for by
    // name, so that one is stored before the next request looks.
    let committed = if image.as_ref().is_none_or(|i| i.new.is_none()) {
        adm.commit().await?;
        staged.committed().await
    } else {
        let committed = staged.committed().await;
        adm.commit().await?;
        committed
    };
    committed.map_err(|e| match missing_of(&rec, e) {
        StoreError::MissingReference(reason) => ApiError::field("object.spec", reason),
        other => other.into(),
    })?;
    super::images::made(&s, image.as_ref());
    s.queue.enqueue(ObjectKind::VirtualMachine, &rec.id);
    // Its subnets and groups count one more user.
    for a in &rec.spec.network_attachments {
        s.queue.enqueue(ObjectKind::Subnet, &a.subnet);
        for g in &a.security_groups {
            s.queue.enqueue(ObjectKind::SecurityGroup, g);
        }
    }
    info!(vm = %rec.id, name = %rec.name, tenant = %rec.tenant, template = %rec.spec.template, "virtual machine created");
    Ok((StatusCode::CREATED, Json(Envelope { object: rec.to_api() })))
}

/// Change a virtual machine's spec: its power `state` or its `template_parameters`.
///
/// Send `object.metadata.version` to refuse lost updates: a stale version gets 409.
#[utoipa::path(patch, path = "/api/fulfillment/v1/virtual_machines/{id}", tag = "virtual machines",
    params(("id" = String, Path, description = "VM id (UUID)")),
    request_body = Envelope<PatchVirtualMachine>,
    responses((status = 200, body = Envelope<VirtualMachine>), (status = 400, body = ApiError), (status = 404, body = ApiError), (status = 409, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn patch(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<Envelope<PatchVirtualMachine>>,
) -> Result<Json<Envelope<VirtualMachine>>, ApiError> {
    let p = req.object;
    let current = s.store.get_vm(&id, &scope(&caller)).await?;
    if current.deleted_at.is_some() {
        return Err(ApiError::precondition(format!("virtual machine {:?} is being deleted", current.name)));
    }
    let mut errs = ValidationErrors::default();
    if let Some(pid) = p.id.as_deref().filter(|pid| *pid != id) {
        errs.push("object.id", format!("must match the id in the path ({id:?}), got {pid:?}"));
    }
    if let Some(t) = p.spec.template.as_deref().filter(|t| *t != current.spec.template) {
        errs.push(
            "object.spec.template",
            format!("cannot change from {:?} to {t:?} in place; delete the VM and create a new one", current.spec.template),
        );
    }
    if let Some(i) = p.spec.image.as_ref().filter(|i| Some(*i) != current.spec.image.as_ref()) {
        errs.push("object.spec.image", format!("cannot change to {:?} in place; delete the VM and create a new one", i.source_ref));
    }
    if let Some(pl) = p.spec.placement.as_ref().filter(|pl| Some(*pl) != current.spec.placement.as_ref()) {
        errs.push("object.spec.placement", format!("cannot change to {} in place: a VM is placed once", pl.describe()));
    }
    let expected = p.metadata.as_ref().and_then(|m| m.version).unwrap_or(current.version);
    if expected != current.version {
        return Err(StoreError::stale_vm(&current.name, expected, current.version).into());
    }
    let mut next = current.clone();
    super::vm_expiry::on_patch(&s, &current.tenant, &p.spec, &mut next.spec, &mut errs).await?;
    if let Some(state) = p.spec.state {
        next.spec.state = state;
    }
    if let Some(params) = p.spec.template_parameters {
        next.spec.template_parameters = params;
    }
    if let Some(u) = p.spec.user_data {
        next.spec.user_data = Some(u).filter(|u| !u.is_empty());
    }
    if let Some(k) = p.spec.ssh_public_key {
        next.spec.ssh_public_key = Some(k).filter(|k| !k.trim().is_empty());
    }
    if let Some(t) = p.spec.instance_type.filter(|t| !super::vm_shape::same(t, current.spec.instance_type.as_ref())) {
        next.spec.instance_type = Some(t);
    }
    let previous_type = current.spec.instance_type.as_ref().map(|t| t.id.as_str());
    next.labels = current.labels.patched(p.metadata.as_ref(), &mut errs);
    if let Some(m) = &p.metadata {
        m.check_owned(&current.tenant, &current.creators, false, &mut errs);
    }
    if next.spec == current.spec && next.labels == current.labels {
        return if errs.is_empty() { Ok(Json(Envelope { object: current.to_api() })) } else { Err(ApiError::invalid(errs)) };
    }
    let mut rebooted = false;
    if !same_machine_inputs(&next.spec, &current.spec)
        && let Some((template, r)) = resolve(&s, &mut next.spec, previous_type, false, &mut errs).await?
    {
        check_no_shrink(&template, &current.machine, &r.spec, &mut errs);
        let kept = Some(current.machine.boot.image.as_str());
        super::images::check_image(&s, &caller, &r.spec, &image_field(&template, &next.spec), kept, &mut errs).await?;
        next.machine = r.spec;
        rebooted = true;
    }
    if !errs.is_empty() {
        return Err(ApiError::invalid(errs));
    }
    let grows = Amounts::vm(&next.machine).beyond(Amounts::vm(&current.machine));
    let saved = if rebooted || !grows.is_zero() || takes_more_room(&s, &next, &current) {
        let adm = s.admit().await?;
        fits(adm.state(), &next, Some(&current)).await?;
        quota::enforce(&adm.state().store, &current.tenant, grows).await?;
        let image = if rebooted { super::images::boot_image(&adm, &caller, &next.machine).await? } else { None };
        let saved = match rebooted {
            true => adm.state().store.update_vm_booting(&next, expected, image.as_ref()).await?,
            false => adm.state().store.update_vm_spec(&next, expected).await?,
        };
        adm.commit().await?;
        super::images::made(&s, image.as_ref());
        saved
    } else {
        s.store.update_vm_spec(&next, expected).await?
    };
    info!(vm = %id, version = saved.version, state = saved.spec.state.as_str(), "virtual machine updated");
    let vm = settle(&s, &saved).await?;
    Ok(Json(Envelope { object: vm.to_api() }))
}

/// The field that chose a VM's image: its `spec.image`, its template's
/// image parameter, else the template.
fn image_field(template: &Template, spec: &VirtualMachineSpec) -> String {
    if spec.image.is_some() {
        return "object.spec.image.source_ref".into();
    }
    match template.parameter_setting("image") {
        Some(p) => format!("object.spec.template_parameters.{p}"),
        None => "object.spec.template".into(),
    }
}

/// Whether the parts of two specs the machine is resolved from are equal.
fn same_machine_inputs(a: &VirtualMachineSpec, b: &VirtualMachineSpec) -> bool {
    (&a.template_parameters, &a.user_data, &a.ssh_public_key, &a.instance_type)
        == (&b.template_parameters, &b.user_data, &b.ssh_public_key, &b.instance_type)
}

/// Refuses a change that makes a disk smaller: disks only grow (a smaller
/// overlay would cut the guest's file system short).
fn check_no_shrink(template: &Template, current: &MachineSpec, next: &MachineSpec, errs: &mut ValidationErrors) {
    for (disk, from, to) in vmaas_model::boot_shape::shrunk_disks(current, next) {
        let field = match template.parameter_setting("disk_size") {
            Some(p) => format!("object.spec.template_parameters.{p}"),
            None => "object.spec.template_parameters".into(),
        };
        errs.push(field, format!("disk {disk} cannot shrink from {from} to {to}; disks only grow"));
    }
}

/// Whether `vm`, replacing `current`, asks more of the host than it did
/// (only when the backend runs VMs on this host).
fn takes_more_room(s: &AppState, vm: &VmRecord, current: &VmRecord) -> bool {
    s.backend.capacity().is_some() && Usage::of(&vm.machine, vm.spec.state).grows_from(&Usage::of(&current.machine, current.spec.state))
}

/// Checks, in an admission (`s` is its state), that `vm` (replacing
/// `current`, on a change) fits on the host. Nothing to check when the
/// backend does not run VMs on this host, or when a change asks for less.
async fn fits(s: &AppState, vm: &VmRecord, current: Option<&VmRecord>) -> Result<(), ApiError> {
    let Some(host) = s.backend.capacity() else { return Ok(()) };
    let asked = Usage::of(&vm.machine, vm.spec.state);
    if current.is_some_and(|c| !asked.grows_from(&Usage::of(&c.machine, c.spec.state))) {
        return Ok(());
    }
    Ok(capacity::check(&host, &s.overcommit, capacity::held(&s.store, Some(&vm.id), None).await?, asked)?)
}

/// Enqueues a changed VM and waits briefly for the reconciler to acknowledge
/// the change, so the answer shows where the VM is going.
pub(super) async fn settle(s: &AppState, changed: &VmRecord) -> Result<VmRecord, ApiError> {
    s.queue.enqueue(ObjectKind::VirtualMachine, &changed.id);
    match reconciler::acknowledged(&s.store, &s.queue, &changed.id, changed.version, ACK_WAIT).await {
        Ok(vm) => Ok(vm),
        // Deleted and cleaned up already: show it as the reconciler last wrote it.
        Err(StoreError::NotFound { .. }) => {
            let mut gone = changed.clone();
            gone.status = reconciler::deleting_status(changed);
            Ok(gone)
        }
        Err(e) => Err(e.into()),
    }
}

/// Delete a virtual machine. It shows as DELETING until the backend has
/// removed everything it had; then it is gone (404).
#[utoipa::path(delete, path = "/api/fulfillment/v1/virtual_machines/{id}", tag = "virtual machines",
    params(("id" = String, Path, description = "VM id (UUID)"), DeleteQuery),
    responses((status = 202, body = Envelope<VirtualMachine>, description = "Deletion started"), (status = 404, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn remove(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<DeleteQuery>,
) -> Result<(StatusCode, Json<Envelope<VirtualMachine>>), ApiError> {
    let sc = scope(&caller);
    let current = s.store.get_vm(&id, &sc).await?;
    if current.deleted_at.is_none() && current.retain_snapshots != q.retain_snapshots {
        s.store.keep_snapshots(&id, &sc, q.retain_snapshots).await?;
    }
    let marked = s.store.mark_vm_deleted(&id, &sc, Utc::now()).await?;
    info!(vm = %id, name = %marked.name, "virtual machine deletion requested");
    let rec = settle(&s, &marked).await?;
    Ok((StatusCode::ACCEPTED, Json(Envelope { object: rec.to_api() })))
}

/// What a VM's deletion may ask.
#[derive(Debug, Default, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(super) struct DeleteQuery {
    /// Keep the VM's snapshots (by default they are deleted with it).
    #[serde(default)]
    retain_snapshots: bool,
}

/// Restart a running virtual machine: its guest is stopped and booted again
/// (PROGRESSING, then READY once it answers).
#[utoipa::path(post, path = "/api/fulfillment/v1/virtual_machines/{id}/restart", tag = "virtual machines",
    params(("id" = String, Path, description = "VM id (UUID)")),
    responses((status = 202, body = Envelope<VirtualMachine>, description = "Restart requested"), (status = 404, body = ApiError), (status = 409, body = ApiError, description = "Stopped or being deleted")),
    security(("bearer" = [])))]
pub(super) async fn restart(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Envelope<VirtualMachine>>), ApiError> {
    let sc = scope(&caller);
    let current = s.store.get_vm(&id, &sc).await?;
    if current.spec.state == vmaas_model::PowerState::Stopped {
        return Err(ApiError::precondition(format!("virtual machine {:?} is stopped: start it instead", current.name)));
    }
    let requested = s.store.request_restart(&id, &sc).await?;
    info!(vm = %id, restart = requested.requests.restart, "virtual machine restart requested");
    let rec = settle(&s, &requested).await?;
    Ok((StatusCode::ACCEPTED, Json(Envelope { object: rec.to_api() })))
}
