//! Every kind's [`Descriptor`], and what [`ObjectKind`] reads from it: the
//! one table a new kind is added to (`docs/architecture.md`, "Adding a
//! kind"). The store makes a kind's API objects through its `api_json`, so
//! a kind with an [`Object`](crate::object::Object) needs no code there.

use crate::kind::{Descriptor, ObjectKind, QuotaUse, Reference, object_json};
use crate::validation::{check_dns_label, check_dns_subdomain};

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
        api_json: None,
        name_rule: check_dns_label,
    }
}

/// Every kind's [`Descriptor`], in the order of [`ObjectKind`].
pub const DESCRIPTORS: [Descriptor; 12] = [
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
        api_json: Some(object_json::<crate::VirtualNetwork>),
        ..tenant_kind(ObjectKind::VirtualNetwork, "virtual_network", "virtual network", "virtual_networks")
    },
    Descriptor {
        grpc_service: Some("osac.public.v1.Subnets"),
        terraform: "vmaas_subnet",
        cli: "subnet",
        references: &[reference("virtual_network", ObjectKind::VirtualNetwork)],
        backend_runs: true,
        api_json: Some(object_json::<crate::Subnet>),
        ..tenant_kind(ObjectKind::Subnet, "subnet", "subnet", "subnets")
    },
    Descriptor {
        human_plural: "security groups",
        grpc_service: Some("osac.public.v1.SecurityGroups"),
        terraform: "vmaas_security_group",
        cli: "security-group",
        references: &[reference("virtual_network", ObjectKind::VirtualNetwork)],
        api_json: Some(object_json::<crate::SecurityGroup>),
        ..tenant_kind(ObjectKind::SecurityGroup, "security_group", "security group", "security_groups")
    },
    Descriptor {
        human_plural: "external IPs",
        grpc_service: Some("osac.public.v1.ExternalIPs"),
        terraform: "vmaas_external_ip",
        cli: "external-ip",
        quota: Some(QuotaUse::ExternalIp),
        api_json: Some(object_json::<crate::ExternalIp>),
        ..tenant_kind(ObjectKind::ExternalIp, "external_ip", "external IP", "external_ips")
    },
    Descriptor {
        human_plural: "external IP attachments",
        grpc_service: Some("osac.public.v1.ExternalIPAttachments"),
        terraform: "vmaas_external_ip_attachment",
        cli: "external-ip",
        references: &[reference("external_ip", ObjectKind::ExternalIp), reference("compute_instance", ObjectKind::VirtualMachine)],
        attaches_to_vm: true,
        api_json: Some(object_json::<crate::ExternalIpAttachment>),
        ..tenant_kind(ObjectKind::ExternalIpAttachment, "external_ip_attachment", "external IP attachment", "external_ip_attachments")
    },
    Descriptor {
        human_plural: "load balancers",
        terraform: "vmaas_load_balancer",
        cli: "load-balancer",
        references: &[reference("subnet", ObjectKind::Subnet), reference("targets[]", ObjectKind::VirtualMachine)],
        quota: Some(QuotaUse::ExternalIp),
        backend_runs: true,
        api_json: Some(object_json::<crate::LoadBalancer>),
        ..tenant_kind(ObjectKind::LoadBalancer, "load_balancer", "load balancer", "load_balancers")
    },
    Descriptor {
        terraform: "vmaas_volume",
        cli: "volume",
        references: &[reference("source_image", ObjectKind::Image)],
        quota: Some(QuotaUse::Disk),
        backend_runs: true,
        api_json: Some(object_json::<crate::Volume>),
        ..tenant_kind(ObjectKind::Volume, "volume", "volume", "volumes")
    },
    Descriptor {
        human_plural: "volume attachments",
        terraform: "vmaas_volume_attachment",
        cli: "volume",
        references: &[reference("volume", ObjectKind::Volume), reference("compute_instance", ObjectKind::VirtualMachine)],
        attaches_to_vm: true,
        api_json: Some(object_json::<crate::VolumeAttachment>),
        ..tenant_kind(ObjectKind::VolumeAttachment, "volume_attachment", "volume attachment", "volume_attachments")
    },
    Descriptor {
        terraform: "vmaas_image",
        cli: "image",
        quota: Some(QuotaUse::Disk),
        backend_runs: true,
        api_json: Some(object_json::<crate::image::Image>),
        ..tenant_kind(ObjectKind::Image, "image", "image", "images")
    },
    Descriptor {
        human_plural: "instance types",
        terraform: "vmaas_instance_type",
        cli: "instance-type",
        tenant_scoped: false,
        api_json: Some(object_json::<crate::InstanceType>),
        // Seed 001 and OSAC name them `general.large`, `o1.small`.
        name_rule: check_dns_subdomain,
        ..tenant_kind(ObjectKind::InstanceType, "instance_type", "instance type", "instance_types")
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
