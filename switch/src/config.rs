//! What a segment is configured with: the subnet it carries and the
//! identity of each port. The fabric forwards by it and DHCP answers from
//! it; neither depends on the other for it.

use std::net::Ipv4Addr;

use crate::firewall::Firewall;
use crate::frame::Mac;

/// A port's number on its segment.
pub type PortId = u32;

/// The subnet a segment carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubnetConfig {
    /// Network address.
    pub network: Ipv4Addr,
    /// Prefix length.
    pub prefix: u8,
    /// The gateway: the switch's own address on the segment.
    pub gateway: Ipv4Addr,
    /// The gateway's MAC.
    pub gateway_mac: Mac,
    /// DHCP lease time.
    pub lease_seconds: u32,
}

/// The netmask of a `prefix`-bit network, as a number.
fn mask_of(prefix: u8) -> u32 {
    if prefix == 0 { 0 } else { u32::MAX << (32 - u32::from(prefix)) }
}

/// Whether `ip` is in the network `net`/`prefix`.
pub(crate) fn within(ip: Ipv4Addr, net: Ipv4Addr, prefix: u8) -> bool {
    let mask = mask_of(prefix);
    u32::from(ip) & mask == u32::from(net) & mask
}

impl SubnetConfig {
    /// The netmask.
    pub fn mask(&self) -> Ipv4Addr {
        Ipv4Addr::from(mask_of(self.prefix))
    }

    /// The broadcast address.
    pub fn broadcast(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.network) | !u32::from(self.mask()))
    }

    /// Whether `ip` is in the subnet.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        within(ip, self.network, self.prefix)
    }
}

/// What a port is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortKind {
    /// A guest NIC with its assigned MAC and address.
    Guest(PortConfig),
    /// A link to a physical L2 network: any source, learned.
    Uplink,
}

/// A guest port's identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortConfig {
    /// The NIC's MAC (QEMU's `mac=`).
    pub mac: Mac,
    /// Its address (served by DHCP).
    pub ip: Ipv4Addr,
    /// Host name offered by DHCP.
    pub hostname: Option<String>,
    /// Its security groups' rules; none: everything passes.
    pub firewall: Option<Firewall>,
}
