//! `XLoadBalancer`s (from seed 001's `LoadBalancer` claims): one address in
//! front of some of the tenant's VMs. The VMs it names must be on the same
//! network (so in one namespace); it composes a Service of type
//! `LoadBalancer` there whose selector is its own label, which the VM XRs
//! it names put on their launcher pods ([`crate::vm`]). Its status reads
//! back the address and which VMs serve.

use std::collections::BTreeSet;

use function_sdk_rust::proto::v1::RunFunctionResponse;
use function_sdk_rust::{request, resource, response};
use serde_json::{Value, json};
use vmaas_model::ValidationErrors;
use vmaas_model::k8s::balancer::{BalancerOptions, Membership, balancer_service, member};
use vmaas_model::k8s::observe::service_address;
use vmaas_model::load_balancer::check_mapping_ports;

use crate::call::{Call, fatal, is_named, put, require_tenants};
use crate::render::{NetworkRef, vm_home};
use crate::xr::{LoadBalancerXrSpec, Owner, VmXrSpec};

/// The condition the XR reports.
pub const BALANCER_CONDITION: &str = "LoadBalancerReady";

/// The namespace a VM XR lives in, and its network in words.
fn namespace_of(vm: &Value) -> Result<(String, String), String> {
    let spec = VmXrSpec::from_xr(&vm["spec"]).map_err(|e| format!("its spec is invalid: {e}"))?;
    let network = match spec.network_ref() {
        Some(NetworkRef::Named(n)) => format!("network {n:?}"),
        _ => "a network of its own".to_owned(),
    };
    Ok((vm_home(&Owner::of(vm), &spec), network))
}

/// Checks the spec beyond what the claim's CRD does: each VM and each
/// external port at most once.
fn check(spec: &LoadBalancerXrSpec) -> Result<(), String> {
    let mut hosts = BTreeSet::new();
    for (i, h) in spec.host_refs.iter().enumerate() {
        if !hosts.insert(h.name.as_str()) {
            return Err(format!("spec.hostRefs[{i}].name: {:?} is named twice", h.name));
        }
        if h.kind.as_deref().is_some_and(|k| k != "VirtualMachine" && k != "VirtualMachineHost") {
            return Err(format!("spec.hostRefs[{i}].kind: {:?} is not VirtualMachine", h.kind));
        }
    }
    let mut errs = ValidationErrors::default();
    check_mapping_ports(&spec.mappings(), "spec.portMapping", ("externalPort", "internalPort"), &mut errs);
    if !errs.0.is_empty() {
        return Err(errs.to_string());
    }
    if spec.host_refs.is_empty() || spec.port_mapping.is_empty() {
        return Err("spec: name at least one host and one port mapping".into());
    }
    Ok(())
}

/// The one namespace of the hosts that exist, or the fatal message naming
/// the host on another network. `None`: no host exists (yet).
fn common_namespace(spec: &LoadBalancerXrSpec, owner: &Owner, vms: &[Value]) -> Result<Option<String>, String> {
    let mut first: Option<(String, String, &str)> = None;
    for (i, h) in spec.host_refs.iter().enumerate() {
        let Some(vm) = vms.iter().find(|v| is_named(v, owner, &h.name)) else { continue };
        let (ns, net) = namespace_of(vm).map_err(|e| format!("spec.hostRefs[{i}]: VirtualMachine {:?}: {e}", h.name))?;
        match &first {
            None => first = Some((ns, net, &h.name)),
            Some((ns0, net0, name0)) if *ns0 != ns => {
                return Err(format!(
                    "spec.hostRefs[{i}]: VirtualMachine {:?} is on {net}, not on {net0} like {name0:?}: all hosts must be on the same network",
                    h.name
                ));
            }
            Some(_) => {}
        }
    }
    Ok(first.map(|(ns, _, _)| ns))
}

/// The hosts that serve, and why the others do not.
fn membership(spec: &LoadBalancerXrSpec, owner: &Owner, vms: &[Value], vmis: &[Value]) -> (Vec<String>, Vec<String>) {
    let (mut serving, mut not) = (Vec::new(), Vec::new());
    for h in &spec.host_refs {
        if !vms.iter().any(|v| is_named(v, owner, &h.name)) {
            not.push(format!("{}: no such VirtualMachine (yet)", h.name));
            continue;
        }
        match vmis.iter().find(|v| v["metadata"]["name"] == h.name.as_str()).map(|v| member(v, &owner.name)) {
            Some(Membership::Serving) => serving.push(h.name.clone()),
            Some(Membership::NotReady) => not.push(format!("{}: not ready", h.name)),
            Some(Membership::Unlabelled) => not.push(format!("{}: joins at its next start (it was running before it was named)", h.name)),
            None => not.push(format!("{}: not running", h.name)),
        }
    }
    (serving, not)
}

/// Reports a load balancer none of whose hosts exists yet: `PENDING`, with
/// a message naming them, on the XR's status and its condition (and so on
/// the claim), and a warning; nothing is composed until one exists.
fn waiting_for_hosts(mut rsp: RunFunctionResponse, spec: &LoadBalancerXrSpec) -> Result<RunFunctionResponse, function_sdk_rust::Error> {
    let names: Vec<&str> = spec.host_refs.iter().map(|h| h.name.as_str()).collect();
    let why = format!("spec.hostRefs: no VirtualMachine named {} exists (yet): the load balancer is made once one does", names.join(", "));
    let status = json!({"state": "PENDING", "healthyTargets": [], "message": why});
    resource::update_status(response::desired_composite(&mut rsp), &status)?;
    response::condition_false(&mut rsp, BALANCER_CONDITION, "WaitingForHosts").message = Some(why.clone());
    response::warning(&mut rsp, why);
    Ok(rsp)
}

/// Composes an `XLoadBalancer`.
pub(crate) fn run(call: &Call<'_>, mut rsp: RunFunctionResponse) -> Result<RunFunctionResponse, function_sdk_rust::Error> {
    let owner = Owner::of(call.xr);
    let spec = match LoadBalancerXrSpec::from_xr(&call.xr["spec"]) {
        Ok(s) => s,
        Err(e) => return fatal(rsp, format!("spec: {e}")),
    };
    if let Err(e) = check(&spec) {
        return fatal(rsp, e);
    }
    require_tenants(&mut rsp, "hosts", "XVirtualMachine", &owner);
    let Some(vms) = request::get_required_resources(call.req, "hosts") else {
        response::normal(&mut rsp, "waiting for Crossplane to fetch the VirtualMachines");
        return Ok(rsp);
    };
    let ns = match common_namespace(&spec, &owner, &vms) {
        Ok(Some(ns)) => ns,
        Ok(None) => return waiting_for_hosts(rsp, &spec),
        Err(e) => return fatal(rsp, e),
    };
    response::require_resources(&mut rsp, "vmis", "kubevirt.io/v1", "VirtualMachineInstance", None, Some(ns.clone()));
    let vmis = request::get_required_resources(call.req, "vmis").unwrap_or_default();
    let svc =
        balancer_service(&spec.mappings(), &BalancerOptions { name: &owner.name, namespace: &ns, floating_ip: &call.input.floating_ip });
    let address = call.observed("service").as_ref().and_then(service_address);
    put(&mut rsp, "service", &svc, address.is_some())?;
    let (serving, not) = membership(&spec, &owner, &vms, &vmis);
    let ready = address.is_some() && !serving.is_empty();
    let mut why = not.clone();
    if address.is_none() {
        why.insert(0, "the cluster has not given the Service an address yet".into());
    }
    let mut status = json!({"namespace": ns, "state": if ready { "READY" } else { "PENDING" }, "healthyTargets": serving});
    if let Some(a) = &address {
        status["address"] = json!(a);
    }
    if !why.is_empty() {
        status["message"] = json!(why.join("; "));
    }
    resource::update_status(response::desired_composite(&mut rsp), &status)?;
    let c = if ready {
        response::condition_true(&mut rsp, BALANCER_CONDITION, "Available")
    } else {
        response::condition_false(&mut rsp, BALANCER_CONDITION, "Waiting")
    };
    if !why.is_empty() {
        c.message = Some(why.join("; "));
    }
    let state = if ready { "READY" } else { "PENDING" };
    response::normal(&mut rsp, format!("rendered the load balancer of {}: {state}, {} host(s) serving", owner.describe(), serving.len()));
    Ok(rsp)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::xr::{CLAIM_NAME_LABEL, CLAIM_NAMESPACE_LABEL};

    /// An XR named `name`, made for the claim `claim` (tenant, name) if any.
    fn xr(name: &str, claim: Option<(&str, &str)>) -> Value {
        let labels = claim.map_or(json!({}), |(t, n)| json!({CLAIM_NAMESPACE_LABEL: t, CLAIM_NAME_LABEL: n}));
        json!({"metadata": {"name": name, "labels": labels}})
    }

    #[test]
    fn hosts_are_found_in_the_balancers_tenant_only() {
        let team = Owner { tenant: "team-a".into(), name: "lb".into() };
        let platform = Owner { tenant: String::new(), name: "lb".into() };
        let (team_web, platform_web) = (xr("web-x1", Some(("team-a", "web"))), xr("web", None));
        assert!(is_named(&team_web, &team, "web"));
        assert!(!is_named(&platform_web, &team, "web"), "a team never reaches the platform's VMs");
        assert!(is_named(&platform_web, &platform, "web"));
        assert!(!is_named(&team_web, &platform, "web"), "nor the platform's load balancers a team's");
    }

    #[test]
    fn a_host_or_a_port_twice_is_refused_naming_it() {
        let spec = |hosts: Value, ports: Value| LoadBalancerXrSpec::from_xr(&json!({"hostRefs": hosts, "portMapping": ports})).unwrap();
        let one_port = json!([{"externalPort": 80, "internalPort": 8080}]);
        let twice = spec(json!([{"name": "a"}, {"name": "a"}]), one_port.clone());
        assert_eq!(check(&twice).unwrap_err(), "spec.hostRefs[1].name: \"a\" is named twice");
        let ports = json!([{"externalPort": 80, "internalPort": 1}, {"protocol": "TCP", "externalPort": 80, "internalPort": 2}]);
        assert!(check(&spec(json!([{"name": "a"}]), ports)).unwrap_err().starts_with("spec.portMapping[1].externalPort"));
        let udp = json!([{"externalPort": 53, "internalPort": 53}, {"protocol": "UDP", "externalPort": 53, "internalPort": 53}]);
        assert!(check(&spec(json!([{"name": "a"}]), udp)).is_ok(), "TCP and UDP on one port are two mappings");
        assert!(check(&spec(json!([{"name": "a", "kind": "Pod"}]), one_port)).unwrap_err().starts_with("spec.hostRefs[0].kind"));
    }
}
