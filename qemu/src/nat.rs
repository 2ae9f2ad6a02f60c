//! NAT gateways on this host: a virtual network's router sends what its
//! guests address outside the network to a NAT in the switch
//! ([`vmaas_switch::nat`]), whose flows leave from the gateway's external
//! address ([`crate::egress`]). A gateway whose address cannot be bound
//! where egress leaves is FAILED, saying so. Nothing is kept on disk: the
//! reconciler's first pass after a restart starts each NAT again.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use tracing::info;
use vmaas_backend::{BackendError, Cleanup, Driver, NatObservation, NatSpec, NatTarget, Requeue};
use vmaas_model::network::Cidr;

use crate::egress::{Egress, EgressPolicy};
use crate::subnet::Subnets;

/// The NAT gateway driver.
pub struct NatGateways {
    subnets: Arc<Subnets>,
    policy: Arc<EgressPolicy>,
    /// What runs: gateway id → its spec.
    running: Mutex<HashMap<String, NatSpec>>,
}

impl NatGateways {
    /// NATs on the routers of `subnets`, reaching what `policy` allows.
    pub fn new(subnets: Arc<Subnets>, policy: Arc<EgressPolicy>) -> Self {
        Self { subnets, policy, running: Mutex::new(HashMap::new()) }
    }

    fn running(&self) -> MutexGuard<'_, HashMap<String, NatSpec>> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// An IPv4 network `ADDR/LEN` (as the model checks a network's range) as
/// an address and a prefix.
fn range(cidr: &str) -> Option<(Ipv4Addr, u8)> {
    match Cidr::parse(cidr, 4).ok()?.net() {
        ipnet::IpNet::V4(n) => Some((n.network(), n.prefix_len())),
        ipnet::IpNet::V6(_) => None,
    }
}

#[async_trait]
impl Driver<NatSpec, NatObservation> for NatGateways {
    async fn ensure(&self, t: &NatTarget) -> Result<(NatObservation, Requeue), BackendError> {
        if self.running().get(&t.id) == Some(&t.spec) {
            return Ok((NatObservation::Ready, Requeue::AwaitChange));
        }
        let Some(inside) = range(&t.spec.network_cidr) else {
            let why = format!("the network's range {:?} is not IPv4", t.spec.network_cidr);
            return Ok((NatObservation::Failed(why), Requeue::AwaitChange));
        };
        if let Err(e) = self.policy.bindable(t.spec.address).await {
            let why = format!("its external address {} cannot be used for egress on this host: {e}", t.spec.address);
            return Ok((NatObservation::Failed(why), Requeue::AwaitChange));
        }
        let dialer = Arc::new(Egress { from: t.spec.address, policy: self.policy.clone() });
        self.subnets.router(&t.spec.virtual_network).start_egress(inside, dialer);
        self.running().insert(t.id.clone(), t.spec.clone());
        info!(nat_gateway = %t.id, network = %t.spec.virtual_network, address = %t.spec.address, "NAT gateway running");
        Ok((NatObservation::Ready, Requeue::AwaitChange))
    }

    async fn delete(&self, id: &str) -> Result<Cleanup, BackendError> {
        if let Some(spec) = self.running().remove(id) {
            self.subnets.router(&spec.virtual_network).stop_egress();
            info!(nat_gateway = %id, network = %spec.virtual_network, "NAT gateway stopped");
        }
        Ok(Cleanup::Done)
    }

    async fn retain(&self, known: &[String]) -> Result<(), BackendError> {
        let gone: Vec<NatSpec> = {
            let mut running = self.running();
            let gone = running.iter().filter(|(id, _)| !known.contains(id)).map(|(_, s)| s.clone()).collect();
            running.retain(|id, _| known.contains(id));
            gone
        };
        for spec in gone {
            self.subnets.router(&spec.virtual_network).stop_egress();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use vmaas_backend::Target;

    use super::*;

    #[tokio::test]
    async fn a_gateway_routes_its_network_outside_until_deleted() {
        let d = tempfile::tempdir().unwrap();
        let subnets = Arc::new(Subnets::new(d.path().join("subnets"), &[]));
        let nats = NatGateways::new(subnets.clone(), Arc::new(EgressPolicy::new(&["public".into()], None).unwrap()));
        let spec = NatSpec { virtual_network: "n1".into(), network_cidr: "10.30.0.0/16".into(), address: Ipv4Addr::LOCALHOST };
        let t = Target { id: "g1".into(), tenant: "acme".into(), name: "out".into(), version: 1, spec };
        assert_eq!(nats.ensure(&t).await.unwrap().0, NatObservation::Ready);
        assert!(subnets.router("n1").has_egress() && !subnets.router("n2").has_egress());
        assert_eq!(nats.delete("g1").await.unwrap(), Cleanup::Done);
        assert!(!subnets.router("n1").has_egress());

        // An address the host does not have: FAILED, naming it.
        let far = Target { spec: NatSpec { address: Ipv4Addr::new(192, 0, 2, 77), ..t.spec.clone() }, ..t };
        match nats.ensure(&far).await.unwrap().0 {
            NatObservation::Failed(why) => assert!(why.contains("192.0.2.77"), "{why}"),
            o => panic!("{o:?}"),
        }
        assert!(!subnets.router("n1").has_egress());
    }
}
