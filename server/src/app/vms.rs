//! Virtual machines: each tenant sees and changes only its own;
//! administrators see all. A create resolves the spec against its template
//! ([`resolve`]), clones a disk or a snapshot ([`clone`]), sets the expiry
//! ([`expiry`]) and instance type ([`shape`]), and takes what it needs in
//! one admission; a change does the same for what changes.

mod auto_ip;
mod clone;
mod expiry;
mod migrate;
mod moving;
mod power;
mod resolve;
mod restore;
mod shape;

pub(crate) use migrate::{MigrateRequest, migrate};
pub(crate) use restore::restore;

use std::sync::Arc;

use chrono::Utc;
use tracing::info;
use vmaas_model::{CreateVirtualMachine, ObjectKind, PatchVirtualMachine, ValidationErrors, VirtualMachine, VmState};

use super::images;
use super::listing::{ListRequest, Listed, States};
use super::resources::catalog_items;
use super::scope::{checked_name, owned_by, scope};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::quota::{self, Amounts};
use crate::reconciler;
use crate::state::AppState;
use crate::store::vm::missing_of;
use crate::store::{Filter, StoreError, VmRecord};
use resolve::{check_no_shrink, check_placement, fits, image_field, resolve, same_machine_inputs, takes_more_room};

/// How long a change waits for the reconciler to acknowledge it.
const ACK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// A page of the VMs `caller` sees, as JSON; `view` renders each (the
/// filter and order see the rendering, whose `states` are the stored ones
/// or its own).
pub(crate) async fn list<F, Fut>(s: &AppState, caller: &Caller, req: ListRequest, states: States, view: F) -> Result<Listed, ApiError>
where
    F: FnOnce(Vec<Arc<str>>) -> Fut,
    Fut: std::future::Future<Output = Result<Vec<Arc<str>>, ApiError>>,
{
    let state = req.state.as_deref().map(str::parse::<VmState>).transpose().map_err(|e| ApiError::field("state", e))?;
    let (scope, name, state) = (scope(caller), req.name.clone(), state.map(|st| st.as_str().to_owned()));
    req.run(states, |r| async move {
        let filter = Filter { name, state, narrow: r.narrow, offset: r.offset, limit: r.limit };
        let (items, total) = s.store.list_vms_json(&scope, &filter).await?;
        Ok((view(items).await?, total))
    })
    .await
}

/// The VM `id` `caller` sees, as JSON.
pub(crate) async fn read_json(s: &AppState, caller: &Caller, id: &str) -> Result<Arc<str>, ApiError> {
    Ok(s.store.get_vm_json(id, &scope(caller)).await?)
}

/// The VM `id` `caller` sees, as the API shows it.
pub(crate) async fn read(s: &AppState, caller: &Caller, id: &str) -> Result<Arc<VirtualMachine>, ApiError> {
    Ok(s.store.get_vm_api(id, &scope(caller)).await?)
}

/// Creates the VM `obj` asks for, from its template: the name is
/// `metadata.name`, or else `id` as in the seed design; the server assigns
/// the real id.
pub(crate) async fn create(s: &AppState, caller: &Caller, mut obj: CreateVirtualMachine) -> Result<VmRecord, ApiError> {
    let mut errs = ValidationErrors::default();
    let name = checked_name(obj.requested_name(), &mut errs);
    let labels = vmaas_model::Labels::from_input(obj.metadata.as_ref(), &mut errs);
    if let Some(m) = &obj.metadata {
        m.check_owned(&caller.tenant, std::slice::from_ref(&caller.subject), true, &mut errs);
    }
    catalog_items::at_create(s, caller, &mut obj.spec, &mut errs).await?;
    clone::at_create(s, &caller.tenant, &mut obj.spec, &mut errs).await?;
    power::at_create(s, obj.spec.state, &mut errs);
    let resolved = resolve(s, &mut obj.spec, None, true, &mut errs).await?;
    check_placement(s.backend.as_ref(), obj.spec.placement.as_ref(), &mut errs);
    expiry::at_create(s, &caller.tenant, &mut obj.spec, &mut errs).await?;
    if let Some((template, r)) = &resolved {
        images::check_image(s, caller, &r.spec, &image_field(template, &obj.spec), None, &mut errs).await?;
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
    let auto_ip = auto_ip::plan(adm.state(), caller, &rec).await?;
    let image = images::boot_image(&adm, caller, &rec.machine).await?;
    let staged = adm.state().store.stage_vm_booting(&rec, image.as_ref()).await?;
    // Admission counts the VM from here (on SQLite, staged: the group
    // commit goes on meanwhile); an image made for it is looked for by
    // name, so that one is stored before the next request looks, and an
    // external IP made with it holds its address before the next takes one.
    let committed = if auto_ip.is_none() && image.as_ref().is_none_or(|i| i.new.is_none()) {
        adm.commit().await?;
        staged.committed().await
    } else {
        let committed = staged.committed().await;
        if let (Ok(()), Some(planned)) = (&committed, auto_ip) {
            auto_ip::store(adm.state(), &rec, planned).await?;
        }
        adm.commit().await?;
        committed
    };
    committed.map_err(|e| match missing_of(&rec, e) {
        StoreError::MissingReference(reason) => ApiError::field("object.spec", reason),
        other => other.into(),
    })?;
    images::made(s, image.as_ref());
    s.queue.enqueue(ObjectKind::VirtualMachine, &rec.id);
    // Its subnets and groups count one more user.
    for a in &rec.spec.network_attachments {
        s.queue.enqueue(ObjectKind::Subnet, &a.subnet);
        for g in &a.security_groups {
            s.queue.enqueue(ObjectKind::SecurityGroup, g);
        }
    }
    info!(vm = %rec.id, name = %rec.name, tenant = %rec.tenant, template = %rec.spec.template, "virtual machine created");
    Ok(rec)
}

/// Changes the VM `id`'s spec (its power `state`, its `template_parameters`,
/// guest config and instance type) and labels; a stale `metadata.version`
/// is a 409.
pub(crate) async fn patch(s: &AppState, caller: &Caller, id: &str, p: PatchVirtualMachine) -> Result<VmRecord, ApiError> {
    let current = s.store.get_vm(id, &scope(caller)).await?;
    if current.deleted_at.is_some() {
        return Err(ApiError::precondition(format!("virtual machine {:?} is being deleted", current.name)));
    }
    let mut errs = ValidationErrors::default();
    crate::app::simple::check_id(id, p.id.as_deref(), &mut errs);
    if let Some(t) = p.spec.template.as_deref().filter(|t| *t != current.spec.template) {
        errs.push(
            "object.spec.template",
            format!("cannot change from {:?} to {t:?} in place; delete the VM and create a new one", current.spec.template),
        );
    }
    if let Some(i) = p.spec.image.as_ref().filter(|i| Some(*i) != current.spec.image.as_ref()) {
        errs.push("object.spec.image", format!("cannot change to {:?} in place; delete the VM and create a new one", i.source_ref));
    }
    if p.spec.auto_external_ip_attachment.is_some_and(|a| a != current.spec.auto_external_ip_attachment) {
        errs.push("object.spec.auto_external_ip_attachment", "cannot change in place: it is fixed at create; attach external IPs instead");
    }
    if p.spec.additional_disks.as_ref().is_some_and(|d| *d != current.spec.additional_disks) {
        errs.push("object.spec.additional_disks", "cannot change in place: additional disks are fixed at create; attach volumes instead");
    }
    let expected = p.metadata.as_ref().and_then(|m| m.version).unwrap_or(current.version);
    if expected != current.version {
        return Err(StoreError::stale_vm(&current.name, expected, current.version).into());
    }
    let mut next = current.clone();
    expiry::on_patch(s, &current.tenant, &p.spec, &mut next.spec, &mut errs).await?;
    if let Some(state) = p.spec.state {
        power::at_change(s, &current, state, &mut errs)?;
        next.spec.state = state;
    }
    // None and no placement are the same: placed anywhere.
    let placement = p.spec.placement.map(|pl| Some(pl).filter(|pl| !pl.is_empty()));
    if let Some(pl) = placement.filter(|pl| *pl != current.spec.placement) {
        moving::check(s.backend.as_ref(), &current, &next, pl.as_ref(), &mut errs);
        next.spec.placement = pl;
    }
    if let Some(params) = p.spec.template_parameters {
        next.spec.template_parameters = params;
    }
    if let Some(u) = p.spec.user_data {
        next.spec.user_data = Some(u).filter(|u| !u.is_empty());
    }
    if let Some(d) = p.spec.boot_disk {
        let tier = |d: Option<&vmaas_model::VmDisk>| d.and_then(|d| d.storage_tier.clone());
        if tier(Some(&d)) != tier(current.spec.boot_disk.as_ref()) {
            errs.push("object.spec.boot_disk.storage_tier", "cannot change in place: a disk stays in the tier it was made in");
        }
        next.spec.boot_disk = Some(d);
    }
    if let Some(k) = p.spec.ssh_public_key {
        next.spec.ssh_public_key = Some(k).filter(|k| !k.trim().is_empty());
    }
    if let Some(t) = p.spec.instance_type.filter(|t| !shape::same(t, current.spec.instance_type.as_ref())) {
        next.spec.instance_type = Some(t);
    }
    let previous_type = current.spec.instance_type.as_ref().map(|t| t.id.as_str());
    next.labels = current.labels.patched(p.metadata.as_ref(), &mut errs);
    if let Some(m) = &p.metadata {
        m.check_owned(&current.tenant, &current.creators, false, &mut errs);
    }
    catalog_items::at_patch(s, &current.spec, &next.spec, p.spec.catalog_item.as_deref(), &mut errs).await?;
    if next.spec == current.spec && next.labels == current.labels {
        return if errs.is_empty() { Ok(current) } else { Err(ApiError::invalid(errs)) };
    }
    let mut rebooted = false;
    if !same_machine_inputs(&next.spec, &current.spec)
        && let Some((template, r)) = resolve(s, &mut next.spec, previous_type, false, &mut errs).await?
    {
        check_no_shrink(&template, &next.spec, &current.machine, &r.spec, &mut errs);
        let kept = Some(current.machine.boot.image.as_str());
        images::check_image(s, caller, &r.spec, &image_field(&template, &next.spec), kept, &mut errs).await?;
        next.machine = r.spec;
        rebooted = true;
    }
    if !errs.is_empty() {
        return Err(ApiError::invalid(errs));
    }
    let grows = Amounts::vm(&next.machine).beyond(Amounts::vm(&current.machine));
    let saved = if rebooted || !grows.is_zero() || takes_more_room(s, &next, &current) {
        let adm = s.admit().await?;
        fits(adm.state(), &next, Some(&current)).await?;
        quota::enforce(&adm.state().store, &current.tenant, grows).await?;
        let image = if rebooted { images::boot_image(&adm, caller, &next.machine).await? } else { None };
        let saved = match rebooted {
            true => adm.state().store.update_vm_booting(&next, expected, image.as_ref()).await?,
            false => adm.state().store.update_vm_spec(&next, expected).await?,
        };
        adm.commit().await?;
        images::made(s, image.as_ref());
        saved
    } else {
        s.store.update_vm_spec(&next, expected).await?
    };
    info!(vm = %id, version = saved.version, state = saved.spec.state.as_str(), "virtual machine updated");
    settle(s, &saved).await
}

/// Enqueues a changed VM and waits briefly for the reconciler to acknowledge
/// the change, so the answer shows where the VM is going. A reconciler
/// still busy after the wait does not change the answer: it shows the
/// status the reconciler's acknowledgement will write.
pub(crate) async fn settle(s: &AppState, changed: &VmRecord) -> Result<VmRecord, ApiError> {
    s.queue.enqueue(ObjectKind::VirtualMachine, &changed.id);
    match reconciler::acknowledged(&s.store, &s.queue, &changed.id, changed.version, ACK_WAIT).await {
        Ok(vm) if vm.observed_version >= changed.version => Ok(vm),
        Ok(mut vm) => {
            vm.status = reconciler::acknowledged_status(s.backend.as_ref(), &vm);
            Ok(vm)
        }
        // Deleted and cleaned up already: show it as the reconciler last wrote it.
        Err(StoreError::NotFound { .. }) => {
            let mut gone = changed.clone();
            gone.status = reconciler::deleting_status(changed);
            Ok(gone)
        }
        Err(e) => Err(e.into()),
    }
}

/// Starts deleting the VM `id` (its snapshots too, unless `retain_snapshots`).
pub(crate) async fn remove(s: &AppState, caller: &Caller, id: &str, retain_snapshots: bool) -> Result<VmRecord, ApiError> {
    let sc = scope(caller);
    let current = s.store.get_vm(id, &sc).await?;
    if current.deleted_at.is_none() && current.retain_snapshots != retain_snapshots {
        s.store.keep_snapshots(id, &sc, retain_snapshots).await?;
    }
    let marked = s.store.mark_vm_deleted(id, &sc, Utc::now()).await?;
    info!(vm = %id, name = %marked.name, "virtual machine deletion requested");
    settle(s, &marked).await
}

/// Restarts the running VM `id`: its guest is stopped and booted again.
pub(crate) async fn restart(s: &AppState, caller: &Caller, id: &str) -> Result<VmRecord, ApiError> {
    let sc = scope(caller);
    let current = s.store.get_vm(id, &sc).await?;
    match current.spec.state {
        vmaas_model::PowerState::Stopped => {
            return Err(ApiError::precondition(format!("virtual machine {:?} is stopped: start it instead", current.name)));
        }
        vmaas_model::PowerState::Paused => {
            return Err(ApiError::precondition(format!("virtual machine {:?} is paused: resume it (state started) first", current.name)));
        }
        vmaas_model::PowerState::Started => {}
    }
    let requested = s.store.request_restart(id, &sc).await?;
    info!(vm = %id, restart = requested.requests.restart, "virtual machine restart requested");
    settle(s, &requested).await
}
