//! OSAC's `DiskImage` (`osac.public.v1` as of a446890594) as a view of
//! vmaas's images: an image read as a disk image, and a disk image's
//! create body read as an image import.
//!
//! A disk image's `source_ref` is the `http(s)` URL to import (its
//! `source_type` left unspecified), or with `SOURCE_TYPE_REGISTRY` an OCI
//! image reference (`HOST/REPOSITORY:TAG` or `@sha256:DIGEST`, a
//! containerDisk), kept as the image's `docker://` source. The architecture is `ARCHITECTURE_AMD64`, the only one this host
//! runs. An import is `DISK_IMAGE_LIFECYCLE_AVAILABLE`; an update moves
//! its lifecycle ([`patch_of_disk_image`], [`super::lifecycle`]).
//! The import's progress is in the status, which OSAC leaves empty
//! (`state`, `message`, `virtual_size`, `progress_bytes`, `size_bytes`).

use serde_json::{Map, Value, json};

use crate::ValidationErrors;
use crate::machine::REGISTRY_SCHEME;
use crate::profile::GuestOsFamily;

use super::{Image, ImageSpec};

/// The `@type` of a disk image.
pub const DISK_IMAGE_TYPE_URL: &str = "type.googleapis.com/osac.public.v1.DiskImage";

/// OSAC's source type of an image in an OCI registry.
const REGISTRY: &str = "SOURCE_TYPE_REGISTRY";

/// The one architecture vmaas's guests have.
const AMD64: &str = "ARCHITECTURE_AMD64";

/// What a disk image's spec shows of an image, by OSAC's wire names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    /// `SOURCE_TYPE_REGISTRY` for an OCI image, else none (unspecified).
    pub source_type: Option<&'static str>,
    /// The URL, or the OCI reference without `docker://`.
    pub source_ref: String,
    /// `GUEST_OS_FAMILY_LINUX` or `_WINDOWS`.
    pub guest_os_family: &'static str,
    /// `ARCHITECTURE_AMD64`, the one there is.
    pub architecture: &'static str,
}

/// What image `i` shows as a disk image's spec.
pub fn shown(i: &Image) -> Shown {
    let guest_os_family = match i.spec.guest_os_family.unwrap_or_default() {
        GuestOsFamily::Linux => "GUEST_OS_FAMILY_LINUX",
        GuestOsFamily::Windows => "GUEST_OS_FAMILY_WINDOWS",
    };
    let source = i.spec.source.clone().unwrap_or_else(|| i.metadata.name.clone());
    match source.strip_prefix(REGISTRY_SCHEME) {
        Some(r) => Shown { source_type: Some(REGISTRY), source_ref: r.to_owned(), guest_os_family, architecture: AMD64 },
        None => Shown { source_type: None, source_ref: source, guest_os_family, architecture: AMD64 },
    }
}

/// Image `i` as a disk image.
pub fn to_disk_image(i: &Image) -> Value {
    let mut metadata = serde_json::to_value(&i.metadata).unwrap_or_else(|_| json!({}));
    if let Some(m) = metadata.as_object_mut() {
        m.remove("public");
    }
    let mut status = json!({
        "state": i.status.state,
        "virtual_size": i.status.virtual_size,
        "progress_bytes": i.status.progress_bytes,
        "size_bytes": i.status.size_bytes,
    });
    if let Some(why) = &i.status.message {
        status["message"] = Value::from(why.as_str());
    }
    let view = shown(i);
    let mut spec = json!({
        "source_ref": view.source_ref,
        "guest_os_family": view.guest_os_family,
        "architecture": [view.architecture],
        "lifecycle": i.spec.lifecycle,
    });
    if let Some(t) = view.source_type {
        spec["source_type"] = Value::from(t);
    }
    if let Some(d) = &i.spec.deprecation {
        spec["deprecation"] = serde_json::to_value(d).unwrap_or_default();
    }
    json!({"@type": DISK_IMAGE_TYPE_URL, "id": i.id, "metadata": metadata, "spec": spec, "status": status})
}

/// The disk image body `di` (the object of an update) read as the body of
/// an image's PATCH: its metadata, and of its spec the lifecycle and the
/// deprecation; another spec field sent back as `now` (the image's disk
/// image) has it is ignored, a change of one is an error under `prefix`.
pub fn patch_of_disk_image(di: Value, now: &Value, prefix: &str) -> Result<Value, ValidationErrors> {
    let mut errs = ValidationErrors::default();
    let Value::Object(mut m) = di else {
        errs.push(prefix, "must be a JSON object");
        return Err(errs);
    };
    let mut out = Map::new();
    for f in ["id", "metadata"] {
        if let Some(v) = m.remove(f) {
            out.insert(f.into(), v);
        }
    }
    let mut spec = Map::new();
    if let Some(Value::Object(given)) = m.remove("spec") {
        for (f, v) in given {
            match f.as_str() {
                "lifecycle" | "deprecation" => _ = spec.insert(f, v),
                _ if now["spec"].get(&f) == Some(&v) => {}
                _ => errs.push(format!("{prefix}.spec.{f}"), FIXED_AT_IMPORT),
            }
        }
    }
    out.insert("spec".into(), Value::Object(spec));
    if errs.is_empty() { Ok(Value::Object(out)) } else { Err(errs) }
}

/// Why a field of an imported disk image does not change.
pub const FIXED_AT_IMPORT: &str = "is fixed at import: only lifecycle and deprecation change";

/// A disk image's spec as a create asks for it, by OSAC's wire names
/// (empty: not given).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Asked {
    /// `SOURCE_TYPE_REGISTRY`, or empty or `SOURCE_TYPE_UNSPECIFIED`.
    pub source_type: String,
    /// The URL, or the OCI reference.
    pub source_ref: String,
    /// `GUEST_OS_FAMILY_*`, or empty.
    pub guest_os_family: String,
    /// `ARCHITECTURE_*`, each.
    pub architecture: Vec<String>,
    /// `DISK_IMAGE_LIFECYCLE_*`, or empty.
    pub lifecycle: String,
    /// A description (vmaas's).
    pub description: Option<String>,
    /// A deprecation was given.
    pub deprecation: bool,
}

/// The image import a disk image's spec asks for; what vmaas cannot honour
/// goes into `errs`, named under `prefix` (the object).
pub fn import_spec(asked: Asked, prefix: &str, errs: &mut ValidationErrors) -> ImageSpec {
    let at = |f: &str| format!("{prefix}.spec.{f}");
    let mut image = ImageSpec { description: asked.description.unwrap_or_default(), ..ImageSpec::default() };
    if asked.deprecation {
        errs.push(at("deprecation"), "cannot be set at import: deprecate the image with an update once imported");
    }
    let registry = match asked.source_type.as_str() {
        "" | "SOURCE_TYPE_UNSPECIFIED" => false,
        REGISTRY => true,
        other => {
            errs.push(at("source_type"), format!("unknown source type {other:?}"));
            false
        }
    };
    match asked.source_ref {
        r if r.is_empty() && registry => errs.push(at("source_ref"), "is required: the image's reference, HOST/REPOSITORY:TAG"),
        r if r.is_empty() => errs.push(at("source_ref"), "is required: the http(s) URL to import the image from"),
        r if registry && r.contains("://") && !r.starts_with(REGISTRY_SCHEME) => errs.push(
            at("source_ref"),
            "is an OCI image reference with SOURCE_TYPE_REGISTRY: HOST/REPOSITORY:TAG, with no scheme but docker://",
        ),
        r if registry && !r.starts_with(REGISTRY_SCHEME) => image.source = Some(format!("{REGISTRY_SCHEME}{r}")),
        r => image.source = Some(r),
    }
    image.guest_os_family = match asked.guest_os_family.as_str() {
        "" | "GUEST_OS_FAMILY_UNSPECIFIED" => None,
        "GUEST_OS_FAMILY_LINUX" => Some(GuestOsFamily::Linux),
        "GUEST_OS_FAMILY_WINDOWS" => Some(GuestOsFamily::Windows),
        other => {
            errs.push(at("guest_os_family"), format!("must be GUEST_OS_FAMILY_LINUX or GUEST_OS_FAMILY_WINDOWS, got {other}"));
            None
        }
    };
    for (i, a) in asked.architecture.iter().enumerate() {
        if a != AMD64 {
            errs.push(format!("{}[{i}]", at("architecture")), format!("must be {AMD64}: this host runs x86_64 guests, got {a}"));
        }
    }
    match asked.lifecycle.as_str() {
        "" | "DISK_IMAGE_LIFECYCLE_UNSPECIFIED" | "DISK_IMAGE_LIFECYCLE_AVAILABLE" => {}
        other => errs.push(at("lifecycle"), format!("cannot be {other} at import: deprecate the image with an update once imported")),
    }
    image
}

/// The disk image body `di` (the object of a create) read as an image
/// import's body (`{metadata, spec}`, the spec an [`ImageSpec`]); what
/// vmaas cannot honour is an error under `prefix`.
pub fn from_disk_image(di: Value, prefix: &str) -> Result<Value, ValidationErrors> {
    let mut errs = ValidationErrors::default();
    let Value::Object(mut m) = di else {
        errs.push(prefix, "must be a JSON object");
        return Err(errs);
    };
    let mut out = Map::new();
    if let Some(meta) = m.remove("metadata") {
        out.insert("metadata".into(), meta);
    }
    let spec = m.remove("spec").unwrap_or_else(|| json!({}));
    for f in m.keys().filter(|f| !["@type", "id", "status"].contains(&f.as_str())) {
        errs.push(format!("{prefix}.{f}"), "is not a field of a disk image");
    }
    let at = |f: &str| format!("{prefix}.spec.{f}");
    for (f, _) in spec.as_object().into_iter().flatten() {
        match f.as_str() {
            "source_type" | "source_ref" | "guest_os_family" | "architecture" | "lifecycle" | "description" | "deprecation" => {}
            "public" => errs.push(at(f), "is not a disk image field: an administrator publishes an image with spec.public of POST /images"),
            _ => errs.push(at(f), "is not a field of a disk image's spec"),
        }
    }
    let text = |f: &str| match spec.get(f) {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(t)) => t.clone(),
        Some(other) => other.to_string(),
    };
    let asked = Asked {
        source_type: text("source_type"),
        source_ref: text("source_ref"),
        guest_os_family: text("guest_os_family"),
        architecture: spec
            .get("architecture")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|a| a.as_str().map_or_else(|| a.to_string(), str::to_owned))
            .collect(),
        lifecycle: text("lifecycle"),
        description: spec.get("description").and_then(Value::as_str).map(str::to_owned),
        deprecation: spec.get("deprecation").is_some_and(|d| !d.is_null() && *d != json!({})),
    };
    let image = import_spec(asked, prefix, &mut errs);
    out.insert("spec".into(), serde_json::to_value(image).unwrap_or_default());
    if errs.is_empty() { Ok(Value::Object(out)) } else { Err(errs) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_disk_image_body_reads_as_an_import() {
        let di = json!({"metadata": {"name": "deb", "display_name": "Debian"}, "spec": {"source_ref": "http://127.0.0.1:8/d.qcow2",
            "guest_os_family": "GUEST_OS_FAMILY_LINUX", "architecture": ["ARCHITECTURE_AMD64"], "lifecycle": "DISK_IMAGE_LIFECYCLE_AVAILABLE"}});
        let body = from_disk_image(di, "object").unwrap();
        assert_eq!(
            body,
            json!({"metadata": {"name": "deb", "display_name": "Debian"},
            "spec": {"source": "http://127.0.0.1:8/d.qcow2", "guest_os_family": "linux"}})
        );
    }

    #[test]
    fn an_update_moves_the_lifecycle_and_keeps_the_rest() {
        let now = json!({"spec": {"source_ref": "http://x/a.qcow2", "architecture": ["ARCHITECTURE_AMD64"]}});
        let sent = json!({"id": "i1", "metadata": {"labels": {"a": "b"}}, "spec": {"source_ref": "http://x/a.qcow2",
            "architecture": ["ARCHITECTURE_AMD64"], "lifecycle": "DISK_IMAGE_LIFECYCLE_DEPRECATED"}});
        let body = patch_of_disk_image(sent, &now, "object").unwrap();
        assert_eq!(body, json!({"id": "i1", "metadata": {"labels": {"a": "b"}}, "spec": {"lifecycle": "DISK_IMAGE_LIFECYCLE_DEPRECATED"}}));
        let moved = json!({"spec": {"source_ref": "http://y/b.qcow2"}});
        let errs = patch_of_disk_image(moved, &now, "object").unwrap_err();
        assert_eq!(errs.0[0].field, "object.spec.source_ref");
    }

    #[test]
    fn what_vmaas_cannot_import_is_named() {
        let di = json!({"spec": {"source_type": "SOURCE_TYPE_OCI", "architecture": ["ARCHITECTURE_ARM64"],
            "lifecycle": "DISK_IMAGE_LIFECYCLE_OBSOLETE"}});
        let errs = from_disk_image(di, "object").unwrap_err();
        let fields: Vec<&str> = errs.0.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["object.spec.source_type", "object.spec.source_ref", "object.spec.architecture[0]", "object.spec.lifecycle"]);
        let https = json!({"spec": {"source_type": "SOURCE_TYPE_REGISTRY", "source_ref": "https://quay.io/x/y:1"}});
        assert_eq!(from_disk_image(https, "object").unwrap_err().0[0].field, "object.spec.source_ref");
    }

    #[test]
    fn a_registry_image_is_a_docker_source_and_answers_as_one() {
        let di = json!({"metadata": {"name": "c"}, "spec": {"source_type": "SOURCE_TYPE_REGISTRY", "source_ref": "127.0.0.1:5000/d/g:1"}});
        let body = from_disk_image(di, "object").unwrap();
        assert_eq!(body["spec"], json!({"source": "docker://127.0.0.1:5000/d/g:1"}));
        let image = Image {
            type_url: crate::image::IMAGE_TYPE_URL.into(),
            id: "i".into(),
            metadata: crate::image::ImageMetadata::catalog("c"),
            spec: serde_json::from_value(body["spec"].clone()).unwrap(),
            status: Default::default(),
        };
        let back = to_disk_image(&image);
        assert_eq!((&back["spec"]["source_type"], &back["spec"]["source_ref"]), (&json!(REGISTRY), &json!("127.0.0.1:5000/d/g:1")));
    }

    #[test]
    fn fields_it_would_drop_are_refused() {
        let di = json!({"spec": {"source_ref": "http://x/a.qcow2", "public": true,
            "deprecation": {"obsolescence_timestamp": "9999-01-01T00:00:00Z"}, "colour": "red"}, "extra": 1});
        let errs = from_disk_image(di, "object").unwrap_err();
        let mut fields: Vec<&str> = errs.0.iter().map(|e| e.field.as_str()).collect();
        fields.sort_unstable();
        assert_eq!(fields, ["object.extra", "object.spec.colour", "object.spec.deprecation", "object.spec.public"]);
    }
}
