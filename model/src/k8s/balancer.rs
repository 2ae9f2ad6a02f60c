//! A load balancer on Kubernetes: a Service of type `LoadBalancer` whose
//! selector is the balancer's own label, which every VM behind it carries
//! on its launcher pod (the VM template's labels, copied by KubeVirt when
//! it makes the pod). The VMs' side of it is [`balancer_label`]; the
//! Service is [`balancer_service`]; [`member`] reads which VMIs serve.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta as K8sMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;

use super::names::derived;
use super::render::FloatingIp;
use crate::load_balancer::{LbProtocol, PortMapping};

/// Prefix of the label that puts a VM behind a load balancer.
pub const BALANCER_LABEL_PREFIX: &str = "lb.vmaas.io/";
/// The value of that label.
pub const MEMBER: &str = "true";

/// The label a VM's launcher pod carries to be behind the load balancer
/// `name` (a DNS label: the key's name part takes at most 63 characters).
pub fn balancer_label(name: &str) -> String {
    format!("{BALANCER_LABEL_PREFIX}{name}")
}

/// Where a balancer's Service goes, and how it asks for its address.
#[derive(Debug, Clone)]
pub struct BalancerOptions<'a> {
    /// The load balancer's name (the Service is named after it).
    pub name: &'a str,
    /// The namespace of its VMs.
    pub namespace: &'a str,
    /// How the cluster gives it an address.
    pub floating_ip: &'a FloatingIp,
}

/// The Service of the load balancer: one port per mapping, its selector
/// the balancer's label, so that exactly the VMs labelled for it serve.
pub fn balancer_service(mappings: &[PortMapping], o: &BalancerOptions<'_>) -> Service {
    let label = balancer_label(o.name);
    let ports = mappings
        .iter()
        .map(|m| {
            let proto = if m.protocol == LbProtocol::Udp { "UDP" } else { "TCP" };
            ServicePort {
                name: Some(format!("{}-{}", proto.to_lowercase(), m.external_port)),
                port: m.external_port,
                target_port: Some(IntOrString::Int(m.internal_port)),
                protocol: Some(proto.into()),
                ..Default::default()
            }
        })
        .collect();
    Service {
        metadata: K8sMeta {
            name: Some(derived(o.name, "lb")),
            namespace: Some(o.namespace.into()),
            annotations: Some(o.floating_ip.annotations()),
            labels: Some(BTreeMap::from([(label.clone(), MEMBER.to_owned())])),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            selector: Some(BTreeMap::from([(label, MEMBER.to_owned())])),
            ports: Some(ports),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// How a VMI stands towards the load balancer `name`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Membership {
    /// Its pod carries the label and the VMI is ready: it gets connections.
    Serving,
    /// Labelled, not ready (yet).
    NotReady,
    /// Running without the label: it was started before the VM joined,
    /// and joins at its next start (KubeVirt labels a pod when it makes it).
    Unlabelled,
}

/// Where the VMI `vmi` stands towards the load balancer `name`.
pub fn member(vmi: &Value, name: &str) -> Membership {
    if vmi["metadata"]["labels"][balancer_label(name)] != MEMBER {
        return Membership::Unlabelled;
    }
    let ready = vmi["status"]["conditions"].as_array().is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"));
    if ready { Membership::Serving } else { Membership::NotReady }
}

/// The address a target serves on: its VMI's first address, once the VMI
/// is ready (KubeVirt's `Ready` condition, which the readiness probe drives).
pub fn ready_address(vmi: &Value) -> Option<String> {
    let ready = vmi["status"]["conditions"].as_array().is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"));
    if ready { super::observe::vmi_address(vmi, "default") } else { None }
}

/// The balancer Service without a selector, and the EndpointSlice that
/// gives it its endpoints: `targets` as `(VMI name, address)`, each on the
/// mappings' internal ports. The server decides who serves (the ready
/// targets), so a VM joins or leaves at once, without its pod's labels.
pub fn selectorless(service: &Service, mappings: &[PortMapping], targets: &[(String, String)]) -> (Value, Value) {
    let mut svc = serde_json::to_value(service).unwrap_or_default();
    if let Some(spec) = svc["spec"].as_object_mut() {
        spec.remove("selector");
    }
    svc["apiVersion"] = serde_json::json!("v1");
    svc["kind"] = serde_json::json!("Service");
    let name = svc["metadata"]["name"].clone();
    let ns = svc["metadata"]["namespace"].clone();
    let ports: Vec<Value> = mappings
        .iter()
        .map(|m| {
            let proto = if m.protocol == LbProtocol::Udp { "UDP" } else { "TCP" };
            serde_json::json!({"name": format!("{}-{}", proto.to_lowercase(), m.external_port), "protocol": proto, "port": m.internal_port})
        })
        .collect();
    let endpoints: Vec<Value> = targets
        .iter()
        .map(|(vmi, address)| {
            serde_json::json!({"addresses": [address], "conditions": {"ready": true},
                "targetRef": {"kind": "VirtualMachineInstance", "name": vmi, "namespace": ns}})
        })
        .collect();
    let slice = serde_json::json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": name, "namespace": ns,
            "labels": {"kubernetes.io/service-name": name, "endpointslice.kubernetes.io/managed-by": "vmaas.io"}},
        "addressType": "IPv4", "ports": ports, "endpoints": endpoints,
    });
    (svc, slice)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_service_selects_the_balancers_label_and_maps_ports() {
        let fip = FloatingIp { provider: "metallb".into(), address_pool: Some("public".into()) };
        let maps = [
            PortMapping { protocol: LbProtocol::Tcp, external_port: 80, internal_port: 8080 },
            PortMapping { protocol: LbProtocol::Udp, external_port: 53, internal_port: 5353 },
        ];
        let svc = balancer_service(&maps, &BalancerOptions { name: "front", namespace: "ns", floating_ip: &fip });
        let v = serde_json::to_value(&svc).unwrap();
        assert_eq!(v["metadata"]["name"], "front-lb");
        assert_eq!(v["spec"]["selector"], json!({"lb.vmaas.io/front": "true"}));
        assert_eq!(v["spec"]["ports"][0], json!({"name": "tcp-80", "port": 80, "targetPort": 8080, "protocol": "TCP"}));
        assert_eq!(v["spec"]["ports"][1]["protocol"], "UDP");
        assert_eq!(v["metadata"]["annotations"]["metallb.io/address-pool"], "public");
    }

    #[test]
    fn a_selectorless_service_gets_the_ready_targets_as_endpoints() {
        let maps = [PortMapping { protocol: LbProtocol::Tcp, external_port: 80, internal_port: 8080 }];
        let svc = balancer_service(&maps, &BalancerOptions { name: "front", namespace: "ns", floating_ip: &FloatingIp::default() });
        let (svc, slice) = selectorless(&svc, &maps, &[("web-0".into(), "10.60.1.10".into())]);
        assert!(svc["spec"].get("selector").is_none() && svc["spec"]["type"] == "LoadBalancer", "{svc}");
        assert_eq!(slice["metadata"]["labels"]["kubernetes.io/service-name"], "front-lb");
        assert_eq!(
            slice["ports"],
            json!([{"name": "tcp-80", "protocol": "TCP", "port": 8080}]),
            "the Service's port name, the target port"
        );
        assert_eq!(slice["endpoints"][0]["addresses"], json!(["10.60.1.10"]));
        let vmi = |ready: &str| json!({"status": {"conditions": [{"type": "Ready", "status": ready}], "interfaces": [{"name": "default", "ipAddress": "10.60.1.10"}]}});
        assert_eq!(ready_address(&vmi("True")).as_deref(), Some("10.60.1.10"));
        assert_eq!(ready_address(&vmi("False")), None);
    }

    #[test]
    fn membership_needs_the_label_then_readiness() {
        let ready = json!([{"type": "Ready", "status": "True"}]);
        let vmi = |labels: Value, conditions: Value| json!({"metadata": {"labels": labels}, "status": {"conditions": conditions}});
        assert_eq!(member(&vmi(json!({"lb.vmaas.io/front": "true"}), ready.clone()), "front"), Membership::Serving);
        assert_eq!(member(&vmi(json!({"lb.vmaas.io/front": "true"}), json!([])), "front"), Membership::NotReady);
        assert_eq!(member(&vmi(json!({"lb.vmaas.io/other": "true"}), ready), "front"), Membership::Unlabelled);
    }
}
