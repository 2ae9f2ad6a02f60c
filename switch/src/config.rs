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

/// Whether `ip` is in the network `net`/`prefix`.
pub(crate) fn within(ip: Ipv4Addr, net: Ipv4Addr, prefix: u8) -> bool {
    ipnet::Ipv4Net::new(net, prefix.min(32)).is_ok_and(|n| n.contains(&ip))
}

impl SubnetConfig {
    /// The subnet as a network.
    pub fn net(&self) -> ipnet::Ipv4Net {
        ipnet::Ipv4Net::new(self.network, self.prefix.min(32)).unwrap_or_default()
    }

    /// The netmask.
    pub fn mask(&self) -> Ipv4Addr {
        self.net().netmask()
    }

    /// The broadcast address.
    pub fn broadcast(&self) -> Ipv4Addr {
        self.net().broadcast()
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
