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

    /// The stored name, e.g. `virtual_machine`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Template => "template",
            Self::VirtualMachine => "virtual_machine",
            Self::VirtualNetwork => "virtual_network",
            Self::Subnet => "subnet",
            Self::SecurityGroup => "security_group",
            Self::ExternalIp => "external_ip",
            Self::ExternalIpAttachment => "external_ip_attachment",
            Self::LoadBalancer => "load_balancer",
            Self::Volume => "volume",
            Self::VolumeAttachment => "volume_attachment",
            Self::Image => "image",
        }
    }

    /// The name in messages, e.g. `virtual machine`.
    pub fn human(self) -> &'static str {
        match self {
            Self::Template => "template",
            Self::VirtualMachine => "virtual machine",
            Self::VirtualNetwork => "virtual network",
            Self::Subnet => "subnet",
            Self::SecurityGroup => "security group",
            Self::ExternalIp => "external IP",
            Self::ExternalIpAttachment => "external IP attachment",
            Self::LoadBalancer => "load balancer",
            Self::Volume => "volume",
            Self::VolumeAttachment => "volume attachment",
            Self::Image => "image",
        }
    }

    /// The kind stored as `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// Whether objects of this kind belong to a tenant (else they are global).
    pub fn is_tenant_scoped(self) -> bool {
        !matches!(self, Self::Template)
    }
}

impl fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for k in ObjectKind::ALL {
            assert_eq!(ObjectKind::parse(k.as_str()), Some(k));
        }
        assert_eq!(ObjectKind::parse("virtual machine"), None);
    }
}
