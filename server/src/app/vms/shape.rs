//! A VM's instance type: found by id or name, refused when OBSOLETE (for a
//! new VM, or a VM moving to it), and applied to the machine its template
//! resolved (`docs/api.md`, "Instance types").

use vmaas_model::{InstanceType, InstanceTypeReference, MachineSpec, Template, ValidationErrors, VirtualMachineSpec};

use crate::error::ApiError;
use crate::state::AppState;
use crate::store::Scope;

const FIELD: &str = "object.spec.instance_type";

/// Sizes `machine` by `spec.instance_type`, if the VM names one, and
/// rewrites the reference with the type's id and name. A new VM
/// (`creating`) naming none gets its template's default type; a type the
/// template does not allow is refused. `previous` is the id of the type the
/// VM has (on a change): an OBSOLETE type is refused only where it is new
/// to the VM. Every problem goes into `errs`.
pub(super) async fn apply(
    s: &AppState,
    spec: &mut VirtualMachineSpec,
    template: &Template,
    machine: &mut MachineSpec,
    previous: Option<&str>,
    creating: bool,
    errs: &mut ValidationErrors,
) -> Result<(), ApiError> {
    let defaults = &template.wire().spec_defaults;
    if creating && spec.instance_type.is_none() {
        spec.instance_type = defaults.instance_type.as_ref().map(|name| InstanceTypeReference { id: String::new(), name: name.clone() });
    }
    let Some(wanted) = spec.instance_type.as_ref() else { return Ok(()) };
    let Some(t) = s.store.find_record::<InstanceType>(wanted.key(), &Scope::All).await? else {
        errs.push(FIELD, format!("there is no instance type {:?}; list them with GET /api/fulfillment/v1/instance_types", wanted.key()));
        return Ok(());
    };
    if let Some(why) = t.spec.refusal(&t.name, template, previous == Some(t.id.as_str())) {
        errs.push(FIELD, why);
        return Ok(());
    }
    let param_field = |p: &str| format!("object.spec.template_parameters.{p}.value");
    let fields = vmaas_model::instance_type::SizingFields { parameter: &param_field, instance_type: "object.spec.instance_type" };
    t.spec.size(&t.name, template, &spec.template_parameters, &fields, machine, errs);
    spec.instance_type = Some(InstanceTypeReference { id: t.id, name: t.name });
    Ok(())
}

/// Whether `wanted` names the instance type `current` is (by id or name).
pub(super) fn same(wanted: &InstanceTypeReference, current: Option<&InstanceTypeReference>) -> bool {
    current.is_some_and(|c| [c.id.as_str(), c.name.as_str()].contains(&wanted.key()))
}
