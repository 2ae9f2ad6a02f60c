//! Load balancers on a cluster: a Service of type LoadBalancer in the
//! subnet's namespace (MetalLB asked for the address the server allocated),
//! without a selector: its EndpointSlice lists the targets whose VMI is
//! ready, so a VM joins or leaves as it becomes ready or stops, with no
//! change to its pod.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use vmaas_backend::{
    BackendError, BalancerDriver, BalancerObservation, BalancerProblem, BalancerSpec, BalancerTarget, Cleanup, Driver, Requeue,
};
use vmaas_model::ObjectKind;
use vmaas_model::k8s::balancer::{BalancerOptions, balancer_service, ready_address, selectorless};
use vmaas_model::k8s::observe::service_address;
use vmaas_model::load_balancer::PortMapping;

use crate::cluster::as_json;
use crate::names::{METALLB_IPS, labels};
use crate::shared::Shared;

/// How often target readiness is looked at (VMIs wake their VMs, not
/// the load balancers in front of them).
const PROBE: Duration = Duration::from_secs(2);

/// The driver of load balancers.
pub struct Balancers(pub(crate) Arc<Shared>);

impl Balancers {
    /// The targets that serve now: `(VMI name, address)` and their ids, in spec order.
    fn serving(&self, spec: &BalancerSpec) -> (Vec<(String, String)>, Vec<String>) {
        let mut endpoints = Vec::new();
        let mut healthy = Vec::new();
        for id in &spec.targets {
            let vmi = self.0.vmis.of(id).into_iter().next();
            if let Some((name, address)) = vmi.and_then(|v| Some((v.metadata.name.clone()?, ready_address(&as_json(&v))?))) {
                endpoints.push((name, address));
                healthy.push(id.clone());
            }
        }
        (endpoints, healthy)
    }
}

#[async_trait]
impl Driver<BalancerSpec, BalancerObservation> for Balancers {
    async fn ensure(&self, t: &BalancerTarget) -> Result<(BalancerObservation, Requeue), BackendError> {
        let s = &self.0;
        s.listed()?;
        let ns = s.home(&t.tenant, Some(&t.spec.subnet)).await?;
        let mappings: Vec<PortMapping> = t
            .spec
            .mappings
            .iter()
            .map(|m| PortMapping {
                protocol: m.protocol,
                external_port: i32::from(m.external_port),
                internal_port: i32::from(m.internal_port),
            })
            .collect();
        let service = balancer_service(&mappings, &BalancerOptions { name: &t.name, namespace: &ns, floating_ip: &s.cfg.floating_ip });
        let (endpoints, healthy) = self.serving(&t.spec);
        let (mut svc, mut slice) = selectorless(&service, &mappings, &endpoints);
        let own = labels(ObjectKind::LoadBalancer, &t.id);
        for (k, v) in &own {
            svc["metadata"]["labels"][k] = json!(v);
            slice["metadata"]["labels"][k] = json!(v);
        }
        svc["metadata"]["annotations"][METALLB_IPS] = json!(t.spec.address.to_string());
        let key = format!("lb/{}", t.id);
        let digest = format!("{svc}{slice}");
        let unchanged = s.applied_text.lock().map(|a| a.get(&key) == Some(&digest)).unwrap_or(false);
        let name = svc["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        if !unchanged || s.services.get(&ns, &name).is_none() {
            s.cluster.apply(&s.cluster.res.service, &svc).await?;
            s.cluster.apply(&s.cluster.res.endpoint_slice, &slice).await?;
            if let Ok(mut a) = s.applied_text.lock() {
                a.insert(key, digest);
            }
        }
        let address = s.services.get(&ns, &name).and_then(|o| service_address(&as_json(&o)));
        let problem = match address {
            Some(_) => None,
            None => {
                let why = "the cluster's load balancer (MetalLB) has not given the Service its address yet";
                Some(BalancerProblem::Pending(crate::allocation::explained(&s.cluster, &ns, &name, why).await))
            }
        };
        Ok((BalancerObservation { problem, healthy }, Requeue::after(PROBE)))
    }

    async fn delete(&self, id: &str) -> Result<Cleanup, BackendError> {
        let s = &self.0;
        let res = &s.cluster.res;
        let mut left = 0;
        for ar in [&res.service, &res.endpoint_slice] {
            left += s.cluster.delete_all_of(ar, id).await?;
        }
        if let Ok(mut a) = s.applied_text.lock() {
            a.remove(&format!("lb/{id}"));
        }
        Ok(if left == 0 { Cleanup::Done } else { Cleanup::InProgress })
    }
}

/// The driver, as the backend hands it out.
pub fn driver(shared: Arc<Shared>) -> Arc<BalancerDriver> {
    Arc::new(Balancers(shared))
}
