//! Virtual networks and subnets on a cluster. A subnet is a namespace of
//! its own whose primary network is a layer-2 OVN-K `UserDefinedNetwork`
//! with the subnet's range: the VMs attached to the subnet run in that
//! namespace, bridged onto it, and its security groups are NetworkPolicies
//! there (OVN-K enforces NetworkPolicies on a primary UDN). With
//! [`SubnetMode::Secondary`] a subnet is a secondary CUDN instead
//! ([`crate::secondary`]). A virtual network has nothing of its own in the
//! cluster: its subnets are it.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::json;
use vmaas_backend::{BackendError, Cleanup, Driver, NetworkObservation, NetworkSpec, NetworkTarget, Requeue, SubnetSpec, SubnetTarget};
use vmaas_model::ObjectKind;
use vmaas_model::k8s::render::udn;

use crate::SubnetMode;
use crate::cluster::as_json;
use crate::names::{labels, selector_of};
use crate::shared::Shared;

/// The name of the UDN in a subnet's namespace.
pub const UDN: &str = "subnet";

/// The driver of virtual networks: nothing to make.
pub struct Networks;

#[async_trait]
impl Driver<NetworkSpec, NetworkObservation> for Networks {
    async fn ensure(&self, _t: &NetworkTarget) -> Result<(NetworkObservation, Requeue), BackendError> {
        Ok((NetworkObservation::Ready, Requeue::AwaitChange))
    }

    async fn delete(&self, _id: &str) -> Result<Cleanup, BackendError> {
        Ok(Cleanup::Done)
    }
}

/// The driver of subnets.
pub struct Subnets(pub(crate) Arc<Shared>);

/// Where OVN-K says the (C)UDN `udn` is (its `NetworkCreated` condition).
pub(crate) fn observe(udn: Option<&serde_json::Value>) -> NetworkObservation {
    let conditions = udn.and_then(|u| u["status"]["conditions"].as_array());
    let created = conditions.and_then(|c| c.iter().find(|c| c["type"] == "NetworkCreated" || c["type"] == "NetworkReady"));
    match created {
        Some(c) if c["status"] == "True" => NetworkObservation::Ready,
        Some(c) => NetworkObservation::Failed(format!(
            "OVN-Kubernetes could not create the network: {}",
            c["message"].as_str().or(c["reason"].as_str()).unwrap_or("no reason given")
        )),
        None => NetworkObservation::Pending("OVN-Kubernetes has not reported on the subnet's network yet".into()),
    }
}

/// `observed`, looked at again in 15 s until OVN-K has made the network.
pub(crate) fn settled(observed: NetworkObservation) -> (NetworkObservation, Requeue) {
    let next =
        if observed == NetworkObservation::Ready { Requeue::AwaitChange } else { Requeue::after(std::time::Duration::from_secs(15)) };
    (observed, next)
}

#[async_trait]
impl Driver<SubnetSpec, NetworkObservation> for Subnets {
    async fn ensure(&self, t: &SubnetTarget) -> Result<(NetworkObservation, Requeue), BackendError> {
        let s = &self.0;
        if s.cfg.subnets == SubnetMode::Secondary {
            return s.ensure_secondary(t).await;
        }
        if !t.spec.network_class.is_empty() {
            let why = format!(
                "the network's class {:?} is a physical network, and a subnet here is its namespace's primary UDN: physical networks need --subnet-networks secondary",
                t.spec.network_class
            );
            return Ok((NetworkObservation::Failed(why), Requeue::AwaitChange));
        }
        s.listed()?;
        let ns = s.home(&t.tenant, Some(&t.id)).await?;
        let own = labels(ObjectKind::Subnet, &t.id);
        // The primary-UDN label must be there when the namespace is made.
        s.ensure_namespace_as(&ns, &t.tenant, true, &own).await?;
        let mut u = serde_json::to_value(udn(UDN, &ns, &t.spec.ipv4_cidr)).map_err(|e| BackendError::invalid("rendering the UDN", e))?;
        u["metadata"]["labels"] = json!(own);
        if s.udns.get(&ns, UDN).is_none_or(|seen| as_json(&seen)["spec"] != u["spec"]) {
            s.cluster.apply(&s.cluster.res.udn, &u).await?;
        }
        let seen = s.udns.get(&ns, UDN).map(|o| as_json(&o));
        Ok(settled(observe(seen.as_ref())))
    }

    /// Deletes the UDN, then the namespace (done once it is going: its
    /// contents are the cluster's to remove).
    async fn delete(&self, id: &str) -> Result<Cleanup, BackendError> {
        let s = &self.0;
        let res = &s.cluster.res;
        let selector = selector_of(id);
        if s.cfg.subnets == SubnetMode::Secondary {
            // Its attachment definitions are OVN-K's to remove with it.
            let left = s.cluster.delete_all_of(&res.cudn, id).await?;
            return Ok(if left == 0 { Cleanup::Done } else { Cleanup::InProgress });
        }
        s.cluster.delete_all_of(&res.udn, id).await?;
        let namespaces = s.cluster.list(&res.namespace, &selector).await?;
        for n in &namespaces {
            let name = n.metadata.name.clone().unwrap_or_default();
            if let Ok(mut known) = s.namespaces.lock() {
                known.remove(&name);
            }
            s.homes.forget(&name);
            if n.metadata.deletion_timestamp.is_none() {
                s.cluster.delete(&res.namespace, "", &name).await?;
            }
        }
        let left = s.cluster.list(&res.udn, &selector).await?;
        Ok(if left.is_empty() { Cleanup::Done } else { Cleanup::InProgress })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subnet_is_ready_when_ovn_k_made_its_network() {
        assert!(matches!(observe(None), NetworkObservation::Pending(_)));
        let made = json!({"status": {"conditions": [{"type": "NetworkCreated", "status": "True"}]}});
        assert_eq!(observe(Some(&made)), NetworkObservation::Ready);
        let bad = json!({"status": {"conditions": [{"type": "NetworkCreated", "status": "False", "message": "overlaps the join subnet"}]}});
        assert!(matches!(observe(Some(&bad)), NetworkObservation::Failed(m) if m.ends_with("overlaps the join subnet")));
    }
}
