//! What a NAT gateway driver is given and what it reports.

use std::net::Ipv4Addr;

use crate::driver::{Driver, Target};

/// The desired state of one NAT gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NatSpec {
    /// The id of the virtual network whose guests leave through it.
    pub virtual_network: String,
    /// The network's IPv4 range (`ADDR/LEN`): what stays inside it.
    pub network_cidr: String,
    /// The external address flows leave from.
    pub address: Ipv4Addr,
}

/// One NAT gateway as a driver sees it.
pub type NatTarget = Target<NatSpec>;

/// Where a NAT gateway is, as its driver sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NatObservation {
    /// The network's guests leave through it.
    Ready,
    /// It cannot run as it is; why.
    Failed(String),
}

/// The driver of NAT gateways.
pub type NatDriver = dyn Driver<NatSpec, NatObservation>;
