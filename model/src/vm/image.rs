//! `spec.image` of a VM: OSAC's `ComputeInstanceImage`
//! (`{source_type, source_ref}`), the image it boots in place of the one
//! its template chooses.

use serde::{Deserialize, Serialize};

use crate::machine::BootSource;

/// `source_type` of an image in the server's image list (catalog or imported), by name or id.
pub const SOURCE_IMAGE: &str = "image";
/// `source_type` of an `http(s)` URL, imported on demand (seed 004).
pub const SOURCE_URL: &str = "url";
/// OSAC's `source_type` of an OCI registry image (KubeVirt container disks).
pub const SOURCE_REGISTRY: &str = "registry";

/// The image a VM boots, in place of its template's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct VmImage {
    /// `image` (a name or id from `GET /images`) or `url` (`http(s)`,
    /// imported on demand); empty: `url` for an `http(s)://` reference, else `image`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source_type: String,
    /// The image's name or id, or its URL.
    pub source_ref: String,
}

/// Why a `spec.image` is refused: the field under `spec.image` and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct VmImageError {
    /// `source_type` or `source_ref`.
    pub field: &'static str,
    /// Why.
    pub reason: String,
}

impl VmImageError {
    fn new(field: &'static str, reason: impl Into<String>) -> Self {
        Self { field, reason: reason.into() }
    }
}

impl VmImage {
    /// The source type, inferred from the reference when empty.
    pub fn kind(&self) -> &str {
        match self.source_type.as_str() {
            "" if self.source_ref.contains("://") => SOURCE_URL,
            "" => SOURCE_IMAGE,
            t => t,
        }
    }

    /// The boot source it names, checked: a known source type that agrees
    /// with the reference, and an `http(s)` URL with a host.
    pub fn boot_source(&self) -> Result<BootSource, VmImageError> {
        let r = self.source_ref.trim();
        if r.is_empty() {
            return Err(VmImageError::new("source_ref", "is empty; name an image (GET /images) or give an http(s) URL"));
        }
        let boot = BootSource { image: r.to_owned() };
        match self.kind() {
            SOURCE_IMAGE if boot.is_url() => {
                Err(VmImageError::new("source_ref", "is a URL, but source_type is \"image\"; use source_type \"url\""))
            }
            SOURCE_IMAGE => Ok(boot),
            SOURCE_URL if !boot.is_url() => Err(VmImageError::new("source_ref", "is not a URL; use source_type \"image\" for a name")),
            SOURCE_URL => boot.check_url().map(|()| boot).map_err(|e| VmImageError::new("source_ref", e)),
            SOURCE_REGISTRY => Err(VmImageError::new(
                "source_type",
                "OCI registry images are not served here; import the disk (POST /images) and use source_type \"image\"",
            )),
            other => Err(VmImageError::new("source_type", format!("must be \"image\" or \"url\", got {other:?}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(t: &str, r: &str) -> VmImage {
        VmImage { source_type: t.into(), source_ref: r.into() }
    }

    #[test]
    fn the_type_is_inferred_from_the_reference() {
        assert_eq!(image("", "debian-12").boot_source().map(|b| b.image), Ok("debian-12".into()));
        assert_eq!(image("", "https://example.org/d.qcow2").kind(), SOURCE_URL);
        assert_eq!(image("url", "http://127.0.0.1/d.qcow2").boot_source().map(|b| b.image), Ok("http://127.0.0.1/d.qcow2".into()));
    }

    #[test]
    fn mismatches_and_unknown_types_name_their_field() {
        for (i, field, says) in [
            (image("image", "http://h/x"), "source_ref", "is a URL"),
            (image("url", "debian-12"), "source_ref", "is not a URL"),
            (image("url", "file:///etc/shadow"), "source_ref", "http or https"),
            (image("", "  "), "source_ref", "is empty"),
            (image("registry", "quay.io/x/y:1"), "source_type", "OCI registry"),
            (image("ftp", "x"), "source_type", "got \"ftp\""),
        ] {
            let e = i.boot_source().unwrap_err();
            assert_eq!(e.field, field, "{i:?}");
            assert!(e.reason.contains(says), "{i:?}: {e}");
        }
    }

    #[test]
    fn osac_json_reads_and_writes_back() {
        let j = serde_json::json!({"source_type": "image", "source_ref": "debian-12"});
        let i: VmImage = serde_json::from_value(j.clone()).unwrap();
        assert_eq!(serde_json::to_value(&i).unwrap(), j);
        assert!(serde_json::from_value::<VmImage>(serde_json::json!({"source_ref": "x", "tag": 1})).is_err());
    }
}
