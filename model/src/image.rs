//! OS images VMs boot from (seed 001's "import my OS base image", "list
//! available base OS images"). Public images are the administrators': the
//! backend's catalog (the qemu backend's images directory), and images an
//! administrator imports with `spec.public`. A tenant imports its own from
//! an `http(s)` URL or an OCI registry (`docker://`, a containerDisk) in
//! `spec.source`, or by uploading it, optionally checked
//! against `spec.sha256`. An image is named by `vm_image` in a template or
//! a VM's parameters; `status.references` counts the VMs booting from it
//! and the volumes starting as it.

pub mod disk_image;
pub mod lifecycle;

pub use lifecycle::{ImageDeprecation, ImageLifecycle, ImageLifecyclePatch};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::labels::StringMap;
use crate::validation::ValidationErrors;

/// The `@type` of an image in API responses.
pub const IMAGE_TYPE_URL: &str = "type.googleapis.com/vmaas.v1.Image";

/// Who an image belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ImageMetadata {
    /// Its name, which `vm_image` uses.
    pub name: String,
    /// Published by the administrators for every tenant.
    pub public: bool,
    /// The tenant that imported it (none for the catalog's images).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// When it was imported (none for the catalog's images).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<DateTime<Utc>>,
    /// The version of what was asked (none for the catalog's images).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    /// Set once its deletion was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<DateTime<Utc>>,
    /// Labels, as every kind has them.
    #[serde(default, skip_serializing_if = "StringMap::is_empty")]
    pub labels: StringMap,
    /// Annotations, as every kind has them.
    #[serde(default, skip_serializing_if = "StringMap::is_empty")]
    pub annotations: StringMap,
}

impl ImageMetadata {
    /// The metadata of a catalog image.
    pub fn catalog(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            public: true,
            tenant: None,
            creation_timestamp: None,
            version: None,
            deletion_timestamp: None,
            labels: StringMap::new(),
            annotations: StringMap::new(),
        }
    }
}

/// The largest description.
pub const MAX_DESCRIPTION: usize = 1024;

/// What the image is, and where it comes from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ImageSpec {
    /// What it holds, as its publisher describes it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// An `http(s)` URL to import it from, or a `docker://` reference to
    /// a containerDisk in an OCI registry; absent: uploaded with
    /// `PUT /images/{id}/content`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The SHA-256 of the file, in hex: the import fails on a mismatch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Published for every tenant (administrators only).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub public: bool,
    /// The guest's OS family, `linux` or `windows` (OSAC's
    /// `GUEST_OS_FAMILY_LINUX`/`_WINDOWS` are taken too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_os_family: Option<crate::profile::GuestOsFamily>,
    /// The firmware it boots by, `bios` or `efi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firmware: Option<crate::profile::Firmware>,
    /// Whether its boot chain is signed for Secure Boot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secure_boot: Option<bool>,
    /// Whether its guest wants a TPM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpm: Option<bool>,
    /// Where it is in its life (OSAC's `DiskImageLifecycle`; left out while AVAILABLE).
    /// Changed by a PATCH; an import is AVAILABLE.
    #[serde(default, skip_serializing_if = "ImageLifecycle::is_available")]
    pub lifecycle: ImageLifecycle,
    /// When it was deprecated, and when it becomes (or became) obsolete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecation: Option<ImageDeprecation>,
    /// Credentials for a registry that refuses anonymous pulls (a
    /// `docker://` source only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry_credentials: Option<RegistryCredentials>,
}

/// Credentials an image is pulled from its registry with. The password is
/// taken at import, sealed by the server and kept apart from the image, and
/// forgotten once the import ended: it is never answered (the username is).
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RegistryCredentials {
    /// The user name.
    pub username: String,
    /// The password or token (write-only: never serialised).
    #[serde(default, skip_serializing)]
    pub password: String,
}

impl std::fmt::Debug for RegistryCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryCredentials").field("username", &self.username).field("password", &"<redacted>").finish()
    }
}

impl RegistryCredentials {
    /// Checks the credentials of an import from `source`, under `prefix`.
    fn check(&self, source: Option<&str>, prefix: &str, errs: &mut ValidationErrors) {
        if !source.is_some_and(|s| s.starts_with(crate::machine::REGISTRY_SCHEME)) {
            errs.push(prefix, "are for an image pulled from an OCI registry: give a docker:// source");
        }
        let bad = |t: &str| t.chars().any(char::is_control);
        match self.username.as_str() {
            "" => errs.push(format!("{prefix}.username"), "is required"),
            u if u.len() > MAX_CREDENTIAL || bad(u) || u.contains(':') => errs
                .push(format!("{prefix}.username"), format!("must be at most {MAX_CREDENTIAL} bytes, with no ':' or control characters")),
            _ => {}
        }
        match self.password.as_str() {
            "" => errs.push(format!("{prefix}.password"), "is required"),
            p if p.len() > MAX_CREDENTIAL || bad(p) => {
                errs.push(format!("{prefix}.password"), format!("must be at most {MAX_CREDENTIAL} bytes, with no control characters"));
            }
            _ => {}
        }
    }
}

/// The longest user name or password of registry credentials, in bytes.
pub const MAX_CREDENTIAL: usize = 4096;

impl ImageSpec {
    /// What the image says of its guest's platform; a VM's template lays its own over it.
    pub fn profile(&self) -> crate::GuestProfile {
        crate::GuestProfile { firmware: self.firmware, secure_boot: self.secure_boot, tpm: self.tpm, guest_os_family: self.guest_os_family }
    }

    /// Checks what the spec says by itself, naming fields under `prefix`;
    /// the checksum is normalised to lower case.
    pub fn checked(mut self, prefix: &str) -> Result<Self, ValidationErrors> {
        let mut errs = ValidationErrors::default();
        if self.description.len() > MAX_DESCRIPTION {
            errs.push(format!("{prefix}.description"), format!("must be at most {MAX_DESCRIPTION} bytes"));
        }
        if let Some(url) = &self.source {
            let as_boot = crate::BootSource { image: url.clone() };
            let problem = match (as_boot.is_url(), as_boot.check_url()) {
                (false, _) => Some(format!(
                    "{url:?} is not a URL: give an http(s) URL, a docker:// reference into an OCI registry, or none and upload the file"
                )),
                (true, Err(e)) => Some(e.to_string()),
                (true, Ok(())) => None,
            };
            if let Some(p) = problem {
                errs.push(format!("{prefix}.source"), p);
            }
        }
        if let Some(c) = &self.registry_credentials {
            c.check(self.source.as_deref(), &format!("{prefix}.registry_credentials"), &mut errs);
        }
        self.profile().check(prefix, &mut errs);
        if !self.lifecycle.is_available() || self.deprecation.is_some() {
            errs.push(
                format!("{prefix}.lifecycle"),
                "an import is DISK_IMAGE_LIFECYCLE_AVAILABLE: deprecate it with a PATCH once imported",
            );
        }
        if let Some(sum) = &mut self.sha256 {
            *sum = sum.trim().to_ascii_lowercase();
            if sum.len() != 64 || !sum.bytes().all(|b| b.is_ascii_hexdigit()) {
                errs.push(format!("{prefix}.sha256"), "must be 64 hexadecimal digits (a SHA-256)");
            }
        }
        errs.into_result(self)
    }
}

crate::wire_states! {
    /// The state of an image.
    ImageState {
        /// Known, not usable yet.
        Pending = "IMAGE_STATE_PENDING",
        /// Being imported.
        Importing = "IMAGE_STATE_IMPORTING",
        /// VMs can boot from it.
        Ready = "IMAGE_STATE_READY",
        /// Unusable; see the message.
        Failed = "IMAGE_STATE_FAILED",
    }
}

/// What the image is now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ImageStatus {
    /// Overall state.
    pub state: ImageState,
    /// The disk format: `qcow2` or `raw`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub format: String,
    /// The size the guest sees, in bytes.
    #[serde(default)]
    pub virtual_size: u64,
    /// The VMs booting from it and the volumes made from it (an image in
    /// use is never removed).
    #[serde(default)]
    pub references: u32,
    /// Why it is not usable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Bytes received so far while importing.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub progress_bytes: u64,
    /// The size of the file, once known.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub size_bytes: u64,
    /// The SHA-256 of the file imported, in hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Since when no VM or volume uses it (an imported image is pruned
    /// once unused for the server's `--image-retention`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unused_since: Option<DateTime<Utc>>,
}

impl crate::kind::Object for Image {
    const KIND: crate::ObjectKind = crate::ObjectKind::Image;
    type Spec = ImageSpec;
    type Status = ImageStatus;

    fn state(_: &ImageSpec, status: &ImageStatus) -> &'static str {
        status.state.as_str()
    }

    /// An imported image: its metadata says whether it is public.
    fn assemble(id: String, metadata: crate::Metadata, spec: ImageSpec, status: ImageStatus) -> Self {
        let metadata = ImageMetadata {
            name: metadata.name,
            public: spec.public,
            tenant: Some(metadata.tenant),
            creation_timestamp: Some(metadata.creation_timestamp),
            version: Some(metadata.version),
            deletion_timestamp: metadata.deletion_timestamp,
            labels: metadata.labels,
            annotations: metadata.annotations,
        };
        Image { type_url: IMAGE_TYPE_URL.into(), id, metadata, spec, status }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// An image as the API returns it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Image {
    /// Always `type.googleapis.com/vmaas.v1.Image`.
    #[serde(rename = "@type")]
    pub type_url: String,
    /// Its name for the catalog's images; a UUID for imported ones.
    pub id: String,
    /// Name and owner.
    pub metadata: ImageMetadata,
    /// What it is.
    pub spec: ImageSpec,
    /// What it is now.
    pub status: ImageStatus,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_serialises_with_wire_names() {
        let i = Image {
            type_url: IMAGE_TYPE_URL.into(),
            id: "debian-12".into(),
            metadata: ImageMetadata::catalog("debian-12"),
            spec: ImageSpec::default(),
            status: ImageStatus {
                state: ImageState::Ready,
                format: "qcow2".into(),
                virtual_size: 1 << 30,
                references: 2,
                ..Default::default()
            },
        };
        let v = serde_json::to_value(&i).unwrap();
        assert_eq!(v["status"]["state"], "IMAGE_STATE_READY");
        assert_eq!(v["status"]["virtual_size"], 1u64 << 30);
        assert!(v["spec"].get("description").is_none());
        assert_eq!(serde_json::from_value::<Image>(v).unwrap(), i);
    }

    #[test]
    fn registry_credentials_are_checked_and_their_password_never_written() {
        let spec = |v: serde_json::Value| serde_json::from_value::<ImageSpec>(v).unwrap().checked("object.spec");
        let ok = spec(serde_json::json!({"source": "docker://127.0.0.1:5000/d/g:1",
            "registry_credentials": {"username": "puller", "password": "s3cret"}}))
        .unwrap();
        let written = serde_json::to_string(&ok).unwrap();
        assert!(written.contains("puller") && !written.contains("s3cret"), "{written}");
        assert!(!format!("{ok:?}").contains("s3cret"));
        let errs = spec(serde_json::json!({"source": "https://x/a.qcow2", "registry_credentials": {"username": "a:b", "password": ""}}))
            .unwrap_err();
        let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            ["object.spec.registry_credentials", "object.spec.registry_credentials.username", "object.spec.registry_credentials.password"]
        );
    }

    #[test]
    fn an_import_names_an_http_url_and_a_sha256() {
        let ok: ImageSpec =
            serde_json::from_value(serde_json::json!({"source": "https://example.com/a.qcow2", "sha256": "AB".repeat(32)})).unwrap();
        assert_eq!(ok.checked("object.spec").unwrap().sha256.unwrap(), "ab".repeat(32));
        for (spec, field) in [
            (serde_json::json!({"source": "ftp://example.com/a.qcow2"}), "object.spec.source"),
            (serde_json::json!({"source": "/etc/passwd"}), "object.spec.source"),
            (serde_json::json!({"sha256": "abc"}), "object.spec.sha256"),
        ] {
            let e = serde_json::from_value::<ImageSpec>(spec.clone()).unwrap().checked("object.spec").unwrap_err();
            assert_eq!(e.0[0].field, field, "{spec}");
        }
        assert!(serde_json::from_value::<ImageSpec>(serde_json::json!({"url": "x"})).is_err(), "unknown fields are refused");
    }
}
