//! The kinds of object the API serves, by name: what the store files them
//! under, what the reconciler queues and what a backend says it can run.

use std::fmt;

use serde::{Deserialize, Serialize};

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
}

impl ObjectKind {
    /// Every kind.
    pub const ALL: [Self; 11] = [
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
    ];

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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    }
}

/// Every kind's [`Descriptor`], in the order of [`ObjectKind`].
pub const DESCRIPTORS: [Descriptor; 11] = [
    Descriptor {
        human_plural: "templates",
        grpc_service: Some("fulfillment.v1.VirtualMachineTemplates"),
        terraform: "vmaas_template",
        cli: "template",
        tenant_scoped: false,
        ..tenant_kind(ObjectKind::Template, "template", "template", "virtual_machine_templates")
    },
    Descriptor {
        human_plural: "virtual machines",
        grpc_service: Some("fulfillment.v1.VirtualMachines"),
        terraform: "vmaas_virtual_machine",
        cli: "vm",
        references: &[reference("template", ObjectKind::Template), reference("network_attachments[].subnet", ObjectKind::Subnet)],
        quota: Some(QuotaUse::Machine),
        backend_runs: true,
        ..tenant_kind(ObjectKind::VirtualMachine, "virtual_machine", "virtual machine", "virtual_machines")
    },
    Descriptor {
        human_plural: "virtual networks",
        grpc_service: Some("osac.public.v1.VirtualNetworks"),
        terraform: "vmaas_virtual_network",
        cli: "network",
        backend_runs: true,
        ..tenant_kind(ObjectKind::VirtualNetwork, "virtual_network", "virtual network", "virtual_networks")
    },
    Descriptor {
        grpc_service: Some("osac.public.v1.Subnets"),
        terraform: "vmaas_subnet",
        cli: "subnet",
        references: &[reference("virtual_network", ObjectKind::VirtualNetwork)],
        backend_runs: true,
        ..tenant_kind(ObjectKind::Subnet, "subnet", "subnet", "subnets")
    },
    Descriptor {
        human_plural: "security groups",
        grpc_service: Some("osac.public.v1.SecurityGroups"),
        terraform: "vmaas_security_group",
        cli: "security-group",
        references: &[reference("virtual_network", ObjectKind::VirtualNetwork)],
        ..tenant_kind(ObjectKind::SecurityGroup, "security_group", "security group", "security_groups")
    },
    Descriptor {
        human_plural: "external IPs",
        grpc_service: Some("osac.public.v1.ExternalIPs"),
        terraform: "vmaas_external_ip",
        cli: "external-ip",
        quota: Some(QuotaUse::ExternalIp),
        ..tenant_kind(ObjectKind::ExternalIp, "external_ip", "external IP", "external_ips")
    },
    Descriptor {
        human_plural: "external IP attachments",
        grpc_service: Some("osac.public.v1.ExternalIPAttachments"),
        terraform: "vmaas_external_ip_attachment",
        cli: "external-ip",
        references: &[reference("external_ip", ObjectKind::ExternalIp), reference("compute_instance", ObjectKind::VirtualMachine)],
        attaches_to_vm: true,
        ..tenant_kind(ObjectKind::ExternalIpAttachment, "external_ip_attachment", "external IP attachment", "external_ip_attachments")
    },
    Descriptor {
        human_plural: "load balancers",
        terraform: "vmaas_load_balancer",
        cli: "load-balancer",
        references: &[reference("subnet", ObjectKind::Subnet), reference("targets[]", ObjectKind::VirtualMachine)],
        quota: Some(QuotaUse::ExternalIp),
        backend_runs: true,
        ..tenant_kind(ObjectKind::LoadBalancer, "load_balancer", "load balancer", "load_balancers")
    },
    Descriptor {
        terraform: "vmaas_volume",
        cli: "volume",
        references: &[reference("source_image", ObjectKind::Image)],
        quota: Some(QuotaUse::Disk),
        backend_runs: true,
        ..tenant_kind(ObjectKind::Volume, "volume", "volume", "volumes")
    },
    Descriptor {
        human_plural: "volume attachments",
        terraform: "vmaas_volume_attachment",
        cli: "volume",
        references: &[reference("volume", ObjectKind::Volume), reference("compute_instance", ObjectKind::VirtualMachine)],
        attaches_to_vm: true,
        ..tenant_kind(ObjectKind::VolumeAttachment, "volume_attachment", "volume attachment", "volume_attachments")
    },
    Descriptor {
        terraform: "vmaas_image",
        cli: "image",
        quota: Some(QuotaUse::Disk),
        backend_runs: true,
        ..tenant_kind(ObjectKind::Image, "image", "image", "images")
    },
];

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
