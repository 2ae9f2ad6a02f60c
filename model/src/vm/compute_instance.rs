//! OSAC's `ComputeInstance` (`osac.public.v1`) as a second view of the same
//! VM objects: the VM's JSON rendered as a compute instance, and a compute
//! instance's create or update body read as the VM body the API takes.
//!
//! The differences: `spec.run_strategy` (`Always`, `Halted`) is the VM's
//! `spec.state` (`started`, `stopped`); the status's state and conditions
//! have OSAC's compute instance names; `status.internal_ip_address` and
//! `external_ip_address` are `internalIP` and `externalIP`; the metadata's
//! `creator` is the first of `creators`; `spec.restart_requested_at` asks
//! for a restart. References are typed (`crate::reference`): the template,
//! the instance type, the disk image (the VM's `spec.image`), and each
//! attachment's subnet and security groups are `{id, name}` in answers,
//! and either that or the old plain string in requests.

use serde_json::{Map, Value, json};

use crate::ValidationErrors;
use crate::reference::{self, Names, Referred};

/// The `@type` of a compute instance.
pub const COMPUTE_INSTANCE_TYPE_URL: &str = "type.googleapis.com/osac.public.v1.ComputeInstance";

/// A compute instance body read as a VM body.
#[derive(Debug, Clone, PartialEq)]
pub struct VmBody {
    /// The VM's JSON (`id`, `metadata`, `spec`).
    pub vm: Value,
    /// `spec.restart_requested_at`, when the body asks for a restart.
    pub restart_requested_at: Option<String>,
}

/// The VM JSON `vm` as a compute instance, its references named as
/// `names` says.
pub fn to_compute_instance(mut vm: Value, names: &Names) -> Value {
    let Value::Object(m) = &mut vm else { return vm };
    m.insert("@type".into(), Value::from(COMPUTE_INSTANCE_TYPE_URL));
    let stopping = m.get("spec").and_then(|s| s.get("state")).and_then(Value::as_str) == Some("stopped");
    if let Some(Value::Object(meta)) = m.get_mut("metadata") {
        let creator = meta.remove("creators").and_then(|c| c.get(0).cloned());
        if let Some(c) = creator {
            meta.insert("creator".into(), c);
        }
    }
    if let Some(Value::Object(spec)) = m.get_mut("spec") {
        let state = spec.remove("state");
        let strategy = if state.as_ref().and_then(Value::as_str) == Some("stopped") { "Halted" } else { "Always" };
        spec.insert("run_strategy".into(), Value::from(strategy));
        references_view(spec, names);
    }
    if let Some(Value::Object(status)) = m.get_mut("status") {
        status_view(status, stopping);
    }
    vm
}

/// The spec's references, typed.
fn references_view(spec: &mut Map<String, Value>, names: &Names) {
    if let Some(Value::String(t)) = spec.remove("template") {
        spec.insert("template".into(), reference::typed(&t, &t));
    }
    if let Some(image) = spec.remove("image") {
        let held = image.get("source_ref").and_then(Value::as_str).unwrap_or_default();
        spec.insert("disk_image".into(), reference::to(names, Referred::Image, held));
    }
    let Some(Value::Array(nics)) = spec.get_mut("network_attachments") else { return };
    for nic in nics.iter_mut().filter_map(Value::as_object_mut) {
        if let Some(Value::String(id)) = nic.remove("subnet") {
            nic.insert("subnet".into(), reference::to(names, Referred::Subnet, &id));
        }
        if let Some(Value::Array(groups)) = nic.get_mut("security_groups") {
            for g in groups.iter_mut() {
                if let Value::String(id) = g {
                    *g = reference::to(names, Referred::SecurityGroup, &id.clone());
                }
            }
        }
    }
}

/// The VM status `status` in compute instance names.
fn status_view(status: &mut Map<String, Value>, stopping: bool) {
    let state = status.get("state").and_then(Value::as_str).unwrap_or_default();
    let state = match state {
        // A migrating guest keeps running.
        "VIRTUAL_MACHINE_STATE_READY" | "VIRTUAL_MACHINE_STATE_MIGRATING" => "COMPUTE_INSTANCE_STATE_RUNNING",
        "VIRTUAL_MACHINE_STATE_PAUSED" => "COMPUTE_INSTANCE_STATE_PAUSED",
        "VIRTUAL_MACHINE_STATE_STOPPED" => "COMPUTE_INSTANCE_STATE_STOPPED",
        "VIRTUAL_MACHINE_STATE_FAILED" => "COMPUTE_INSTANCE_STATE_FAILED",
        "VIRTUAL_MACHINE_STATE_DELETING" => "COMPUTE_INSTANCE_STATE_DELETING",
        "VIRTUAL_MACHINE_STATE_PROGRESSING" if stopping => "COMPUTE_INSTANCE_STATE_STOPPING",
        "VIRTUAL_MACHINE_STATE_PROGRESSING" => "COMPUTE_INSTANCE_STATE_STARTING",
        _ => "COMPUTE_INSTANCE_STATE_UNSPECIFIED",
    };
    status.insert("state".into(), Value::from(state));
    for (from, to) in [("internalIP", "internal_ip_address"), ("externalIP", "external_ip_address")] {
        if let Some(v) = status.remove(from) {
            status.insert(to.into(), v);
        }
    }
    if let Some(Value::Array(conditions)) = status.get_mut("conditions") {
        conditions.retain_mut(|c| {
            let kind = c.get("type").and_then(Value::as_str).and_then(condition_view);
            match (kind, c.as_object_mut()) {
                (Some(k), Some(m)) => {
                    m.insert("type".into(), Value::from(k));
                    true
                }
                _ => false,
            }
        });
    }
}

/// The compute instance name of a VM condition, if it has one (the VM's
/// progressing, failed and degraded conditions are in the state).
fn condition_view(vm_condition: &str) -> Option<&'static str> {
    match vm_condition {
        "VIRTUAL_MACHINE_CONDITION_TYPE_READY" => Some("COMPUTE_INSTANCE_CONDITION_TYPE_READY"),
        "VIRTUAL_MACHINE_CONDITION_TYPE_RESTART_REQUIRED" => Some("COMPUTE_INSTANCE_CONDITION_TYPE_RESTART_REQUIRED"),
        _ => None,
    }
}

/// The compute instance body `ci` (the object of a create or update) read
/// as a VM body; fields vmaas cannot honour are errors under `prefix`.
pub fn from_compute_instance(ci: Value, prefix: &str) -> Result<VmBody, ValidationErrors> {
    let mut errs = ValidationErrors::default();
    let Value::Object(mut m) = ci else {
        errs.push(prefix, "must be a JSON object");
        return Err(errs);
    };
    m.remove("@type");
    m.remove("status");
    if let Some(Value::Object(meta)) = m.get_mut("metadata") {
        for output_only in ["creator", "tenant", "project", "creation_timestamp", "deletion_timestamp"] {
            meta.remove(output_only);
        }
    }
    let mut restart = None;
    if let Some(Value::Object(spec)) = m.get_mut("spec") {
        restart = spec.remove("restart_requested_at").and_then(|v| v.as_str().map(str::to_owned));
        spec_from_view(spec, &format!("{prefix}.spec"), &mut errs);
    }
    if errs.is_empty() { Ok(VmBody { vm: Value::Object(m), restart_requested_at: restart }) } else { Err(errs) }
}

/// Renames and checks the compute instance spec fields in place.
fn spec_from_view(spec: &mut Map<String, Value>, prefix: &str, errs: &mut ValidationErrors) {
    if spec.remove("is_windows") == Some(Value::Bool(true)) {
        errs.push(format!("{prefix}.is_windows"), "is not supported: vmaas boots Linux guests");
    }
    references_from_view(spec, prefix, errs);
    if let Some(strategy) = spec.remove("run_strategy") {
        let state = match strategy.as_str() {
            None if strategy.is_null() => None,
            Some("") => None,
            Some("Always" | "RerunOnFailure") => Some("started"),
            Some("Halted") => Some("stopped"),
            _ => {
                errs.push(format!("{prefix}.run_strategy"), format!("must be Always or Halted, got {strategy}"));
                None
            }
        };
        if let Some(state) = state {
            spec.insert("state".into(), Value::from(state));
        }
    }
}

/// The spec's references (typed, or plain strings) as the VM holds them.
fn references_from_view(spec: &mut Map<String, Value>, prefix: &str, errs: &mut ValidationErrors) {
    for field in ["template", "instance_type", "catalog_item"] {
        if let Some(v) = spec.remove(field)
            && let Some(k) = read(&v, format!("{prefix}.{field}"), errs)
        {
            spec.insert(field.into(), Value::from(k));
        }
    }
    if let Some(v) = spec.remove("disk_image")
        && let Some(k) = read(&v, format!("{prefix}.disk_image"), errs)
    {
        match spec.contains_key("image") {
            true => errs.push(format!("{prefix}.disk_image"), "and image name the same thing: give disk_image alone"),
            false => _ = spec.insert("image".into(), json!({"source_ref": k})),
        }
    }
    let Some(Value::Array(nics)) = spec.get_mut("network_attachments") else { return };
    for (i, nic) in nics.iter_mut().enumerate().filter_map(|(i, n)| Some((i, n.as_object_mut()?))) {
        let at = format!("{prefix}.network_attachments[{i}]");
        if let Some(v) = nic.remove("subnet") {
            nic.insert("subnet".into(), Value::from(read(&v, format!("{at}.subnet"), errs).unwrap_or_default()));
        }
        if let Some(Value::Array(groups)) = nic.get_mut("security_groups") {
            for (j, g) in groups.iter_mut().enumerate() {
                *g = Value::from(read(g, format!("{at}.security_groups[{j}]"), errs).unwrap_or_default());
            }
        }
    }
}

/// What reference `v` names; why it is not one goes into `errs` under `field`.
fn read(v: &Value, field: String, errs: &mut ValidationErrors) -> Option<String> {
    reference::key(v).map_err(|reason| errs.push(field, reason)).ok().flatten()
}

#[cfg(test)]
mod tests;
