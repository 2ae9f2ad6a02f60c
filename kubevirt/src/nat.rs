//! NAT gateways on a cluster whose subnets are secondary networks
//! ([`crate::SubnetMode::Secondary`]): an OVN-K `EgressIP` of the gateway's
//! address for the launcher pods of its network's VMs (labelled
//! [`network_label`] of the network, in the tenant's namespace), so what
//! they send out of the cluster leaves from that address. Their way out
//! is the pod network, the first NIC of every VM in that mode; traffic
//! inside the cluster keeps its own addresses, as EgressIP does. The
//! gateway is READY once OVN-K has given its address to a node (a node
//! labelled `k8s.ovn.org/egress-assignable`); until then it is PENDING,
//! saying so.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use vmaas_backend::{BackendError, Cleanup, Driver, NatObservation, NatSpec, NatTarget, Requeue};
use vmaas_model::ObjectKind;
use vmaas_model::k8s::render::TENANT_LABEL;

use crate::cluster::as_json;
use crate::names::{label_value, labels};
use crate::shared::Shared;

/// The label of the launcher pods of the VMs on virtual network `network` (its id).
pub fn network_label(network: &str) -> String {
    format!("network.vmaas.io/{}", label_value(network))
}

/// The name of NAT gateway `id`'s EgressIP.
fn egress_ip_name(id: &str) -> String {
    format!("nat-{}", label_value(id))
}

/// The EgressIP of gateway `t`.
fn egress_ip(t: &NatTarget) -> Value {
    json!({
        "apiVersion": "k8s.ovn.org/v1", "kind": "EgressIP",
        "metadata": {"name": egress_ip_name(&t.id), "labels": labels(ObjectKind::NatGateway, &t.id)},
        "spec": {
            "egressIPs": [t.spec.address.to_string()],
            "namespaceSelector": {"matchLabels": {TENANT_LABEL: label_value(&t.tenant)}},
            "podSelector": {"matchLabels": {network_label(&t.spec.virtual_network): "true"}},
        },
    })
}

/// Whether OVN-K has given `address` to a node, by the EgressIP's status.
fn assigned(seen: &Value, address: &str) -> bool {
    seen["status"]["items"].as_array().is_some_and(|items| items.iter().any(|i| i["egressIP"] == address && i["node"].is_string()))
}

/// The driver of NAT gateways.
pub struct Nats(pub(crate) Arc<Shared>);

#[async_trait]
impl Driver<NatSpec, NatObservation> for Nats {
    async fn ensure(&self, t: &NatTarget) -> Result<(NatObservation, Requeue), BackendError> {
        let s = &self.0;
        s.listed()?;
        let Some(watched) = &s.egress_ips else {
            let why =
                "NAT gateways are OVN-K EgressIPs for the pod network, which VMs on subnets only have with --subnet-networks secondary";
            return Ok((NatObservation::Failed(why.into()), Requeue::AwaitChange));
        };
        let want = egress_ip(t);
        let seen = watched.get_cluster(&egress_ip_name(&t.id)).map(|o| as_json(&o));
        if seen.as_ref().is_none_or(|seen| seen["spec"] != want["spec"]) {
            s.cluster.apply(&s.cluster.res.egress_ip, &want).await?;
        }
        let address = t.spec.address.to_string();
        if seen.is_some_and(|seen| assigned(&seen, &address)) {
            return Ok((NatObservation::Ready, Requeue::AwaitChange));
        }
        Err(BackendError::transient(
            "routing the network out through the gateway",
            format!("OVN-K has not given {address} to a node yet (a node must be labelled k8s.ovn.org/egress-assignable)"),
        ))
    }

    async fn delete(&self, id: &str) -> Result<Cleanup, BackendError> {
        let s = &self.0;
        if s.egress_ips.is_none() {
            return Ok(Cleanup::Done);
        }
        let left = s.cluster.delete_all_of(&s.cluster.res.egress_ip, id).await?;
        Ok(if left == 0 { Cleanup::Done } else { Cleanup::InProgress })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gateway_is_ready_once_its_address_is_on_a_node() {
        let seen = json!({"status": {"items": [{"egressIP": "192.0.2.10", "node": "node-1"}]}});
        assert!(assigned(&seen, "192.0.2.10"));
        assert!(!assigned(&seen, "192.0.2.11"));
        assert!(!assigned(&json!({}), "192.0.2.10"));
        assert_eq!(network_label("net-1"), "network.vmaas.io/net-1");
    }
}
