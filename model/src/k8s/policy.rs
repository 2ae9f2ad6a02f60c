//! Security groups on Kubernetes: a `NetworkPolicy` per VM, which
//! OVN-Kubernetes enforces on a namespace's primary user-defined network
//! (the network a subnet is on a cluster in primary mode), and a
//! `MultiNetworkPolicy` per VM NIC on a secondary network (OVN-K enforces
//! only those there). Both are stateful, as security groups are: replies to
//! allowed traffic pass.
//!
//! Neither has ICMP: an ICMP rule cannot be rendered, so ICMP reaches the
//! VM only from sources a `PROTOCOL_ALL` rule admits. MultiNetworkPolicy's
//! served version (`v1beta1`) has no `endPort`: a range is listed port by
//! port, at most [`MAX_LISTED_PORTS`], and a whole protocol is its
//! protocol without a port.

use serde_json::{Value, json};

use crate::security_group::{CheckedRule, Protocol};

/// The most ports a range of a MultiNetworkPolicy rule is listed as.
pub const MAX_LISTED_PORTS: u32 = 256;

/// A rule a MultiNetworkPolicy cannot state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "ports {from}-{to} are {count} ports; a MultiNetworkPolicy (k8s.cni.cncf.io/v1beta1) has no port ranges and lists at most {MAX_LISTED_PORTS}: split the rule, or allow every port"
)]
pub struct TooManyPorts {
    /// The range's first port.
    pub from: u16,
    /// Its last.
    pub to: u16,
    /// How many ports it holds.
    pub count: u32,
}

/// How a policy states a port range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ranges {
    /// `port` and `endPort` (NetworkPolicy).
    EndPort,
    /// One entry per port (MultiNetworkPolicy v1beta1).
    Listed,
}

/// The `ports` of `rule`'s entry (none: every port and protocol).
fn ports(rule: &CheckedRule, ranges: Ranges) -> Result<Option<Vec<Value>>, TooManyPorts> {
    let protocol = match rule.protocol {
        Protocol::Tcp => "TCP",
        Protocol::Udp => "UDP",
        Protocol::All | Protocol::Icmp => return Ok(None),
    };
    let (from, to) = rule.ports;
    if (from, to) == (1, u16::MAX) && ranges == Ranges::Listed {
        return Ok(Some(vec![json!({"protocol": protocol})]));
    }
    let one = |p: u16| json!({"protocol": protocol, "port": p});
    Ok(Some(match ranges {
        _ if to <= from => vec![one(from)],
        Ranges::EndPort => vec![json!({"protocol": protocol, "port": from, "endPort": to})],
        Ranges::Listed => {
            let count = u32::from(to) - u32::from(from) + 1;
            if count > MAX_LISTED_PORTS {
                return Err(TooManyPorts { from, to, count });
            }
            (from..=to).map(one).collect()
        }
    }))
}

/// One peer-and-ports entry of a policy for `rule`, or none for ICMP.
fn entry(rule: &CheckedRule, peer_key: &str, ranges: Ranges) -> Result<Option<Value>, TooManyPorts> {
    if rule.protocol == Protocol::Icmp {
        return Ok(None);
    }
    let (addr, len) = rule.cidr;
    let mut e = json!({ peer_key: [{"ipBlock": {"cidr": format!("{addr}/{len}")}}] });
    if let Some(p) = ports(rule, ranges)? {
        e["ports"] = json!(p);
    }
    Ok(Some(e))
}

/// A policy's spec for the pods labelled `pod_labels`: only what `ingress`
/// and `egress` allow passes (none: nothing).
fn spec(pod_labels: &Value, ingress: &[CheckedRule], egress: &[CheckedRule], ranges: Ranges) -> Result<Value, TooManyPorts> {
    let entries = |rules: &[CheckedRule], key: &str| -> Result<Vec<Value>, TooManyPorts> {
        Ok(rules.iter().map(|r| entry(r, key, ranges)).collect::<Result<Vec<_>, _>>()?.into_iter().flatten().collect())
    };
    Ok(json!({"podSelector": {"matchLabels": pod_labels}, "policyTypes": ["Ingress", "Egress"],
        "ingress": entries(ingress, "from")?, "egress": entries(egress, "to")?}))
}

/// The NetworkPolicy `name` in `ns` for the pods labelled `pod_labels`:
/// only what `ingress` and `egress` allow passes (none: nothing).
pub fn security_policy(name: &str, ns: &str, pod_labels: &Value, ingress: &[CheckedRule], egress: &[CheckedRule]) -> Value {
    // `endPort` states every range, so nothing is refused.
    let spec = spec(pod_labels, ingress, egress, Ranges::EndPort).unwrap_or_default();
    json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    })
}

/// The annotation naming the network a MultiNetworkPolicy is for.
pub const POLICY_FOR: &str = "k8s.v1.cni.cncf.io/policy-for";

/// The MultiNetworkPolicy `name` in `ns` for the pods labelled
/// `pod_labels`, on network attachment `nad` (`namespace/name`).
pub fn multi_network_policy(
    name: &str,
    ns: &str,
    nad: &str,
    pod_labels: &Value,
    ingress: &[CheckedRule],
    egress: &[CheckedRule],
) -> Result<Value, TooManyPorts> {
    Ok(json!({
        "apiVersion": "k8s.cni.cncf.io/v1beta1", "kind": "MultiNetworkPolicy",
        "metadata": {"name": name, "namespace": ns, "annotations": {POLICY_FOR: nad}},
        "spec": spec(pod_labels, ingress, egress, Ranges::Listed)?,
    }))
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    fn rule(protocol: Protocol, ports: (u16, u16), cidr: (Ipv4Addr, u8)) -> CheckedRule {
        CheckedRule { protocol, ports, cidr }
    }

    #[test]
    fn rules_become_ip_blocks_and_port_ranges() {
        let any = (Ipv4Addr::UNSPECIFIED, 0);
        let web = [rule(Protocol::Tcp, (80, 80), any), rule(Protocol::Udp, (5000, 5010), (Ipv4Addr::new(10, 60, 1, 10), 31))];
        let p = security_policy("web-sg", "ns", &json!({"vmaas.io/id": "x"}), &web, &[rule(Protocol::All, (1, 65535), any)]);
        assert_eq!(
            p["spec"]["ingress"][0],
            json!({"from": [{"ipBlock": {"cidr": "0.0.0.0/0"}}], "ports": [{"protocol": "TCP", "port": 80}]})
        );
        assert_eq!(p["spec"]["ingress"][1]["ports"], json!([{"protocol": "UDP", "port": 5000, "endPort": 5010}]));
        assert_eq!(p["spec"]["ingress"][1]["from"][0]["ipBlock"]["cidr"], "10.60.1.10/31");
        assert_eq!(p["spec"]["egress"], json!([{"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}]), "ALL: every port and protocol");
    }

    #[test]
    fn a_multi_network_policy_lists_its_ports_and_names_its_network() {
        let any = (Ipv4Addr::UNSPECIFIED, 0);
        let rules = [rule(Protocol::Udp, (5000, 5002), any), rule(Protocol::Tcp, (1, 65535), any), rule(Protocol::All, (1, 65535), any)];
        let p = multi_network_policy("sg", "ns", "ns/net", &json!({"vmaas.io/id": "x"}), &rules, &[]).unwrap();
        assert_eq!(p["metadata"]["annotations"][POLICY_FOR], "ns/net");
        let ports: Vec<&Value> = p["spec"]["ingress"].as_array().unwrap().iter().map(|e| &e["ports"]).collect();
        let listed = json!([{"protocol": "UDP", "port": 5000}, {"protocol": "UDP", "port": 5001}, {"protocol": "UDP", "port": 5002}]);
        assert_eq!(ports, [&listed, &json!([{"protocol": "TCP"}]), &Value::Null]);
        let wide = [rule(Protocol::Tcp, (1000, 2000), any)];
        let err = multi_network_policy("sg", "ns", "ns/net", &json!({}), &wide, &[]).unwrap_err();
        assert_eq!((err.count, err.to_string().contains("1000-2000")), (1001, true));
    }

    #[test]
    fn no_rules_let_nothing_through_and_icmp_is_not_rendered() {
        let p = security_policy("sg", "ns", &json!({}), &[rule(Protocol::Icmp, (1, 65535), (Ipv4Addr::UNSPECIFIED, 0))], &[]);
        assert_eq!((p["spec"]["ingress"].clone(), p["spec"]["egress"].clone()), (json!([]), json!([])));
        assert_eq!(p["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
    }
}
