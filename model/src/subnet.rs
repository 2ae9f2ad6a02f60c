//! Subnets, in the shape of OSAC's `osac.public.v1.Subnet`: an IPv4 range
//! inside a virtual network (`spec.virtual_network`, its id or name), one
//! Ethernet segment on the qemu backend, with a state
//! `SUBNET_STATE_PENDING|READY|FAILED|DELETING|DELETE_FAILED`. The spec is
//! immutable once created, as in OSAC.

use serde::{Deserialize, Serialize};

use crate::network::Cidr;
use crate::validation::ValidationErrors;

/// The `@type` of a subnet in API responses.
pub const SUBNET_TYPE_URL: &str = "type.googleapis.com/osac.public.v1.Subnet";

/// What the tenant asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SubnetSpec {
    /// The virtual network: its id (its name is accepted on create and
    /// replaced by the id); OSAC's typed `{"name": …}` is read too.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    #[serde(with = "crate::reference::key")]
    pub virtual_network: String,
    /// The IPv4 range, inside the network's, e.g. `10.10.1.0/24`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv4_cidr: Option<String>,
    /// The IPv6 range (not offered yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv6_cidr: Option<String>,
}

impl SubnetSpec {
    /// Checks what the spec says by itself, naming fields under `prefix`;
    /// the server checks it against the network and its other subnets.
    pub fn check(&self, prefix: &str) -> Result<Cidr, ValidationErrors> {
        let mut errs = ValidationErrors::default();
        if self.virtual_network.trim().is_empty() {
            errs.push(format!("{prefix}.virtual_network"), "is required: the id or name of one of your virtual networks");
        }
        if self.ipv6_cidr.is_some() {
            errs.push(format!("{prefix}.ipv6_cidr"), "IPv6 subnets are not offered yet: give ipv4_cidr");
        }
        let cidr = match self.ipv4_cidr.as_deref().map(|c| Cidr::parse(c, 4)) {
            None => {
                errs.push(format!("{prefix}.ipv4_cidr"), "is required, e.g. 10.10.1.0/24");
                None
            }
            Some(Err(e)) => {
                errs.push(format!("{prefix}.ipv4_cidr"), e.to_string());
                None
            }
            Some(Ok(c)) => Some(c),
        };
        match cidr {
            Some(c) if errs.is_empty() => Ok(c),
            _ => Err(errs),
        }
    }
}

crate::wire_states! {
    /// The state of a subnet.
    SubnetState {
        /// Being set up.
        Pending = "SUBNET_STATE_PENDING",
        /// Its segment runs: VMs can attach.
        Ready = "SUBNET_STATE_READY",
        /// Could not be set up; see the message.
        Failed = "SUBNET_STATE_FAILED",
        /// Being removed.
        Deleting = "SUBNET_STATE_DELETING",
        /// Could not be removed; see the message.
        DeleteFailed = "SUBNET_STATE_DELETE_FAILED",
    }
}

/// What the subnet is now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SubnetStatus {
    /// Overall state.
    pub state: SubnetState,
    /// Why it is pending or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// How many objects use it (subnets, security groups, NICs of VMs,
    /// load balancers); while any does, it cannot be deleted.
    #[serde(default)]
    pub users: u32,
}
crate::api_object! {
    /// A subnet as the API returns it.
    Subnet { kind: Subnet, spec: SubnetSpec, status: SubnetStatus, type_url: "type.googleapis.com/osac.public.v1.Subnet" }
}

/// The object of a create request; `id` may carry the name.
pub type CreateSubnet = crate::object::CreateObject<SubnetSpec>;

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(spec: serde_json::Value) -> Vec<String> {
        let spec: SubnetSpec = serde_json::from_value(spec).unwrap();
        match spec.check("spec") {
            Ok(_) => vec![],
            Err(e) => e.0.iter().map(|f| format!("{}: {}", f.field, f.reason)).collect(),
        }
    }

    #[test]
    fn a_subnet_names_its_network_and_an_ipv4_range() {
        assert!(errors(serde_json::json!({"virtual_network": "net", "ipv4_cidr": "10.10.1.0/24"})).is_empty());
        let e = errors(serde_json::json!({"virtual_network": " ", "ipv6_cidr": "fd00::/64"}));
        assert_eq!(e.len(), 3, "{e:?}");
        assert!(e[0].starts_with("spec.virtual_network: is required"), "{e:?}");
        assert!(e.iter().any(|m| m.starts_with("spec.ipv6_cidr: IPv6 subnets are not offered")), "{e:?}");
        assert_eq!(
            errors(serde_json::json!({"virtual_network": "n", "ipv4_cidr": "10.10.1.1/24"})),
            ["spec.ipv4_cidr: \"10.10.1.1/24\" has host bits set: the network is 10.10.1.0/24"]
        );
        let unknown = serde_json::from_value::<SubnetSpec>(serde_json::json!({"virtual_network": "n", "cidr": "x"}));
        assert!(unknown.unwrap_err().to_string().contains("unknown field `cidr`"));
    }

    #[test]
    fn states_have_their_wire_names() {
        for s in SubnetState::ALL {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
    }
}
