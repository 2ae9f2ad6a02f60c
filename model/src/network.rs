//! Virtual networks, in the shape of OSAC's `osac.public.v1.VirtualNetwork`:
//! a tenant's private address space (`ipv4_cidr` and/or `ipv6_cidr`), with a
//! state `VIRTUAL_NETWORK_STATE_PENDING|READY|FAILED`. The spec is immutable
//! once created, as in OSAC.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::validation::ValidationErrors;

/// The `@type` of a virtual network in API responses.
pub const VIRTUAL_NETWORK_TYPE_URL: &str = "type.googleapis.com/osac.public.v1.VirtualNetwork";

/// What the tenant asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct VirtualNetworkSpec {
    /// The network class; empty for the provider's default.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub network_class: String,
    /// The IPv4 address space, e.g. `10.10.0.0/16`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv4_cidr: Option<String>,
    /// The IPv6 address space, e.g. `fd00:10::/48`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv6_cidr: Option<String>,
}

/// Why a CIDR is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CidrError {
    /// Not `address/length`.
    #[error("{0:?} is not a CIDR: expected an address and a prefix length, e.g. 10.0.0.0/16")]
    Syntax(String),
    /// The address is of the other family.
    #[error("{0:?} is not an IPv{1} CIDR")]
    Family(String, u8),
    /// The prefix is too long to hold hosts, or longer than the address.
    #[error("{cidr:?} has prefix length {len}: it must be at most {max}")]
    PrefixTooLong {
        /// The CIDR.
        cidr: String,
        /// Its prefix length.
        len: u8,
        /// The longest accepted.
        max: u8,
    },
    /// Bits are set after the prefix.
    #[error("{cidr:?} has host bits set: the network is {network}")]
    HostBits {
        /// The CIDR.
        cidr: String,
        /// What it should be.
        network: String,
    },
}

/// A checked CIDR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    /// The network address.
    pub addr: IpAddr,
    /// The prefix length.
    pub len: u8,
}

impl Cidr {
    /// Parses `text` as a network of IP version `version` (4 or 6) with room for hosts.
    pub fn parse(text: &str, version: u8) -> Result<Self, CidrError> {
        let syntax = || CidrError::Syntax(text.to_owned());
        let (addr, len) = text.split_once('/').ok_or_else(syntax)?;
        let addr: IpAddr = addr.parse().map_err(|_| syntax())?;
        let len: u8 = len.parse().map_err(|_| syntax())?;
        let (bits, max) = match (addr, version) {
            (IpAddr::V4(a), 4) => (u128::from(u32::from(a)) << 96, 30),
            (IpAddr::V6(a), 6) => (u128::from(a), 126),
            _ => return Err(CidrError::Family(text.to_owned(), version)),
        };
        if len > max {
            return Err(CidrError::PrefixTooLong { cidr: text.to_owned(), len, max });
        }
        let mask = if len == 0 { 0 } else { u128::MAX << (128 - u32::from(len)) };
        if bits & !mask != 0 {
            let net = bits & mask;
            let network = match addr {
                IpAddr::V4(_) => std::net::Ipv4Addr::from((net >> 96) as u32).to_string(),
                IpAddr::V6(_) => std::net::Ipv6Addr::from(net).to_string(),
            };
            return Err(CidrError::HostBits { cidr: text.to_owned(), network: format!("{network}/{len}") });
        }
        Ok(Self { addr, len })
    }

    /// The address as 128 bits (IPv4 in the top 32) and the prefix over them.
    fn wide(&self) -> (u128, u32) {
        match self.addr {
            IpAddr::V4(a) => (u128::from(u32::from(a)) << 96, u32::from(self.len)),
            IpAddr::V6(a) => (u128::from(a), u32::from(self.len)),
        }
    }

    fn same_family(&self, other: &Cidr) -> bool {
        self.addr.is_ipv4() == other.addr.is_ipv4()
    }

    /// Whether `addr` is in this network.
    pub fn contains(&self, addr: IpAddr) -> bool {
        Cidr { addr, len: if addr.is_ipv4() { 32 } else { 128 } }.within(self)
    }

    /// Whether this network lies inside `outer`.
    pub fn within(&self, outer: &Cidr) -> bool {
        let ((a, a_len), (b, b_len)) = (self.wide(), outer.wide());
        let mask = if b_len == 0 { 0 } else { u128::MAX << (128 - b_len) };
        self.same_family(outer) && a_len >= b_len && a & mask == b & mask
    }

    /// Whether the two networks share an address.
    pub fn overlaps(&self, other: &Cidr) -> bool {
        self.within(other) || other.within(self)
    }

    /// The usable IPv4 host addresses (network and broadcast excluded), in
    /// order; none for IPv6.
    pub fn ipv4_hosts(&self) -> impl Iterator<Item = std::net::Ipv4Addr> + use<> {
        let (base, size) = match self.addr {
            IpAddr::V4(a) => (u32::from(a), 1u64 << (32 - u32::from(self.len))),
            IpAddr::V6(_) => (0, 0),
        };
        (1..size.saturating_sub(1)).map(move |i| std::net::Ipv4Addr::from(base.wrapping_add(i as u32)))
    }
}

impl VirtualNetworkSpec {
    /// Checks the spec, naming fields under `prefix` (e.g. `object.spec`).
    pub fn check(&self, prefix: &str) -> Result<(), ValidationErrors> {
        let mut errs = ValidationErrors::default();
        if self.ipv4_cidr.is_none() && self.ipv6_cidr.is_none() {
            errs.push(format!("{prefix}.ipv4_cidr"), "is required (or give ipv6_cidr)");
        }
        for (field, cidr, version) in [("ipv4_cidr", &self.ipv4_cidr, 4), ("ipv6_cidr", &self.ipv6_cidr, 6)] {
            if let Some(Err(e)) = cidr.as_deref().map(|c| Cidr::parse(c, version)) {
                errs.push(format!("{prefix}.{field}"), e.to_string());
            }
        }
        if !self.network_class.is_empty() {
            errs.push(
                format!("{prefix}.network_class"),
                format!("{:?} is not offered: leave it empty for the default", self.network_class),
            );
        }
        errs.into_result(())
    }
}

crate::wire_states! {
    /// The state of a virtual network.
    VirtualNetworkState {
        /// Being set up (or torn down).
        Pending = "VIRTUAL_NETWORK_STATE_PENDING",
        /// Usable.
        Ready = "VIRTUAL_NETWORK_STATE_READY",
        /// Could not be set up; see the message.
        Failed = "VIRTUAL_NETWORK_STATE_FAILED",
    }
}

/// What the network is now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct VirtualNetworkStatus {
    /// Overall state.
    pub state: VirtualNetworkState,
    /// Why it is pending or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// How many objects use it (subnets, security groups, NICs of VMs,
    /// load balancers); while any does, it cannot be deleted.
    #[serde(default)]
    pub users: u32,
}
crate::api_object! {
    /// A virtual network as the API returns it.
    VirtualNetwork { kind: VirtualNetwork, spec: VirtualNetworkSpec, status: VirtualNetworkStatus, type_url: "type.googleapis.com/osac.public.v1.VirtualNetwork" }
}

/// The object of a create request; as for VMs, `id` may carry the name.
pub type CreateVirtualNetwork = crate::object::CreateObject<VirtualNetworkSpec>;

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(spec: serde_json::Value) -> Vec<String> {
        let spec: VirtualNetworkSpec = serde_json::from_value(spec).unwrap();
        spec.check("spec").err().map(|e| e.iter().map(|f| format!("{}: {}", f.field, f.reason)).collect()).unwrap_or_default()
    }

    #[test]
    fn cidrs_are_checked_by_family_prefix_and_host_bits() {
        assert!(errors(serde_json::json!({"ipv4_cidr": "10.10.0.0/16"})).is_empty());
        assert!(errors(serde_json::json!({"ipv4_cidr": "10.10.0.0/16", "ipv6_cidr": "fd00:10::/48"})).is_empty());
        assert_eq!(errors(serde_json::json!({})), ["spec.ipv4_cidr: is required (or give ipv6_cidr)"]);
        assert_eq!(
            errors(serde_json::json!({"ipv4_cidr": "10.10.0.1/16"})),
            ["spec.ipv4_cidr: \"10.10.0.1/16\" has host bits set: the network is 10.10.0.0/16"]
        );
        assert_eq!(
            errors(serde_json::json!({"ipv4_cidr": "10.0.0.0/31"})),
            ["spec.ipv4_cidr: \"10.0.0.0/31\" has prefix length 31: it must be at most 30"]
        );
        assert_eq!(errors(serde_json::json!({"ipv6_cidr": "10.0.0.0/8"})), ["spec.ipv6_cidr: \"10.0.0.0/8\" is not an IPv6 CIDR"]);
        assert!(errors(serde_json::json!({"ipv4_cidr": "ten"}))[0].contains("is not a CIDR"));
        assert!(
            serde_json::from_value::<VirtualNetworkSpec>(serde_json::json!({"ipv4cidr": "10.0.0.0/8"})).is_err(),
            "unknown fields are refused"
        );
    }

    #[test]
    fn states_use_osac_names() {
        let s = VirtualNetworkStatus { state: VirtualNetworkState::Ready, message: None, users: 0 };
        assert_eq!(serde_json::to_value(&s).unwrap(), serde_json::json!({"state": "VIRTUAL_NETWORK_STATE_READY", "users": 0}));
    }

    #[test]
    fn networks_contain_and_overlap() {
        let net = Cidr::parse("10.0.0.0/16", 4).unwrap();
        let a = Cidr::parse("10.0.1.0/24", 4).unwrap();
        let b = Cidr::parse("10.0.0.0/23", 4).unwrap();
        let c = Cidr::parse("10.1.0.0/24", 4).unwrap();
        assert!(a.within(&net) && !net.within(&a) && !c.within(&net));
        assert!(a.overlaps(&b) && b.overlaps(&a) && !a.overlaps(&c));
        assert!(a.contains("10.0.1.77".parse().unwrap()) && !a.contains("10.0.2.1".parse().unwrap()));
        assert!(!a.contains("::1".parse().unwrap()));
        let hosts: Vec<String> = Cidr::parse("127.9.0.0/30", 4).unwrap().ipv4_hosts().map(|h| h.to_string()).collect();
        assert_eq!(hosts, ["127.9.0.1", "127.9.0.2"]);
        assert_eq!(Cidr::parse("fd00::/64", 6).unwrap().ipv4_hosts().count(), 0);
        assert!(Cidr::parse("fd00::/64", 6).unwrap().within(&Cidr::parse("fd00::/48", 6).unwrap()));
    }
}
