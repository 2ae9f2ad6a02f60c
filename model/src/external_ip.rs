//! External IPs, in the shapes of OSAC's `ExternalIPPool`, `ExternalIP` and
//! `ExternalIPAttachment`: administrators offer pools of addresses the host
//! can serve; a tenant allocates an address from a pool (`spec.pool`) and
//! attaches it to one of its VMs (`spec.compute_instance`), whose exposed
//! ports then answer on it. An attachment can be moved to another VM by a
//! PATCH of `spec.compute_instance`; the traffic follows.

use serde::{Deserialize, Serialize};

use crate::validation::ValidationErrors;

/// The `@type` of a pool in API responses.
pub const EXTERNAL_IP_POOL_TYPE_URL: &str = "type.googleapis.com/osac.public.v1.ExternalIPPool";
/// The `@type` of an external IP in API responses.
pub const EXTERNAL_IP_TYPE_URL: &str = "type.googleapis.com/osac.public.v1.ExternalIP";
/// The `@type` of an attachment in API responses.
pub const EXTERNAL_IP_ATTACHMENT_TYPE_URL: &str = "type.googleapis.com/osac.public.v1.ExternalIPAttachment";

/// The label of an external IP, and of its attachment, that a VM asked
/// for with `auto_external_ip_attachment`: the VM's id. They are deleted
/// with the VM.
pub const AUTO_LABEL: &str = "vmaas.io/auto-external-ip-of";

/// An address family.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum IpFamily {
    /// Not said.
    #[serde(rename = "IP_FAMILY_UNSPECIFIED")]
    Unspecified,
    /// IPv4.
    #[default]
    #[serde(rename = "IP_FAMILY_IPV4")]
    Ipv4,
    /// IPv6.
    #[serde(rename = "IP_FAMILY_IPV6")]
    Ipv6,
}

/// A pool as configured by an administrator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExternalIpPoolSpec {
    /// The address family of the pool.
    pub ip_family: IpFamily,
    /// The ranges it hands out (shown to administrators only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cidrs: Vec<String>,
}

/// How much of a pool is left.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExternalIpPoolStatus {
    /// Addresses not allocated yet.
    pub available: i64,
}

/// A pool as the API returns it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExternalIpPool {
    /// Always `type.googleapis.com/osac.public.v1.ExternalIPPool`.
    #[serde(rename = "@type")]
    pub type_url: String,
    /// The pool's name, which is also its id.
    pub id: String,
    /// Its name.
    pub metadata: PoolMetadata,
    /// What it offers.
    pub spec: ExternalIpPoolSpec,
    /// What is left.
    pub status: ExternalIpPoolStatus,
}

/// The metadata of a pool (pools belong to no tenant).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PoolMetadata {
    /// The pool's name.
    pub name: String,
}

/// What the tenant asks for: an address from a pool.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ExternalIpSpec {
    /// The pool, by name (OSAC's typed `{"name": …}` is read too);
    /// absent or empty: the default pool.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    #[serde(default, with = "crate::reference::key")]
    pub pool: String,
}

crate::wire_states! {
    /// The state of an external IP.
    ExternalIpState {
        /// Being allocated.
        Pending = "EXTERNAL_IP_STATE_PENDING",
        /// Its address is the tenant's.
        Allocated = "EXTERNAL_IP_STATE_ALLOCATED",
        /// Could not be allocated.
        Failed = "EXTERNAL_IP_STATE_FAILED",
        /// Being released.
        Deleting = "EXTERNAL_IP_STATE_DELETING",
    }
}

/// What the external IP is now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExternalIpStatus {
    /// Overall state.
    pub state: ExternalIpState,
    /// Why it is pending or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The address allocated.
    #[serde(default)]
    pub address: String,
    /// The pool it came from.
    #[serde(default)]
    pub pool: String,
    /// Whether an attachment holds it.
    #[serde(default)]
    pub attached: bool,
}

crate::api_object! {
    /// An external IP as the API returns it.
    ExternalIp { kind: ExternalIp, spec: ExternalIpSpec, status: ExternalIpStatus, type_url: "type.googleapis.com/osac.public.v1.ExternalIP" }
}

/// What the tenant asks for: an external IP on one of its VMs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ExternalIpAttachmentSpec {
    /// The external IP, by id or name (stored as the id); immutable.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    #[serde(with = "crate::reference::key")]
    pub external_ip: String,
    /// The VM, by id or name (stored as the id); a PATCH moves the address.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    #[serde(default, skip_serializing_if = "Option::is_none", with = "crate::reference::opt_key")]
    pub compute_instance: Option<String>,
    /// OSAC's cluster target: not offered here (refused with a 400).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    #[serde(default, skip_serializing_if = "Option::is_none", with = "crate::reference::opt_key")]
    pub cluster: Option<String>,
    /// OSAC's bare-metal target: not offered here (refused with a 400).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    #[serde(default, skip_serializing_if = "Option::is_none", with = "crate::reference::opt_key")]
    pub baremetal_instance: Option<String>,
}

impl ExternalIpAttachmentSpec {
    /// Checks what the spec says by itself, naming fields under `prefix`.
    pub fn check(&self, prefix: &str) -> Result<(), ValidationErrors> {
        let mut errs = ValidationErrors::default();
        if self.external_ip.trim().is_empty() {
            errs.push(format!("{prefix}.external_ip"), "is required: the id or name of one of your external IPs");
        }
        for (field, set) in [("cluster", self.cluster.is_some()), ("baremetal_instance", self.baremetal_instance.is_some())] {
            if set {
                errs.push(format!("{prefix}.{field}"), "is not offered here: attach external IPs to virtual machines (compute_instance)");
            }
        }
        if self.compute_instance.as_deref().is_none_or(|c| c.trim().is_empty()) {
            errs.push(format!("{prefix}.compute_instance"), "is required: the id or name of one of your virtual machines");
        }
        errs.into_result(())
    }
}

crate::wire_states! {
    /// The state of an external IP attachment.
    ExternalIpAttachmentState {
        /// Being set up.
        Pending = "EXTERNAL_IP_ATTACHMENT_STATE_PENDING",
        /// The VM's exposed ports answer on the address.
        Ready = "EXTERNAL_IP_ATTACHMENT_STATE_READY",
        /// Could not be set up; see the message.
        Failed = "EXTERNAL_IP_ATTACHMENT_STATE_FAILED",
        /// Being removed.
        Deleting = "EXTERNAL_IP_ATTACHMENT_STATE_DELETING",
    }
}

/// What the attachment is now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExternalIpAttachmentStatus {
    /// Overall state.
    pub state: ExternalIpAttachmentState,
    /// The address attached.
    #[serde(default)]
    pub external_ip_address: String,
    /// Why it is pending or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

crate::api_object! {
    /// An attachment as the API returns it.
    ExternalIpAttachment { kind: ExternalIpAttachment, spec: ExternalIpAttachmentSpec, status: ExternalIpAttachmentStatus, type_url: "type.googleapis.com/osac.public.v1.ExternalIPAttachment" }
}

/// The spec of a PATCH of an attachment: where the address goes now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ExternalIpAttachmentPatchSpec {
    /// The VM to move the address to, by id or name.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    #[serde(default, skip_serializing_if = "Option::is_none", with = "crate::reference::opt_key")]
    pub compute_instance: Option<String>,
}

crate::patch_object! {
    /// The object of a PATCH of an attachment.
    PatchExternalIpAttachment { spec: ExternalIpAttachmentPatchSpec }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attachment_names_an_address_and_a_vm_only() {
        let ok: ExternalIpAttachmentSpec =
            serde_json::from_value(serde_json::json!({"external_ip": "ip", "compute_instance": "vm"})).unwrap();
        assert!(ok.check("spec").is_ok());
        let bad: ExternalIpAttachmentSpec = serde_json::from_value(serde_json::json!({"external_ip": "", "cluster": "c"})).unwrap();
        let e = bad.check("spec").unwrap_err();
        let fields: Vec<&str> = e.0.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(fields, ["spec.external_ip", "spec.cluster", "spec.compute_instance"]);
        assert!(serde_json::from_value::<ExternalIpAttachmentSpec>(serde_json::json!({"external_ip": "x", "vm": "y"})).is_err());
    }

    #[test]
    fn states_have_osac_wire_names() {
        for s in ExternalIpState::ALL {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        assert_eq!(ExternalIpAttachmentState::default().as_str(), "EXTERNAL_IP_ATTACHMENT_STATE_PENDING");
        assert_eq!(serde_json::to_value(IpFamily::Ipv4).unwrap(), "IP_FAMILY_IPV4");
    }
}
