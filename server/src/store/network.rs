//! Virtual networks and their subnets in the store: [`Record`]s of the
//! tenant's spec and the status the reconciler wrote. A subnet refers to
//! its network, so a network with subnets cannot be deleted.

use vmaas_model::network::VIRTUAL_NETWORK_TYPE_URL;
use vmaas_model::subnet::SUBNET_TYPE_URL;
use vmaas_model::{Metadata, ObjectKind, Subnet, SubnetSpec, SubnetStatus, VirtualNetwork, VirtualNetworkSpec, VirtualNetworkStatus};

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

/// A stored virtual network.
pub type NetworkRecord = Record<NetworkKind>;
/// A stored subnet.
pub type SubnetRecord = Record<SubnetKind>;

/// The role of a subnet's reference to its network.
pub const SUBNET_OF: &str = "virtual_network";
