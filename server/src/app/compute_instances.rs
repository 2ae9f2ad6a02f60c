//! OSAC's `osac.public.v1` view of VMs: compute instances (see
//! `vmaas_model::vm::compute_instance` for how the two differ). Each call
//! reads the request in the view's names, makes it a VM request for
//! [`super::vms`], and answers in the view's names, with the names of the
//! subnets, security groups and images the VM refers to.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use vmaas_model::reference::{Names, Referred};
use vmaas_model::vm::compute_instance::{VmBody, from_compute_instance, to_compute_instance};
use vmaas_model::{CreateVirtualMachine, Envelope, ObjectKind, PatchVirtualMachine, VirtualMachine, VirtualMachineSpec};

use super::images::{self, Named};
use super::listing::{ListRequest, Listed, States};
use super::scope::scope;
use super::vms;
use crate::auth::Caller;
use crate::decode::decode;
use crate::error::ApiError;
use crate::state::AppState;
use crate::store::StoreError;

/// A page of the caller's compute instances, filtered and sorted in the view.
pub(crate) async fn list(s: &AppState, caller: &Caller, req: ListRequest) -> Result<Listed, ApiError> {
    Ok(list_kept(s, caller, req, false).await?.0)
}

/// A page of the caller's compute instances, filtered and sorted in the
/// view, as the VMs they are, with the names of what they refer to.
pub(crate) async fn list_vms(s: &AppState, caller: &Caller, req: ListRequest) -> Result<(Vec<VirtualMachine>, Names, u64), ApiError> {
    let (listed, mut vms, names) = list_kept(s, caller, req, true).await?;
    let page = listed.items.iter().filter_map(|item| vms.remove(&address(item))).collect();
    Ok((page, names, listed.total))
}

/// Where a rendering is: what a page's item is known by, as the page keeps
/// the renderings it was given.
fn address(rendering: &Arc<str>) -> usize {
    Arc::as_ptr(rendering) as *const u8 as usize
}

/// The page in the view; when `keep`, each item's VM by the [`address`]
/// of its rendering, and the names of what they refer to.
async fn list_kept(
    s: &AppState,
    caller: &Caller,
    req: ListRequest,
    keep: bool,
) -> Result<(Listed, HashMap<usize, VirtualMachine>, Names), ApiError> {
    let kept = Mutex::new((HashMap::new(), Names::new()));
    let kept_ref = &kept;
    let listed = vms::list(s, caller, req, States::Renamed, |items| async move {
        let items = items.iter().map(|vm| serde_json::from_str(vm).map_err(ApiError::internal)).collect::<Result<Vec<Value>, _>>()?;
        let names = names(s, caller, referred(&items)).await?;
        let mut rendered = Vec::with_capacity(items.len());
        let mut by_rendering = HashMap::with_capacity(items.len());
        for vm in items {
            let typed = keep.then(|| serde_json::from_value::<VirtualMachine>(vm.clone())).transpose().map_err(ApiError::internal)?;
            let view: Arc<str> = Arc::from(to_compute_instance(vm, &names).to_string());
            if let Some(typed) = typed {
                by_rendering.insert(address(&view), typed);
            }
            rendered.push(view);
        }
        *kept_ref.lock().unwrap_or_else(|p| p.into_inner()) = (by_rendering, names);
        Ok(rendered)
    })
    .await?;
    let (vms, names) = kept.into_inner().unwrap_or_else(|p| p.into_inner());
    Ok((listed, vms, names))
}

/// The caller's compute instance `id`.
pub(crate) async fn read(s: &AppState, caller: &Caller, id: &str) -> Result<Value, ApiError> {
    let vm: Value = serde_json::from_str(&vms::read_json(s, caller, id).await?).map_err(ApiError::internal)?;
    let names = names(s, caller, referred(std::slice::from_ref(&vm))).await?;
    Ok(to_compute_instance(vm, &names))
}

/// Creates the compute instance `object` (a VM; `spec.run_strategy`
/// `Always` or `Halted`).
pub(crate) async fn create(s: &AppState, caller: &Caller, object: Value) -> Result<Value, ApiError> {
    let mut body = vm_body(object)?;
    image_named(s, caller, &mut body.vm).await?;
    let vm: Envelope<CreateVirtualMachine> =
        decode(&serde_json::to_vec(&json!({"object": body.vm})).map_err(ApiError::internal)?).map_err(in_view)?;
    let made = vms::create(s, caller, vm.object).await.map_err(in_view)?;
    answer(s, caller, &made.to_api()).await
}

/// Changes the compute instance `id`: only the fields sent change; a
/// `spec.restart_requested_at` restarts it.
pub(crate) async fn patch(s: &AppState, caller: &Caller, id: &str, object: Value) -> Result<Value, ApiError> {
    let mut body = vm_body(object)?;
    image_named(s, caller, &mut body.vm).await?;
    let vm: Envelope<PatchVirtualMachine> =
        decode(&serde_json::to_vec(&json!({"object": body.vm})).map_err(ApiError::internal)?).map_err(in_view)?;
    let changed = vms::patch(s, caller, id, vm.object).await.map_err(in_view)?;
    if body.restart_requested_at.is_none() {
        return answer(s, caller, &changed.to_api()).await;
    }
    let restarted = vms::restart(s, caller, id).await?;
    answer(s, caller, &restarted.to_api()).await
}

/// Starts deleting the compute instance `id`.
pub(crate) async fn remove(s: &AppState, caller: &Caller, id: &str, retain_snapshots: bool) -> Result<Value, ApiError> {
    let gone = vms::remove(s, caller, id, retain_snapshots).await?;
    answer(s, caller, &gone.to_api()).await
}

/// A disk image given by its id (OSAC's `{"id": …}`) as a VM names its
/// image: by the image's name (an id that is no image of the caller's is
/// left for the VM's checks to refuse, naming the field).
async fn image_named(s: &AppState, caller: &Caller, vm: &mut Value) -> Result<(), ApiError> {
    let Some(Value::String(held)) = vm.pointer_mut("/spec/image/source_ref") else { return Ok(()) };
    image_by_name(s, caller, held).await
}

/// A disk image given by its id as a VM names its image: by the image's
/// name (an id that is no image of the caller's is left as it is, for the
/// VM's checks to refuse naming the field).
pub(crate) async fn image_by_name(s: &AppState, caller: &Caller, held: &mut String) -> Result<(), ApiError> {
    if uuid::Uuid::parse_str(held).is_err() {
        return Ok(());
    }
    if let Named::One(i) = images::lookup(s, caller, held).await? {
        *held = i.name.clone();
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

/// `vm` in the view.
async fn answer(s: &AppState, caller: &Caller, vm: &VirtualMachine) -> Result<Value, ApiError> {
    let value = serde_json::to_value(vm).map_err(ApiError::internal)?;
    let names = names(s, caller, referred(std::slice::from_ref(&value))).await?;
    Ok(to_compute_instance(value, &names))
}

/// The names of the subnets, security groups and images `refs` (what VMs
/// refer to: [`referred`], [`referred_by`]), each looked up once, as
/// `caller` sees them.
pub(crate) async fn names(s: &AppState, caller: &Caller, refs: Vec<(Referred, String)>) -> Result<Names, ApiError> {
    let mut names = Names::new();
    for (kind, key) in refs {
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

/// What the VM `vm` refers to: `(kind, what it holds)`.
pub(crate) fn referred_by(vm: &VirtualMachineSpec) -> impl Iterator<Item = (Referred, String)> + '_ {
    let image = vm.image.iter().map(|i| (Referred::Image, i.source_ref.clone()));
    let nics = vm.network_attachments.iter().flat_map(|nic| {
        let groups = nic.security_groups.iter().map(|g| (Referred::SecurityGroup, g.clone()));
        std::iter::once((Referred::Subnet, nic.subnet.clone())).chain(groups)
    });
    image.chain(nics)
}

/// What the VMs `vms` (their JSON) refer to: `(kind, what they hold)`.
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
pub(crate) fn in_view(mut e: ApiError) -> ApiError {
    for d in &mut e.details {
        if d.field == "object.spec.state" {
            d.field = "object.spec.run_strategy".into();
        }
    }
    e
}
