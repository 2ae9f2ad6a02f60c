//! A claim's instance type: named by `spec.instanceType` (or, as seed 001
//! writes it, by `templateParameters.instanceType` when the template has no
//! parameter of that name), found in the function's input catalog, and
//! applied by the same rules as the server's (the model's
//! `InstanceTypeSpec::refusal` and `size`): an OBSOLETE type is refused for
//! a new VM, a template may allow some types only, and a parameter that
//! sets the cores or the memory otherwise is a conflict naming it.

use std::collections::BTreeMap;

use vmaas_model::{InstanceTypeState, MachineSpec, ParameterValue, Template, ValidationErrors};

use crate::xr::{FunctionInput, VmXrSpec, wrap_parameters};

/// The label of a composed instance type naming the vmaas type it is, so
/// that a VM keeps a type made OBSOLETE after it got it.
pub const INSTANCE_TYPE_LABEL: &str = "vmaas.io/instance-type";

/// Seed 001's name for the instance type among a claim's parameters.
const SEED_PARAMETER: &str = "instanceType";

/// The claim's template parameters, without the seed's `instanceType`
/// when the template has no such parameter, and the instance type the
/// claim names (its field, that parameter, or the template's default).
/// Both given and different is an error naming both.
pub fn named(xr: &VmXrSpec, template: &Template) -> Result<(BTreeMap<String, ParameterValue>, Option<String>), ValidationErrors> {
    let mut params = wrap_parameters(&xr.template_parameters);
    let seed = if template.parameter(SEED_PARAMETER).is_none() { params.remove(SEED_PARAMETER) } else { None };
    let seed = match seed.map(|v| v.value.as_str().map(str::to_owned)) {
        Some(None) => {
            return Err(ValidationErrors::one(format!("spec.templateParameters.{SEED_PARAMETER}"), "must be an instance type's name"));
        }
        Some(Some(s)) => Some(s),
        None => None,
    };
    let name = match (xr.instance_type.clone(), seed) {
        (Some(a), Some(b)) if a != b => {
            return Err(ValidationErrors::one(
                "spec.instanceType",
                format!("is {a:?}, but spec.templateParameters.{SEED_PARAMETER} is {b:?}: give one"),
            ));
        }
        (a, b) => a.or(b).or_else(|| template.wire().spec_defaults.instance_type.clone()),
    };
    Ok((params, name))
}

/// Sizes `machine` as instance type `name` of the input's catalog says.
/// `kept` is the type the VM has already (an OBSOLETE type stays its own).
pub fn apply(
    name: &str,
    template: &Template,
    input: &FunctionInput,
    given: &BTreeMap<String, ParameterValue>,
    kept: Option<&str>,
    machine: &mut MachineSpec,
) -> Result<(), ValidationErrors> {
    let Some(t) = input.instance_types.iter().find(|t| t.name == name) else {
        let known: Vec<&str> = input.instance_types.iter().map(|t| t.name.as_str()).collect();
        return Err(ValidationErrors::one(
            "spec.instanceType",
            format!("there is no instance type {name:?} in the composition's input (it has {known:?})"),
        ));
    };
    if let Some(why) = t.spec.refusal(name, template, kept == Some(name)) {
        return Err(ValidationErrors::one("spec.instanceType", why));
    }
    let mut errs = ValidationErrors::default();
    let parameter = |p: &str| format!("spec.templateParameters.{p}");
    let fields = vmaas_model::instance_type::SizingFields { parameter: &parameter, instance_type: "spec.instanceType" };
    t.spec.size(name, template, given, &fields, machine, &mut errs);
    errs.into_result(())
}

/// What a claim of a DEPRECATED instance type `name` is told: the
/// replacement to move to (as the server's VM status says).
pub fn deprecation_note(name: &str, input: &FunctionInput) -> Option<String> {
    let t = input.instance_types.iter().find(|t| t.name == name && t.spec.state == InstanceTypeState::Deprecated)?;
    let replacement = t.spec.deprecation.as_ref().and_then(|d| d.replacement.as_ref()).map(|r| format!(": move to {:?}", r.key()));
    Some(format!("instance type {name:?} is DEPRECATED{}", replacement.unwrap_or_default()))
}
