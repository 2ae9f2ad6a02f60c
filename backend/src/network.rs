//! What a virtual network driver is given and what it reports.

use crate::driver::{Driver, Target};

/// The desired state of one virtual network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkSpec {
    /// The IPv4 address space, checked.
    pub ipv4_cidr: Option<String>,
    /// The IPv6 address space, checked.
    pub ipv6_cidr: Option<String>,
}

/// One network as a driver sees it.
pub type NetworkTarget = Target<NetworkSpec>;

/// Where a network is, as its driver sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetworkObservation {
    /// Being set up.
    Pending(String),
    /// Usable.
    Ready,
    /// Cannot be set up as it is.
    Failed(String),
}

/// The driver of virtual networks.
pub type NetworkDriver = dyn Driver<NetworkSpec, NetworkObservation>;

/// The desired state of one subnet: an Ethernet segment of its network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubnetSpec {
    /// The virtual network's id.
    pub virtual_network: String,
    /// The virtual network's name (in the subnet's tenant), for
    /// configuration that names networks as `TENANT/NAME`.
    pub network_name: String,
    /// The IPv4 range, checked (inside the network's, overlapping no sibling).
    pub ipv4_cidr: String,
    /// The virtual network's class (empty: the default), one of the
    /// backend's [`crate::Capabilities::network_classes`].
    pub network_class: String,
}

/// One subnet as a driver sees it.
pub type SubnetTarget = Target<SubnetSpec>;

/// The driver of subnets (their observations are a network's).
pub type SubnetDriver = dyn Driver<SubnetSpec, NetworkObservation>;
