//! The kinds of object the API serves, by name: what the store files them
//! under, what the reconciler queues and what a backend says it can run.

use std::fmt;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::object::Metadata;

/// A kind of object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectKind {
    /// A virtual machine template (global, published by administrators).
    Template,
    /// A virtual machine (a tenant's).
    VirtualMachine,
    /// A virtual network (a tenant's).
    VirtualNetwork,
    /// A subnet of a virtual network (a tenant's).
    Subnet,
    /// A security group of a virtual network (a tenant's).
    SecurityGroup,
    /// An address from an external IP pool (a tenant's).
    ExternalIp,
    /// An external IP on a VM (a tenant's).
    ExternalIpAttachment,
    /// A load balancer over VMs of one subnet (a tenant's).
    LoadBalancer,
    /// Block storage that outlives VMs (a tenant's).
    Volume,
    /// A volume on a VM (a tenant's).
    VolumeAttachment,
    /// An imported OS image (a tenant's, or public).
    Image,
    /// A named machine shape (global, published by administrators).
    InstanceType,
}

impl ObjectKind {
    /// Every kind.
    pub const ALL: [Self; 12] = [
        Self::Template,
        Self::VirtualMachine,
        Self::VirtualNetwork,
        Self::Subnet,
        Self::SecurityGroup,
        Self::ExternalIp,
        Self::ExternalIpAttachment,
        Self::LoadBalancer,
        Self::Volume,
        Self::VolumeAttachment,
        Self::Image,
        Self::InstanceType,
    ];
}

impl fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a kind is, declared once: its names in every front end (REST,
/// gRPC, Terraform, the CLI), the objects it names, the quota it counts
/// against and whether it attaches to a VM. The server's routes and
/// OpenAPI, the provider's table and the CLI read their names from here,
/// and their tests check that each kind has its part (`docs/architecture.md`,
/// "Adding a kind").
#[derive(Debug, Clone, Copy)]
pub struct Descriptor {
    /// The kind.
    pub kind: ObjectKind,
    /// The stored name, e.g. `virtual_machine`.
    pub name: &'static str,
    /// The name in messages, e.g. `virtual machine`.
    pub human: &'static str,
    /// The plural in messages and OpenAPI tags, e.g. `virtual machines`.
    pub human_plural: &'static str,
    /// The REST collection under `/api/fulfillment/v1`, e.g. `virtual_machines`.
    pub plural: &'static str,
    /// The gRPC service that serves it, e.g. `fulfillment.v1.VirtualMachines`.
    pub grpc_service: Option<&'static str>,
    /// The Terraform resource type, e.g. `vmaas_virtual_machine`.
    pub terraform: &'static str,
    /// The CLI's noun, e.g. `vm` (`vmaas vm create`).
    pub cli: &'static str,
    /// The objects its spec names, by field: each must be the same tenant's.
    pub references: &'static [Reference],
    /// The quota it counts against, if any.
    pub quota: Option<QuotaUse>,
    /// Whether it puts something on a VM (an attachment), so that the VM is
    /// reconciled with it.
    pub attaches_to_vm: bool,
    /// Whether its objects belong to a tenant (else they are global).
    pub tenant_scoped: bool,
    /// Whether a backend runs it (else the server alone reconciles it).
    pub backend_runs: bool,
    /// What a name of its objects must be (a DNS label for most kinds).
    pub name_rule: fn(&str) -> Result<(), String>,
    /// The API's JSON of one of its objects from the stored parts, for a
    /// kind with an [`Object`] ([`object_json`]); VMs and templates have their own.
    pub api_json: Option<ApiJson>,
}

/// Makes the API's JSON of an object from its id, metadata, and its spec
/// and status as stored (JSON).
pub type ApiJson = fn(String, Metadata, &str, &str) -> serde_json::Result<String>;

/// The API's object of a kind kept as a spec and a status with a state:
/// what the store keeps of it, and how the object is made from its parts.
/// Declared with the object by `api_object!` (`kind: …`).
pub trait Object: Serialize + Sized {
    /// The kind.
    const KIND: ObjectKind;
    /// What the tenant asks for.
    type Spec: Serialize + DeserializeOwned + Clone + PartialEq;
    /// What the object is now.
    type Status: Serialize + DeserializeOwned + Clone + Default + PartialEq;

    /// The wire name of its state (stored for filtering): the status's,
    /// or the spec's for a kind whose state is the administrator's.
    fn state(spec: &Self::Spec, status: &Self::Status) -> &'static str;

    /// The object from its parts.
    fn assemble(id: String, metadata: Metadata, spec: Self::Spec, status: Self::Status) -> Self;
}

/// The API's JSON of an object of kind `K` from its stored parts.
pub fn object_json<K: Object>(id: String, metadata: Metadata, spec: &str, status: &str) -> serde_json::Result<String> {
    let object = K::assemble(id, metadata, serde_json::from_str(spec)?, serde_json::from_str(status)?);
    serde_json::to_string(&object)
}

/// Defines the object of a kind as the API returns it: `@type` (always
/// `$type_url`), `id`, `metadata`, `spec` and `status`; with `kind:`, also
/// its [`Object`] (its status has a `state` with `as_str`).
#[macro_export]
macro_rules! api_object {
    ($(#[$m:meta])* $name:ident { kind: $kind:ident, spec: $spec:ty, status: $status:ty, type_url: $type_url:literal }) => {
        $crate::api_object! { $(#[$m])* $name { spec: $spec, status: $status, type_url: $type_url } }

        impl $crate::kind::Object for $name {
            const KIND: $crate::ObjectKind = $crate::ObjectKind::$kind;
            type Spec = $spec;
            type Status = $status;

            fn state(_: &$spec, status: &$status) -> &'static str {
                status.state.as_str()
            }

            fn assemble(id: String, metadata: $crate::Metadata, spec: $spec, status: $status) -> Self {
                $name { type_url: $type_url.into(), id, metadata, spec, status }
            }
        }
    };
    ($(#[$m:meta])* $name:ident { spec: $spec:ty, status: $status:ty, type_url: $type_url:literal }) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        pub struct $name {
            #[doc = concat!("Always `", $type_url, "`.")]
            #[serde(rename = "@type")]
            pub type_url: String,
            /// UUID assigned by the server.
            pub id: String,
            /// Name, tenant, timestamps and version.
            pub metadata: $crate::Metadata,
            /// What the tenant asked for (references as ids).
            pub spec: $spec,
            /// What it is now.
            pub status: $status,
        }
    };
}

/// A field of a kind's spec that names another object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reference {
    /// The field under `spec`, e.g. `virtual_network`.
    pub field: &'static str,
    /// The kind it names.
    pub kind: ObjectKind,
}

/// What an object of a kind takes from its tenant's quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotaUse {
    /// A VM: one of `virtual_machines`, its cores, memory and disk.
    Machine,
    /// Its size from `disk_bytes`.
    Disk,
    /// One of `external_ips`.
    ExternalIp,
}
