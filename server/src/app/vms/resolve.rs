//! What a VM's spec resolves to, and the checks of a create or a change:
//! its template and parameters, its instance type and guest config, its
//! image and placement, whether its disks shrink, and whether it fits on
//! the host.

use vmaas_model::{MachineSpec, Resolved, Template, ValidationErrors, VirtualMachineSpec};

use super::shape;
use crate::capacity::{self, Usage};
use crate::error::ApiError;
use crate::state::AppState;
use crate::store::{StoreError, VmRecord};

/// Validates `spec` against its template, naming fields from `object.spec`.
/// `previous` is the instance type the VM has, on a change; `creating`
/// for a new VM.
pub(super) async fn resolve(
    s: &AppState,
    spec: &mut VirtualMachineSpec,
    previous: Option<&str>,
    creating: bool,
    errs: &mut ValidationErrors,
) -> Result<Option<(Template, Resolved)>, ApiError> {
    let record = match s.store.get_template(&spec.template).await {
        Ok(r) => r,
        // None named: the create's checks say what names one.
        Err(StoreError::NotFound { .. }) if spec.template.trim().is_empty() => return Ok(None),
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
            shape::apply(s, spec, &template, &mut r.spec, previous, creating, errs).await?;
            spec.apply_guest_config(&mut r.spec, "object.spec", errs);
            apply_image(&template, spec, &mut r.spec, errs);
            vmaas_model::vm::disks::apply(spec, &mut r.spec, "object.spec", errs);
            for (field, why) in s.backend.unsupported(&r.spec) {
                let backend = s.backend.name();
                match vmaas_model::vm::disks::field_of(spec, &field, "object.spec") {
                    Some(own) => errs.push(own, format!("the {backend} backend cannot honour it: {why}")),
                    None => errs.push(
                        "object.spec.template",
                        format!("template {:?} sets {field}, which the {backend} backend cannot honour: {why}", spec.template),
                    ),
                }
            }
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
pub(super) fn check_placement(
    backend: &dyn vmaas_backend::Backend,
    placement: Option<&vmaas_model::Placement>,
    errs: &mut ValidationErrors,
) {
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

/// The field that chose a VM's image: its `spec.image`, its template's
/// image parameter, else the template.
pub(super) fn image_field(template: &Template, spec: &VirtualMachineSpec) -> String {
    if spec.image.is_some() {
        return "object.spec.image.source_ref".into();
    }
    match template.parameter_setting("image") {
        Some(p) => format!("object.spec.template_parameters.{p}"),
        None => "object.spec.template".into(),
    }
}

/// Whether the parts of two specs the machine is resolved from are equal.
pub(super) fn same_machine_inputs(a: &VirtualMachineSpec, b: &VirtualMachineSpec) -> bool {
    (&a.template_parameters, &a.user_data, &a.ssh_public_key, &a.instance_type, &a.boot_disk)
        == (&b.template_parameters, &b.user_data, &b.ssh_public_key, &b.instance_type, &b.boot_disk)
}

/// Refuses a change that makes a disk smaller: disks only grow (a smaller
/// overlay would cut the guest's file system short).
pub(super) fn check_no_shrink(
    template: &Template,
    spec: &VirtualMachineSpec,
    current: &MachineSpec,
    next: &MachineSpec,
    errs: &mut ValidationErrors,
) {
    for (disk, from, to) in vmaas_model::boot_shape::shrunk_disks(current, next) {
        let field = match template.parameter_setting("disk_size") {
            _ if disk == vmaas_model::machine::ROOT_DISK && spec.boot_disk.is_some() => "object.spec.boot_disk.size_gib".into(),
            Some(p) => format!("object.spec.template_parameters.{p}"),
            None => "object.spec.template_parameters".into(),
        };
        errs.push(field, format!("disk {disk} cannot shrink from {from} to {to}; disks only grow"));
    }
}

/// Whether `vm`, replacing `current`, asks more of the host than it did
/// (only when the backend runs VMs on this host).
pub(super) fn takes_more_room(s: &AppState, vm: &VmRecord, current: &VmRecord) -> bool {
    s.backend.capacity().is_some() && Usage::of(&vm.machine, vm.spec.state).grows_from(&Usage::of(&current.machine, current.spec.state))
}

/// Checks, in an admission (`s` is its state), that `vm` (replacing
/// `current`, on a change) fits on the host. Nothing to check when the
/// backend does not run VMs on this host, or when a change asks for less.
pub(super) async fn fits(s: &AppState, vm: &VmRecord, current: Option<&VmRecord>) -> Result<(), ApiError> {
    let Some(host) = s.backend.capacity() else { return Ok(()) };
    let asked = Usage::of(&vm.machine, vm.spec.state);
    if current.is_some_and(|c| !asked.grows_from(&Usage::of(&c.machine, c.spec.state))) {
        return Ok(());
    }
    Ok(capacity::check(&host, &s.overcommit, capacity::held(&s.store, Some(&vm.id), None).await?, asked)?)
}
