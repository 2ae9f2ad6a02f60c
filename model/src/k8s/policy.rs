//! Security groups on Kubernetes: a `NetworkPolicy` per VM NIC, which
//! OVN-Kubernetes enforces on a namespace's primary user-defined network
//! (the network a subnet is on a cluster). NetworkPolicies are stateful, as
//! security groups are: replies to allowed traffic pass.
//!
//! A NetworkPolicy has no ICMP: an ICMP rule cannot be rendered, so ICMP
//! reaches the VM only from sources a `PROTOCOL_ALL` rule admits.

use serde_json::{Value, json};

use crate::security_group::{CheckedRule, Protocol};

/// One peer-and-ports entry of a policy for `rule`, or none for ICMP.
fn entry(rule: &CheckedRule, peer_key: &str) -> Option<Value> {
    let (addr, len) = rule.cidr;
    let mut e = json!({ peer_key: [{"ipBlock": {"cidr": format!("{addr}/{len}")}}] });
    let protocol = match rule.protocol {
        Protocol::Tcp => "TCP",
        Protocol::Udp => "UDP",
        Protocol::All => return Some(e),
        Protocol::Icmp => return None,
    };
    let (from, to) = rule.ports;
    let mut port = json!({"protocol": protocol, "port": from});
    if to > from {
        port["endPort"] = json!(to);
    }
    e["ports"] = json!([port]);
    Some(e)
}

/// The NetworkPolicy `name` in `ns` for the pods labelled `pod_labels`:
/// only what `ingress` and `egress` allow passes (none: nothing).
pub fn security_policy(name: &str, ns: &str, pod_labels: &Value, ingress: &[CheckedRule], egress: &[CheckedRule]) -> Value {
    let ingress: Vec<Value> = ingress.iter().filter_map(|r| entry(r, "from")).collect();
    let egress: Vec<Value> = egress.iter().filter_map(|r| entry(r, "to")).collect();
    json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"podSelector": {"matchLabels": pod_labels}, "policyTypes": ["Ingress", "Egress"], "ingress": ingress, "egress": egress},
    })
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
    fn no_rules_let_nothing_through_and_icmp_is_not_rendered() {
        let p = security_policy("sg", "ns", &json!({}), &[rule(Protocol::Icmp, (1, 65535), (Ipv4Addr::UNSPECIFIED, 0))], &[]);
        assert_eq!((p["spec"]["ingress"].clone(), p["spec"]["egress"].clone()), (json!([]), json!([])));
        assert_eq!(p["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
    }
}
