//! The kinds of object the API serves, each declared once in the table
//! below (`kinds!`): its [`ObjectKind`] variant and its [`Descriptor`],
//! which name it in the store, REST, gRPC, Terraform and the CLI, with the
//! objects it names, the quota it counts against and whether it attaches
//! to a VM. The store makes a kind's API objects through
//! [`crate::api_json`], so a kind with an [`Object`] needs no code there.

use std::fmt;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::object::Metadata;
use crate::validation::{check_dns_label, check_dns_subdomain};

/// Declares every kind once: the [`ObjectKind`] variant, its place in
/// [`ObjectKind::ALL`] and its [`Descriptor`] in [`DESCRIPTORS`], from one
/// entry each (`docs/architecture.md`, "Adding a kind").
macro_rules! kinds {
    ($($(#[$doc:meta])* $variant:ident => $descriptor:expr,)+) => {
        /// A kind of object.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum ObjectKind {
            $($(#[$doc])* $variant,)+
        }

        /// How many kinds there are.
        const KINDS: usize = [$(stringify!($variant)),+].len();

        impl ObjectKind {
            /// Every kind.
            pub const ALL: [Self; KINDS] = [$(Self::$variant),+];
        }

        /// Every kind's [`Descriptor`], in the order of [`ObjectKind`].
        pub const DESCRIPTORS: [Descriptor; KINDS] = [$($descriptor),+];
    };
}

kinds! {
    /// A virtual machine template (global, published by administrators).
    Template => Descriptor {
        human_plural: "templates",
        grpc_service: Some("fulfillment.v1.VirtualMachineTemplates"),
        terraform: "vmaas_template",
        cli: "template",
        tenant_scoped: false,
        ..tenant_kind(ObjectKind::Template, "template", "template", "virtual_machine_templates")
    },
    /// A virtual machine (a tenant's).
    VirtualMachine => Descriptor {
        human_plural: "virtual machines",
        grpc_service: Some("fulfillment.v1.VirtualMachines"),
        terraform: "vmaas_virtual_machine",
        cli: "vm",
        references: &[reference("template", ObjectKind::Template), reference("network_attachments[].subnet", ObjectKind::Subnet)],
        quota: Some(QuotaUse::Machine),
        backend_runs: true,
        ..tenant_kind(ObjectKind::VirtualMachine, "virtual_machine", "virtual machine", "virtual_machines")
    },
    /// A virtual network (a tenant's).
    VirtualNetwork => Descriptor {
        human_plural: "virtual networks",
        grpc_service: Some("osac.public.v1.VirtualNetworks"),
        terraform: "vmaas_virtual_network",
        cli: "network",
        backend_runs: true,
        ..tenant_kind(ObjectKind::VirtualNetwork, "virtual_network", "virtual network", "virtual_networks")
    },
    /// A subnet of a virtual network (a tenant's).
    Subnet => Descriptor {
        grpc_service: Some("osac.public.v1.Subnets"),
        terraform: "vmaas_subnet",
        cli: "subnet",
        references: &[reference("virtual_network", ObjectKind::VirtualNetwork)],
        backend_runs: true,
        ..tenant_kind(ObjectKind::Subnet, "subnet", "subnet", "subnets")
    },
    /// A security group of a virtual network (a tenant's).
    SecurityGroup => Descriptor {
        human_plural: "security groups",
        grpc_service: Some("osac.public.v1.SecurityGroups"),
        terraform: "vmaas_security_group",
        cli: "security-group",
        references: &[reference("virtual_network", ObjectKind::VirtualNetwork)],
        ..tenant_kind(ObjectKind::SecurityGroup, "security_group", "security group", "security_groups")
    },
    /// An address from an external IP pool (a tenant's).
    ExternalIp => Descriptor {
        human_plural: "external IPs",
        grpc_service: Some("osac.public.v1.ExternalIPs"),
        terraform: "vmaas_external_ip",
        cli: "external-ip",
        quota: Some(QuotaUse::ExternalIp),
        ..tenant_kind(ObjectKind::ExternalIp, "external_ip", "external IP", "external_ips")
    },
    /// An external IP on a VM (a tenant's).
    ExternalIpAttachment => Descriptor {
        human_plural: "external IP attachments",
        grpc_service: Some("osac.public.v1.ExternalIPAttachments"),
        terraform: "vmaas_external_ip_attachment",
        cli: "external-ip",
        references: &[reference("external_ip", ObjectKind::ExternalIp), reference("compute_instance", ObjectKind::VirtualMachine)],
        attaches_to_vm: true,
        ..tenant_kind(ObjectKind::ExternalIpAttachment, "external_ip_attachment", "external IP attachment", "external_ip_attachments")
    },
    /// A load balancer over VMs of one subnet (a tenant's).
    LoadBalancer => Descriptor {
        human_plural: "load balancers",
        terraform: "vmaas_load_balancer",
        cli: "load-balancer",
        references: &[reference("subnet", ObjectKind::Subnet), reference("targets[]", ObjectKind::VirtualMachine)],
        quota: Some(QuotaUse::ExternalIp),
        backend_runs: true,
        ..tenant_kind(ObjectKind::LoadBalancer, "load_balancer", "load balancer", "load_balancers")
    },
    /// A virtual network's way out, from one external IP (a tenant's).
    NatGateway => Descriptor {
        human_plural: "NAT gateways",
        grpc_service: Some("osac.public.v1.NATGateways"),
        terraform: "vmaas_nat_gateway",
        cli: "nat-gateway",
        references: &[reference("virtual_network", ObjectKind::VirtualNetwork), reference("external_ip", ObjectKind::ExternalIp)],
        backend_runs: true,
        ..tenant_kind(ObjectKind::NatGateway, "nat_gateway", "NAT gateway", "nat_gateways")
    },
    /// Block storage that outlives VMs (a tenant's).
    Volume => Descriptor {
        terraform: "vmaas_volume",
        cli: "volume",
        references: &[reference("source_image", ObjectKind::Image)],
        quota: Some(QuotaUse::Disk),
        backend_runs: true,
        ..tenant_kind(ObjectKind::Volume, "volume", "volume", "volumes")
    },
    /// A volume on a VM (a tenant's).
    VolumeAttachment => Descriptor {
        human_plural: "volume attachments",
        terraform: "vmaas_volume_attachment",
        cli: "volume",
        references: &[reference("volume", ObjectKind::Volume), reference("compute_instance", ObjectKind::VirtualMachine)],
        attaches_to_vm: true,
        ..tenant_kind(ObjectKind::VolumeAttachment, "volume_attachment", "volume attachment", "volume_attachments")
    },
    /// An imported OS image (a tenant's, or public).
    Image => Descriptor {
        terraform: "vmaas_image",
        cli: "image",
        quota: Some(QuotaUse::Disk),
        backend_runs: true,
        ..tenant_kind(ObjectKind::Image, "image", "image", "images")
    },
    /// The disks of a VM at one instant (a tenant's).
    ComputeInstanceSnapshot => Descriptor {
        human_plural: "snapshots",
        grpc_service: Some("vmaas.v1.ComputeInstanceSnapshots"),
        terraform: "vmaas_snapshot",
        cli: "snapshot",
        references: &[reference("compute_instance", ObjectKind::VirtualMachine)],
        quota: Some(QuotaUse::Disk),
        backend_runs: true,
        ..tenant_kind(ObjectKind::ComputeInstanceSnapshot, "compute_instance_snapshot", "snapshot", "compute_instance_snapshots")
    },
    /// A named machine shape (global, published by administrators).
    InstanceType => Descriptor {
        human_plural: "instance types",
        terraform: "vmaas_instance_type",
        cli: "instance-type",
        tenant_scoped: false,
        // Seed 001 and OSAC name them `general.large`, `o1.small`.
        name_rule: check_dns_subdomain,
        ..tenant_kind(ObjectKind::InstanceType, "instance_type", "instance type", "instance_types")
    },
    /// A curated offering over a template (global, published by administrators).
    ComputeInstanceCatalogItem => Descriptor {
        human_plural: "catalog items",
        grpc_service: Some("osac.public.v1.ComputeInstanceCatalogItems"),
        terraform: "vmaas_catalog_item",
        cli: "catalog-item",
        tenant_scoped: false,
        references: &[reference("template", ObjectKind::Template)],
        ..tenant_kind(ObjectKind::ComputeInstanceCatalogItem, "compute_instance_catalog_item", "catalog item", "compute_instance_catalog_items")
    },
}

impl ObjectKind {
    /// Everything declared about this kind, once.
    pub const fn descriptor(self) -> &'static Descriptor {
        &DESCRIPTORS[self as usize]
    }

    /// The stored name, e.g. `virtual_machine`.
    pub const fn as_str(self) -> &'static str {
        self.descriptor().name
    }

    /// The name in messages, e.g. `virtual machine`.
    pub const fn human(self) -> &'static str {
        self.descriptor().human
    }

    /// The kind stored as `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// Whether objects of this kind belong to a tenant (else they are global).
    pub const fn is_tenant_scoped(self) -> bool {
        self.descriptor().tenant_scoped
    }
}

const fn reference(field: &'static str, kind: ObjectKind) -> Reference {
    Reference { field, kind }
}

/// A tenant's kind named `name`, served at `plural`, with no references,
/// no quota and no attachment: the fields that vary are set after `..`.
const fn tenant_kind(kind: ObjectKind, name: &'static str, human: &'static str, plural: &'static str) -> Descriptor {
    Descriptor {
        kind,
        name,
        human,
        human_plural: plural,
        plural,
        grpc_service: None,
        terraform: "",
        cli: "",
        references: &[],
        quota: None,
        attaches_to_vm: false,
        tenant_scoped: true,
        backend_runs: false,
        name_rule: check_dns_label,
    }
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
    pub name_rule: fn(&str) -> Result<(), crate::validation::NameError>,
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for k in ObjectKind::ALL {
            assert_eq!(ObjectKind::parse(k.as_str()), Some(k));
            assert_eq!(k.descriptor().kind, k, "{k}: DESCRIPTORS is in the order of ObjectKind");
            assert!(!k.descriptor().terraform.is_empty() && !k.descriptor().cli.is_empty(), "{k}: a Terraform type and a CLI noun");
        }
        assert_eq!(ObjectKind::parse("virtual machine"), None);
    }
}
