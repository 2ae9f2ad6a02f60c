//! Security groups, in the shape of OSAC's `osac.public.v1.SecurityGroup`:
//! rules for the NICs of one virtual network, `spec.ingress[]` and
//! `spec.egress[]` of `{protocol: PROTOCOL_TCP|UDP|ICMP|ALL, port_from,
//! port_to, ipv4_cidr}`, enforced statefully (replies of allowed traffic
//! pass). A NIC without security groups allows everything in its network.

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::validation::ValidationErrors;

/// The `@type` of a security group in API responses.
pub const SECURITY_GROUP_TYPE_URL: &str = "type.googleapis.com/osac.public.v1.SecurityGroup";

/// A rule's protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Protocol {
    /// TCP.
    #[serde(rename = "PROTOCOL_TCP")]
    Tcp,
    /// UDP.
    #[serde(rename = "PROTOCOL_UDP")]
    Udp,
    /// ICMP.
    #[serde(rename = "PROTOCOL_ICMP")]
    Icmp,
    /// Any protocol.
    #[serde(rename = "PROTOCOL_ALL")]
    All,
}

/// One rule: what may pass, to or from where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SecurityRule {
    /// The protocol.
    pub protocol: Protocol,
    /// First port (TCP and UDP only); absent: every port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_from: Option<i32>,
    /// Last port, inclusive; absent: `port_from` alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_to: Option<i32>,
    /// The other side's addresses; absent: anywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv4_cidr: Option<String>,
    /// IPv6 (not offered yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv6_cidr: Option<String>,
}

/// A rule checked: ports as a range, the remote side as network and prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckedRule {
    /// The protocol.
    pub protocol: Protocol,
    /// Inclusive port range (1..=65535 when not given).
    pub ports: (u16, u16),
    /// The remote network and prefix length (0.0.0.0/0 when not given).
    pub cidr: (Ipv4Addr, u8),
}

/// Parses `a.b.c.d/len` for a rule (any prefix length up to 32).
fn rule_cidr(text: &str) -> Result<(Ipv4Addr, u8), RuleCidrError> {
    let net: ipnet::Ipv4Net = text.parse().map_err(|_| RuleCidrError::Syntax(text.to_owned()))?;
    if net.trunc() != net {
        return Err(RuleCidrError::HostBits { text: text.to_owned(), network: net.trunc().to_string() });
    }
    Ok((net.network(), net.prefix_len()))
}

/// Why a rule's remote network is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleCidrError {
    /// Not an IPv4 CIDR.
    #[error("{0:?} is not an IPv4 CIDR, e.g. 10.0.1.0/24 or 10.0.1.7/32")]
    Syntax(String),
    /// Bits set after the prefix.
    #[error("{text:?} has host bits set: the network is {network}")]
    HostBits {
        /// The text.
        text: String,
        /// The network it lies in.
        network: String,
    },
}

/// The reason, as a field error takes it.
impl From<RuleCidrError> for String {
    fn from(e: RuleCidrError) -> String {
        e.to_string()
    }
}

impl SecurityRule {
    /// Checks the rule, naming fields under `prefix`.
    pub fn check(&self, prefix: &str, errs: &mut ValidationErrors) -> Option<CheckedRule> {
        let before = errs.0.len();
        let ported = matches!(self.protocol, Protocol::Tcp | Protocol::Udp);
        let in_range = |p: i32| (1..=65535).contains(&p);
        let mut ports = (1u16, 65535u16);
        match (self.port_from, self.port_to) {
            (None, None) => {}
            _ if !ported => errs.push(format!("{prefix}.port_from"), "ports apply to PROTOCOL_TCP and PROTOCOL_UDP only"),
            (None, Some(_)) => errs.push(format!("{prefix}.port_from"), "is required with port_to"),
            (Some(f), to) => {
                let t = to.unwrap_or(f);
                for (field, p) in [("port_from", Some(f)), ("port_to", to)] {
                    if let Some(p) = p.filter(|p| !in_range(*p)) {
                        errs.push(format!("{prefix}.{field}"), format!("{p} is not a port: 1 to 65535"));
                    }
                }
                if in_range(f) && in_range(t) && f > t {
                    errs.push(format!("{prefix}.port_to"), format!("{t} is below port_from {f}"));
                }
                ports = (f.clamp(1, 65535) as u16, t.clamp(1, 65535) as u16);
            }
        }
        let cidr = match self.ipv4_cidr.as_deref().map(rule_cidr) {
            None => (Ipv4Addr::UNSPECIFIED, 0),
            Some(Ok(c)) => c,
            Some(Err(e)) => {
                errs.push(format!("{prefix}.ipv4_cidr"), e);
                (Ipv4Addr::UNSPECIFIED, 0)
            }
        };
        if self.ipv6_cidr.is_some() {
            errs.push(format!("{prefix}.ipv6_cidr"), "IPv6 rules are not offered yet");
        }
        (errs.0.len() == before).then_some(CheckedRule { protocol: self.protocol, ports, cidr })
    }
}

/// What the tenant asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SecurityGroupSpec {
    /// The virtual network whose NICs it may guard: its id (its name is
    /// accepted on create and replaced by the id; OSAC's typed
    /// `{"name": …}` is read too). Immutable.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    #[serde(with = "crate::reference::key")]
    pub virtual_network: String,
    /// What may come in.
    #[serde(default)]
    pub ingress: Vec<SecurityRule>,
    /// What may go out.
    #[serde(default)]
    pub egress: Vec<SecurityRule>,
}

/// At most this many rules per direction.
pub const MAX_RULES: usize = 200;

impl SecurityGroupSpec {
    /// Checks the spec, naming fields under `prefix`.
    pub fn check(&self, prefix: &str) -> Result<(), ValidationErrors> {
        let mut errs = ValidationErrors::default();
        if self.virtual_network.trim().is_empty() {
            errs.push(format!("{prefix}.virtual_network"), "is required: the id or name of one of your virtual networks");
        }
        for (dir, rules) in [("ingress", &self.ingress), ("egress", &self.egress)] {
            if rules.len() > MAX_RULES {
                errs.push(format!("{prefix}.{dir}"), format!("{} rules: at most {MAX_RULES}", rules.len()));
            }
            for (i, r) in rules.iter().enumerate() {
                r.check(&format!("{prefix}.{dir}[{i}]"), &mut errs);
            }
        }
        errs.into_result(())
    }
}

crate::wire_states! {
    /// The state of a security group.
    SecurityGroupState {
        /// Being set up.
        Pending = "SECURITY_GROUP_STATE_PENDING",
        /// Enforced on the NICs that have it.
        Ready = "SECURITY_GROUP_STATE_READY",
        /// Could not be set up.
        Failed = "SECURITY_GROUP_STATE_FAILED",
        /// Being removed.
        Deleting = "SECURITY_GROUP_STATE_DELETING",
        /// Could not be removed.
        DeleteFailed = "SECURITY_GROUP_STATE_DELETE_FAILED",
    }
}

/// What the security group is now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SecurityGroupStatus {
    /// Overall state.
    pub state: SecurityGroupState,
    /// Why it is pending or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// How many objects use it (subnets, security groups, NICs of VMs,
    /// load balancers); while any does, it cannot be deleted.
    #[serde(default)]
    pub users: u32,
}
crate::api_object! {
    /// A security group as the API returns it.
    SecurityGroup { kind: SecurityGroup, spec: SecurityGroupSpec, status: SecurityGroupStatus, type_url: "type.googleapis.com/osac.public.v1.SecurityGroup" }
}

/// The object of a create request; `id` may carry the name.
pub type CreateSecurityGroup = crate::object::CreateObject<SecurityGroupSpec>;

/// The rules a PATCH replaces (each list given replaces the old one).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SecurityGroupPatchSpec {
    /// New ingress rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress: Option<Vec<SecurityRule>>,
    /// New egress rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<Vec<SecurityRule>>,
}

crate::patch_object! {
    /// The object of a PATCH request.
    PatchSecurityGroup { spec: SecurityGroupPatchSpec }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(spec: serde_json::Value) -> Vec<String> {
        let spec: SecurityGroupSpec = serde_json::from_value(spec).unwrap();
        match spec.check("spec") {
            Ok(()) => vec![],
            Err(e) => e.0.iter().map(|f| format!("{}: {}", f.field, f.reason)).collect(),
        }
    }

    #[test]
    fn rules_are_checked_by_protocol_ports_and_cidr() {
        let ok = serde_json::json!({"virtual_network": "n", "ingress": [
            {"protocol": "PROTOCOL_TCP", "port_from": 80, "port_to": 443, "ipv4_cidr": "10.0.1.0/24"},
            {"protocol": "PROTOCOL_ICMP"}, {"protocol": "PROTOCOL_UDP", "port_from": 53, "ipv4_cidr": "10.0.1.7/32"}]});
        assert!(errors(ok).is_empty());
        let bad = serde_json::json!({"virtual_network": "n", "ingress": [
            {"protocol": "PROTOCOL_TCP", "port_from": 0},
            {"protocol": "PROTOCOL_TCP", "port_from": 90, "port_to": 80},
            {"protocol": "PROTOCOL_ICMP", "port_from": 1},
            {"protocol": "PROTOCOL_TCP", "port_to": 22}],
            "egress": [{"protocol": "PROTOCOL_ALL", "ipv4_cidr": "10.0.1.1/24"}, {"protocol": "PROTOCOL_ALL", "ipv6_cidr": "::/0"}]});
        let e = errors(bad);
        assert_eq!(
            e,
            [
                "spec.ingress[0].port_from: 0 is not a port: 1 to 65535",
                "spec.ingress[1].port_to: 80 is below port_from 90",
                "spec.ingress[2].port_from: ports apply to PROTOCOL_TCP and PROTOCOL_UDP only",
                "spec.ingress[3].port_from: is required with port_to",
                "spec.egress[0].ipv4_cidr: \"10.0.1.1/24\" has host bits set: the network is 10.0.1.0/24",
                "spec.egress[1].ipv6_cidr: IPv6 rules are not offered yet",
            ]
        );
        let unknown = serde_json::from_value::<SecurityGroupSpec>(
            serde_json::json!({"virtual_network": "n", "ingress": [{"protocol": "PROTOCOL_SCTP"}]}),
        );
        assert!(unknown.unwrap_err().to_string().contains("PROTOCOL_SCTP"));
    }

    #[test]
    fn a_checked_rule_defaults_to_every_port_and_anywhere() {
        let r = SecurityRule { protocol: Protocol::Tcp, port_from: Some(22), port_to: None, ipv4_cidr: None, ipv6_cidr: None };
        let c = r.check("r", &mut ValidationErrors::default()).unwrap();
        assert_eq!((c.ports, c.cidr), ((22, 22), (Ipv4Addr::UNSPECIFIED, 0)));
        let all = SecurityRule { protocol: Protocol::Udp, port_from: None, port_to: None, ipv4_cidr: None, ipv6_cidr: None };
        assert_eq!(all.check("r", &mut ValidationErrors::default()).unwrap().ports, (1, 65535));
    }
}
