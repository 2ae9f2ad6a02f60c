//! OSAC's `ComputeInstanceTemplate` (`osac.public.v1`) as a second view of
//! the same templates: the template's JSON rendered as a compute instance
//! template, and such a template's body read as the template body the API
//! takes. The differences: `spec_defaults.image` is the typed reference
//! `disk_image` there (and `instance_type` is typed too; the old
//! `{source_type: "image", source_ref}` image and plain strings are still
//! read), the boot disk size is `boot_disk.size_gib`, and the template's
//! name is also `metadata.name`.

use serde_json::{Map, Value, json};

use crate::{Quantity, ValidationErrors, reference};

/// The `@type` of a compute instance template.
pub const COMPUTE_INSTANCE_TEMPLATE_TYPE_URL: &str = "type.googleapis.com/osac.public.v1.ComputeInstanceTemplate";

const GIB: u64 = 1 << 30;

/// The template JSON `t` as a compute instance template.
pub fn to_compute_instance_template(mut t: Value) -> Value {
    let Value::Object(m) = &mut t else { return t };
    m.insert("@type".into(), Value::from(COMPUTE_INSTANCE_TEMPLATE_TYPE_URL));
    let id = m.get("id").cloned().unwrap_or(Value::Null);
    if let Value::Object(meta) = m.entry("metadata").or_insert_with(|| Value::Object(Map::new())) {
        meta.insert("name".into(), id);
    }
    if let Some(Value::Object(d)) = m.get_mut("spec_defaults") {
        if let Some(Value::String(image)) = d.remove("image") {
            d.insert("disk_image".into(), reference::typed(&image, &image));
        }
        if let Some(Value::String(shape)) = d.remove("instance_type") {
            d.insert("instance_type".into(), reference::typed("", &shape));
        }
        let gib = d.get("disk_size").and_then(Value::as_str).and_then(|q| Quantity::parse(q).ok()).and_then(|q| q.to_units_ceil());
        if let Some(bytes) = gib {
            d.remove("disk_size");
            d.insert("boot_disk".into(), json!({"size_gib": bytes.div_ceil(GIB)}));
        }
    }
    t
}

/// The compute instance template body `ci` (the object of a create or
/// update) read as a template body; what vmaas templates cannot say is an
/// error under `prefix`.
pub fn from_compute_instance_template(ci: Value, prefix: &str) -> Result<Value, ValidationErrors> {
    let mut errs = ValidationErrors::default();
    let Value::Object(mut m) = ci else {
        errs.push(prefix, "must be a JSON object");
        return Err(errs);
    };
    m.remove("@type");
    m.remove("status");
    metadata_from_view(&mut m, prefix, &mut errs);
    if let Some(Value::Object(d)) = m.get_mut("spec_defaults") {
        defaults_from_view(d, &format!("{prefix}.spec_defaults"), &mut errs);
    }
    if errs.is_empty() { Ok(Value::Object(m)) } else { Err(errs) }
}

/// Keeps the metadata a template takes (`version`); a name stands for the id.
fn metadata_from_view(m: &mut Map<String, Value>, prefix: &str, errs: &mut ValidationErrors) {
    let Some(Value::Object(meta)) = m.remove("metadata") else { return };
    let name = meta.get("name").and_then(Value::as_str).filter(|n| !n.is_empty());
    match (name, m.get("id").and_then(Value::as_str).filter(|i| !i.is_empty())) {
        (Some(n), None) => {
            m.insert("id".into(), Value::from(n));
        }
        (Some(n), Some(id)) if n != id => {
            errs.push(format!("{prefix}.metadata.name"), format!("must equal the id ({id:?}): a template is named by its id"));
        }
        _ => {}
    }
    if let Some(v) = meta.get("version").filter(|v| !v.is_null()) {
        m.insert("metadata".into(), json!({"version": v}));
    }
}

/// Renames and checks the compute instance template's defaults in place.
fn defaults_from_view(d: &mut Map<String, Value>, prefix: &str, errs: &mut ValidationErrors) {
    if let Some(image) = d.remove("image").filter(|v| !v.is_null()) {
        let kind = image.get("source_type").and_then(Value::as_str).unwrap_or("image");
        match (kind, image.get("source_ref").and_then(Value::as_str)) {
            ("image" | "", Some(r)) if !r.is_empty() => {
                d.insert("image".into(), Value::from(r));
            }
            ("image" | "", _) => errs.push(format!("{prefix}.image.source_ref"), "is required"),
            (other, _) => errs.push(
                format!("{prefix}.image.source_type"),
                format!("templates name images, got {other:?}: import the image first (POST /images), then name it"),
            ),
        }
    }
    if let Some(disk) = d.remove("boot_disk").filter(|v| !v.is_null()) {
        match disk.get("size_gib").and_then(Value::as_u64) {
            Some(n) if n > 0 => {
                d.insert("disk_size".into(), Value::from(format!("{n}Gi")));
            }
            _ => errs.push(format!("{prefix}.boot_disk.size_gib"), "must be a positive number of GiB"),
        }
    }
    match d.remove("run_strategy").as_ref().and_then(Value::as_str) {
        None | Some("" | "Always") => {}
        Some(other) => errs.push(format!("{prefix}.run_strategy"), format!("is not supported ({other:?}): VMs start running")),
    }
    if let Some(v) = d.remove("instance_type") {
        match reference::key(&v) {
            Ok(Some(shape)) => _ = d.insert("instance_type".into(), Value::from(shape)),
            Ok(None) => {}
            Err(reason) => errs.push(format!("{prefix}.instance_type"), reason),
        }
    }
    if let Some(v) = d.remove("disk_image") {
        match (reference::key(&v), d.contains_key("image")) {
            (Ok(Some(_)), true) => errs.push(format!("{prefix}.disk_image"), "and image name the same thing: give disk_image alone"),
            (Ok(Some(image)), false) => _ = d.insert("image".into(), Value::from(image)),
            (Ok(None), _) => {}
            (Err(reason), _) => errs.push(format!("{prefix}.disk_image"), reason),
        }
    }
    if d.remove("is_windows") == Some(Value::Bool(true)) {
        errs.push(format!("{prefix}.is_windows"), "is not supported: vmaas boots Linux guests");
    }
}

#[cfg(test)]
mod tests;
