//! Virtual networks, their subnets and security groups in the store:
//! [`Record`]s of the tenant's spec and the status the reconciler wrote.
//! Subnets and security groups refer to their network, so a network with
//! either cannot be deleted.

use vmaas_model::network::VIRTUAL_NETWORK_TYPE_URL;
use vmaas_model::security_group::SECURITY_GROUP_TYPE_URL;
use vmaas_model::subnet::SUBNET_TYPE_URL;
use vmaas_model::{
    Metadata, ObjectKind, SecurityGroup, SecurityGroupSpec, SecurityGroupStatus, Subnet, SubnetSpec, SubnetStatus, VirtualNetwork,
    VirtualNetworkSpec, VirtualNetworkStatus,
};

use super::record::{Kind, Record};

/// The virtual network kind.
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkKind;

impl Kind for NetworkKind {
    const KIND: ObjectKind = ObjectKind::VirtualNetwork;
    type Spec = VirtualNetworkSpec;
    type Status = VirtualNetworkStatus;
    type Api = VirtualNetwork;

    fn state(status: &VirtualNetworkStatus) -> &'static str {
        status.state.as_str()
    }

    fn api(id: String, metadata: Metadata, spec: VirtualNetworkSpec, status: VirtualNetworkStatus) -> VirtualNetwork {
        VirtualNetwork { type_url: VIRTUAL_NETWORK_TYPE_URL.into(), id, metadata, spec, status }
    }
}

/// The subnet kind.
#[derive(Debug, Clone, PartialEq)]
pub struct SubnetKind;

impl Kind for SubnetKind {
    const KIND: ObjectKind = ObjectKind::Subnet;
    type Spec = SubnetSpec;
    type Status = SubnetStatus;
    type Api = Subnet;

    fn state(status: &SubnetStatus) -> &'static str {
        status.state.as_str()
    }

    fn api(id: String, metadata: Metadata, spec: SubnetSpec, status: SubnetStatus) -> Subnet {
        Subnet { type_url: SUBNET_TYPE_URL.into(), id, metadata, spec, status }
    }
}

/// The security group kind.
#[derive(Debug, Clone, PartialEq)]
pub struct SecurityGroupKind;

impl Kind for SecurityGroupKind {
    const KIND: ObjectKind = ObjectKind::SecurityGroup;
    type Spec = SecurityGroupSpec;
    type Status = SecurityGroupStatus;
    type Api = SecurityGroup;

    fn state(status: &SecurityGroupStatus) -> &'static str {
        status.state.as_str()
    }

    fn api(id: String, metadata: Metadata, spec: SecurityGroupSpec, status: SecurityGroupStatus) -> SecurityGroup {
        SecurityGroup { type_url: SECURITY_GROUP_TYPE_URL.into(), id, metadata, spec, status }
    }
}

/// A stored virtual network.
pub type NetworkRecord = Record<NetworkKind>;
/// A stored subnet.
pub type SubnetRecord = Record<SubnetKind>;
/// A stored security group.
pub type SecurityGroupRecord = Record<SecurityGroupKind>;

/// The role of a subnet's reference to its network.
pub const SUBNET_OF: &str = "virtual_network";
