//! Subnets as OVN-K secondary networks ([`crate::SubnetMode::Secondary`]),
//! so that a VM may sit on several. Each subnet is a layer-2
//! `ClusterUserDefinedNetwork` with the Secondary role over its tenant's
//! namespace (`vmaas_model::k8s::render::subnet_cudn`), or, when its
//! network's class is a physical network ([`crate::PhysicalNetwork`]), a
//! localnet CUDN on that bridge mapping and VLAN (`localnet_cudn`): its
//! NICs are bridged onto the physical network. Either is without OVN-K's
//! IPAM: the server's IPAM gives each NIC its address, and cloud-init's
//! network configuration tells the guest (each NIC by its MAC). OVN-K makes
//! a NetworkAttachmentDefinition of the CUDN's name in the namespace, which
//! each NIC names as its Multus network. A VM keeps the pod network too,
//! first: its Services (exposed ports, floating IPs, load balancers) and
//! its way out. Each NIC's security groups are a `MultiNetworkPolicy` for
//! that network (OVN-K enforces those, not NetworkPolicies, on secondary
//! networks).

use std::sync::Arc;

use kube::core::DynamicObject;
use serde_json::{Value, json};
use vmaas_backend::{BackendError, NetworkObservation, Requeue, SubnetTarget, VmTarget};
use vmaas_model::ObjectKind;
use vmaas_model::k8s::names::derived;
use vmaas_model::k8s::policy::multi_network_policy;
use vmaas_model::k8s::render::{Attachment as Nic, Localnet, localnet_cudn, subnet_cudn};

use crate::cluster::as_json;
use crate::names::{ID_LABEL, label_value, labels};
use crate::shared::Shared;

/// Annotation of a subnet's CUDN: the subnet's range (OVN-K keeps none,
/// its IPAM being off), for the prefix of each NIC's address.
pub const CIDR_ANNOTATION: &str = "vmaas.io/cidr";

/// The name of subnet `id`'s CUDN, and of the NetworkAttachmentDefinition
/// OVN-K makes of it in the tenant's namespace.
pub fn network_name(id: &str) -> String {
    format!("subnet-{}", label_value(id))
}

impl Shared {
    /// Subnet `id`'s CUDN, as last seen.
    fn cudn(&self, id: &str) -> Option<Arc<DynamicObject>> {
        self.udns.get_cluster(&network_name(id))
    }

    /// Makes subnet `t`'s CUDN (and its tenant's namespace, where OVN-K
    /// puts the network's attachment definition), and says whether OVN-K
    /// has made the network.
    pub(crate) async fn ensure_secondary(&self, t: &SubnetTarget) -> Result<(NetworkObservation, Requeue), BackendError> {
        self.listed()?;
        let home = self.home(&t.tenant, None).await?;
        self.ensure_namespace(&home, &t.tenant).await?;
        let tenants = [label_value(&t.tenant)];
        let cudn = match t.spec.network_class.as_str() {
            "" => subnet_cudn(&network_name(&t.id), None, &tenants),
            class => {
                let Some(p) = self.cfg.physical_networks.get(class) else {
                    let why = format!("the network's class {class:?} is no physical network of this server (--physical-network)");
                    return Ok((NetworkObservation::Failed(why), Requeue::AwaitChange));
                };
                let net = Localnet { physical_network: &p.bridge_mapping, cidr: None, vlan: p.vlan, tenants: &tenants };
                localnet_cudn(&network_name(&t.id), &net)
            }
        };
        let mut c = serde_json::to_value(cudn).map_err(|e| BackendError::invalid("rendering the subnet's network", e))?;
        c["metadata"]["labels"] = json!(labels(ObjectKind::Subnet, &t.id));
        c["metadata"]["annotations"] = json!({ CIDR_ANNOTATION: t.spec.ipv4_cidr });
        let seen = self.cudn(&t.id).map(|o| as_json(&o));
        let same =
            seen.as_ref().is_some_and(|s| s["spec"] == c["spec"] && s["metadata"]["annotations"][CIDR_ANNOTATION] == t.spec.ipv4_cidr);
        if !same {
            self.cluster.apply(&self.cluster.res.cudn, &c).await?;
        }
        Ok(crate::subnet::settled(crate::subnet::observe(seen.as_ref())))
    }

    /// VM `t`'s NICs on its subnets (in namespace `ns`), each with its MAC
    /// and address; a subnet whose network is not seen yet holds it back.
    pub(crate) fn secondary_nics(&self, t: &VmTarget, ns: &str) -> Result<Vec<Nic>, BackendError> {
        let mut nics = Vec::new();
        for (i, a) in t.spec.attachments.iter().enumerate() {
            let cidr = self.cudn(&a.subnet).and_then(|c| c.metadata.annotations.as_ref()?.get(CIDR_ANNOTATION).cloned());
            let Some(prefix) = cidr.as_deref().and_then(|c| c.split_once('/')).map(|(_, p)| p.to_owned()) else {
                return Err(BackendError::transient(
                    "giving the VM its NICs",
                    format!("subnet {} has no network in the cluster yet", a.subnet),
                ));
            };
            nics.push(Nic {
                name: format!("subnet-{i}"),
                network_name: format!("{ns}/{}", network_name(&a.subnet)),
                mac: Some(a.mac.clone()),
                address: Some(format!("{}/{prefix}", a.ip)),
            });
        }
        Ok(nics)
    }

    /// The MultiNetworkPolicies of VM `t` in `ns`: one for each NIC with
    /// security groups, for the pods of the VM on that NIC's network.
    pub(crate) fn multi_policies(&self, t: &VmTarget, ns: &str) -> Result<Vec<Value>, BackendError> {
        let own = labels(ObjectKind::VirtualMachine, &t.id);
        let pods = json!({ ID_LABEL: label_value(&t.id) });
        let mut out = Vec::new();
        for (i, a) in t.spec.attachments.iter().enumerate() {
            let Some(f) = &a.firewall else { continue };
            let nad = format!("{ns}/{}", network_name(&a.subnet));
            let mut p = multi_network_policy(&derived(&t.name, &format!("subnet-{i}")), ns, &nad, &pods, &f.ingress, &f.egress)
                .map_err(|e| BackendError::invalid(format!("the security groups of the VM's NIC {i}"), e))?;
            p["metadata"]["labels"] = json!(own);
            out.push(p);
        }
        Ok(out)
    }
}
