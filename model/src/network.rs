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
    /// The network class: empty for the default (a network of the
    /// backend's own), or one the server offers (on kubevirt, a physical
    /// network an administrator declared: the subnets are OVN-K localnets
    /// on it). A create naming a class not offered is refused.
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

/// A checked CIDR: an `ipnet` network, the one CIDR type of vmaas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr(ipnet::IpNet);

impl Cidr {
    /// Parses `text` as a network of IP version `version` (4 or 6) with room
    /// for hosts (a prefix of at most 30 or 126), without host bits.
    pub fn parse(text: &str, version: u8) -> Result<Self, CidrError> {
        let net: ipnet::IpNet = text.parse().map_err(|_| CidrError::Syntax(text.to_owned()))?;
        let max = match (net, version) {
            (ipnet::IpNet::V4(_), 4) => 30,
            (ipnet::IpNet::V6(_), 6) => 126,
            _ => return Err(CidrError::Family(text.to_owned(), version)),
        };
        if net.prefix_len() > max {
            return Err(CidrError::PrefixTooLong { cidr: text.to_owned(), len: net.prefix_len(), max });
        }
        if net.trunc() != net {
            return Err(CidrError::HostBits { cidr: text.to_owned(), network: net.trunc().to_string() });
        }
        Ok(Self(net))
    }

    /// An entry of an allow list: `ADDR/LEN` (any prefix; an address inside
    /// the network names the network) or a single address.
    pub fn entry(text: &str) -> Option<Self> {
        match text.parse::<ipnet::IpNet>() {
            Ok(net) => Some(Self(net.trunc())),
            Err(_) => text.parse::<IpAddr>().ok().map(|a| Self(ipnet::IpNet::from(a))),
        }
    }

    /// The network.
    pub fn net(&self) -> ipnet::IpNet {
        self.0
    }

    /// The network address.
    pub fn addr(&self) -> IpAddr {
        self.0.network()
    }

    /// The prefix length.
    pub fn prefix_len(&self) -> u8 {
        self.0.prefix_len()
    }

    /// Whether `addr` is in this network.
    pub fn contains(&self, addr: IpAddr) -> bool {
        self.0.contains(&addr)
    }

    /// Whether this network lies inside `outer`.
    pub fn within(&self, outer: &Cidr) -> bool {
        outer.0.contains(&self.0)
    }

    /// Whether the two networks share an address.
    pub fn overlaps(&self, other: &Cidr) -> bool {
        self.within(other) || other.within(self)
    }

    /// The usable IPv4 host addresses (network and broadcast excluded), in
    /// order; none for IPv6.
    pub fn ipv4_hosts(&self) -> impl Iterator<Item = std::net::Ipv4Addr> + use<> {
        let v4 = match self.0 {
            ipnet::IpNet::V4(n) => Some(n.hosts()),
            ipnet::IpNet::V6(_) => None,
        };
        v4.into_iter().flatten()
    }

    /// How many usable IPv4 host addresses there are; 0 for IPv6.
    pub fn ipv4_host_count(&self) -> u64 {
        match self.0 {
            ipnet::IpNet::V4(n) => (1u64 << (32 - u32::from(n.prefix_len()))).saturating_sub(2),
            ipnet::IpNet::V6(_) => 0,
        }
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
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
        if !self.network_class.is_empty()
            && let Err(e) = crate::validation::check_dns_label(&self.network_class)
        {
            errs.push(format!("{prefix}.network_class"), format!("{e} (a class the server offers, or empty for the default)"));
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
