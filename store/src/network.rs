//! Virtual networks, their subnets and security groups in the store:
//! [`Record`]s of the tenant's spec and the status the reconciler wrote.
//! Subnets and security groups refer to their network, so a network with
//! either cannot be deleted.

use vmaas_model::network::VIRTUAL_NETWORK_TYPE_URL;
use vmaas_model::security_group::SECURITY_GROUP_TYPE_URL;
use vmaas_model::subnet::SUBNET_TYPE_URL;
use vmaas_model::{
    ObjectKind, SecurityGroup, SecurityGroupSpec, SecurityGroupStatus, Subnet, SubnetSpec, SubnetStatus, VirtualNetwork,
    VirtualNetworkSpec, VirtualNetworkStatus,
};

use super::record::Record;

crate::record_kind! {
    /// The virtual network kind.
    NetworkKind: ObjectKind::VirtualNetwork, VirtualNetworkSpec, VirtualNetworkStatus, VirtualNetwork, VIRTUAL_NETWORK_TYPE_URL
}

crate::record_kind! {
    /// The subnet kind.
    SubnetKind: ObjectKind::Subnet, SubnetSpec, SubnetStatus, Subnet, SUBNET_TYPE_URL
}

crate::record_kind! {
    /// The security group kind.
    SecurityGroupKind: ObjectKind::SecurityGroup, SecurityGroupSpec, SecurityGroupStatus, SecurityGroup, SECURITY_GROUP_TYPE_URL
}

/// A stored virtual network.
pub type NetworkRecord = Record<NetworkKind>;
/// A stored subnet.
pub type SubnetRecord = Record<SubnetKind>;
/// A stored security group.
pub type SecurityGroupRecord = Record<SecurityGroupKind>;

/// The role of a subnet's reference to its network.
pub const SUBNET_OF: &str = "virtual_network";
