//! `XVirtualMachine`s (from `VirtualMachine` claims): the template
//! resolved with the XR's parameters and instance type; the KubeVirt VM,
//! its own instance type and preference, and its floating IP
//! rendered into its own namespace (with its own network) or into its named
//! network's; the networks it names checked; its status read back from
//! KubeVirt.

use function_sdk_rust::proto::v1::{RunFunctionRequest, RunFunctionResponse};
use function_sdk_rust::response::ResourceMatch;
use function_sdk_rust::{request, resource, response};
use serde_json::Value;
use vmaas_model::k8s::balancer::{MEMBER, balancer_label};
use vmaas_model::k8s::observe::observe_vm;
use vmaas_model::{Desired, Phase, PowerState, Template, VirtualMachineStatus, VirtualMachineTemplate, derive_status};

use crate::call::{Call, fatal, is_secondary, put, require_private, require_tenants};
use crate::render::{NetworkRef, RenderedVm, physical_nic, render_vm};
use crate::shape::INSTANCE_TYPE_LABEL;
use crate::status::{self, NetworkState};
use crate::usage::{usage, usage_of};
use crate::volume::volumes_of;
use crate::xr::{FunctionInput, Owner, VmXrSpec, XR_API, template_from_object};

/// Asks Crossplane for what observing the VM takes: its VMI, and the
/// networks it names (a private network by its claim, of the same tenant).
fn require(rsp: &mut RunFunctionResponse, owner: &Owner, spec: &VmXrSpec, r: &RenderedVm) {
    let by_name = |n: &str| Some(ResourceMatch::Name(n.to_owned()));
    let ns = Some(r.namespace_name.clone());
    response::require_resources(rsp, "vmi", "kubevirt.io/v1", "VirtualMachineInstance", by_name(&owner.name), ns);
    if let Some(NetworkRef::Named(n)) = spec.network_ref() {
        require_private(rsp, owner, "network", n);
    }
    for (i, n) in spec.subnets.iter().enumerate() {
        require_private(rsp, owner, &subnet_key(i), n);
    }
    if let Some(p) = &spec.physical_network {
        response::require_resources(rsp, "physical-network", XR_API, "PhysicalNetwork", by_name(p), None);
    }
}

/// The required resource of the VM's `i`th secondary network.
fn subnet_key(i: usize) -> String {
    format!("subnet-{i}")
}

/// The catalog: the input's templates, plus the cluster's when asked
/// (`None` until Crossplane has fetched them).
fn templates(req: &RunFunctionRequest, input: &FunctionInput, rsp: &mut RunFunctionResponse) -> Option<Vec<VirtualMachineTemplate>> {
    let mut all = input.templates.clone();
    if input.templates_from_cluster {
        response::require_resources(rsp, "templates", XR_API, "VirtualMachineTemplate", None, None);
        for t in request::get_required_resources(req, "templates")? {
            match template_from_object(&t) {
                Ok(tpl) => all.push(tpl),
                Err(e) => {
                    response::warning(rsp, format!("ignoring VirtualMachineTemplate {}: {e}", t["metadata"]["name"]));
                }
            }
        }
    }
    Some(all)
}

/// The template the XR names, compiled, or the fatal message.
fn template(catalog: Vec<VirtualMachineTemplate>, id: &str) -> Result<Template, String> {
    let wire = catalog.into_iter().find(|t| t.id == id).ok_or_else(|| format!("spec.template: template {id:?} does not exist"))?;
    Template::compile(wire).map_err(|e| format!("spec.template: template {id:?} is invalid: {e}"))
}

/// What the networks a VM names allow.
enum Networks {
    /// Compose the VM; these networks are not ready (yet): it starts once
    /// they are. The private network's XR, when it names one: the VM uses it.
    Compose { waiting: Vec<String>, used: Option<Value> },
    /// The named private network does not exist (yet): the VM has no
    /// namespace to live in, so nothing is composed.
    Wait(String),
}

/// Checks the networks the VM names, once Crossplane has fetched them:
/// `Err` is fatal (a physical network that does not admit the VM's tenant).
fn check_networks(call: &Call<'_>, owner: &Owner, spec: &VmXrSpec) -> Result<Networks, String> {
    let (mut waiting, mut used) = (Vec::new(), None);
    if let Some(NetworkRef::Named(n)) = spec.network_ref() {
        let at = Private { key: "network", field: "spec.network".into(), name: n };
        let Some(net) = at.found(call, owner, false, &mut waiting)? else {
            return Ok(Networks::Wait(waiting.join("; ")));
        };
        used = Some(net);
    }
    check_subnets(call, owner, spec, &mut waiting)?;
    if let Some(p) = &spec.physical_network {
        match request::get_required_resource(call.req, "physical-network") {
            Some(net) => {
                let admitted = net["spec"]["namespaces"].as_array().is_some_and(|a| a.iter().any(|n| n == owner.tenant.as_str()));
                if !admitted {
                    return Err(format!("spec.physicalNetwork: PhysicalNetwork {p:?} does not admit namespace {:?}", owner.tenant));
                }
                let state = NetworkState::of_xr(&net);
                if !state.ready() {
                    waiting.push(format!("spec.physicalNetwork: PhysicalNetwork {p:?} is {}", state.state));
                }
            }
            None => waiting.push(format!("spec.physicalNetwork: no PhysicalNetwork {p:?} (yet)")),
        }
    }
    Ok(Networks::Compose { waiting, used })
}

/// Checks the secondary networks the VM lists: each of role `Secondary`
/// (else `Err`, fatal), and those not there or not ready yet in `waiting`.
fn check_subnets(call: &Call<'_>, owner: &Owner, spec: &VmXrSpec, waiting: &mut Vec<String>) -> Result<(), String> {
    for (i, n) in spec.subnets.iter().enumerate() {
        let key = subnet_key(i);
        Private { key: &key, field: format!("spec.subnets[{i}]"), name: n }.found(call, owner, true, waiting)?;
    }
    Ok(())
}

/// A private network a VM names: the required resource `key`, named
/// `name` in the VM's `field`.
struct Private<'a> {
    key: &'a str,
    field: String,
    name: &'a str,
}

impl Private<'_> {
    /// Its XR, once Crossplane fetched it and it has the role asked
    /// (`Err`, fatal, otherwise); not there or not ready yet: said in `waiting`.
    fn found(&self, call: &Call<'_>, owner: &Owner, secondary: bool, waiting: &mut Vec<String>) -> Result<Option<Value>, String> {
        let (at, n) = (&self.field, self.name);
        let found = request::get_required_resources(call.req, self.key).unwrap_or_default();
        let Some(net) = found.into_iter().next() else {
            waiting.push(format!("{at}: no VirtualPrivateSubnet {n:?} in namespace {:?} (yet)", owner.tenant));
            return Ok(None);
        };
        match (secondary, is_secondary(&net)) {
            (false, true) => return Err(format!("{at}: VirtualPrivateSubnet {n:?} is of role Secondary: list it in spec.subnets")),
            (true, false) => {
                return Err(format!(
                    "{at}: VirtualPrivateSubnet {n:?} is of role Primary (the network of the VMs that live in it): a second NIC is on a network of role Secondary"
                ));
            }
            _ => {}
        }
        let state = NetworkState::of_xr(&net);
        if !state.ready() {
            waiting.push(format!("{at}: VirtualPrivateSubnet {n:?} is {}", state.state));
        }
        Ok(Some(net))
    }
}

/// Labels the VM's pods for each load balancer of its tenant that names it.
fn join_balancers(r: &mut RenderedVm, owner: &Owner, balancers: &[Value]) {
    for lb in balancers {
        let lb_owner = Owner::of(lb);
        let names_it = lb["spec"]["hostRefs"].as_array().is_some_and(|hs| hs.iter().any(|h| h["name"] == owner.name.as_str()));
        if names_it && lb_owner.tenant == owner.tenant {
            r.vm.spec.template.metadata.labels.insert(balancer_label(&lb_owner.name), MEMBER.to_owned());
        }
    }
}

/// Puts the volumes the VM lists on it (hotpluggable), each with the
/// usage that keeps it while the VM uses it; `Err` is fatal.
fn attach_volumes(
    call: &Call<'_>,
    rsp: &mut RunFunctionResponse,
    owner: &Owner,
    spec: &VmXrSpec,
    r: &mut RenderedVm,
    warnings: &mut Vec<String>,
) -> Result<(), String> {
    if spec.volumes.is_empty() {
        return Ok(());
    }
    let Some(NetworkRef::Named(network)) = spec.network_ref() else {
        return Err("spec.volumes: volumes live in a private network's namespace: put the VM on one (spec.network)".into());
    };
    require_tenants(rsp, "volumes", "XVolume", owner);
    let all = request::get_required_resources(call.req, "volumes").unwrap_or_default();
    let (disks, used) = volumes_of(owner, spec, network, &all, warnings)?;
    vmaas_model::k8s::volume::attach(&mut r.vm, &disks);
    for v in &used {
        let key = format!("usage-volume-{}", Owner::of(v).name);
        let u = usage("XVolume", v, "XVirtualMachine", call.xr, &format!("vol-{}", Owner::of(v).name));
        put(rsp, &key, &u, call.observed(&key).is_some()).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Composes an `XVirtualMachine`.
pub(crate) fn run(call: &Call<'_>, mut rsp: RunFunctionResponse) -> Result<RunFunctionResponse, function_sdk_rust::Error> {
    let owner = Owner::of(call.xr);
    let spec = match VmXrSpec::from_xr(&call.xr["spec"]) {
        Ok(s) => s,
        Err(e) => return fatal(rsp, format!("spec: {e}")),
    };
    let Some(catalog) = templates(call.req, call.input, &mut rsp) else {
        response::normal(&mut rsp, "waiting for Crossplane to fetch the VirtualMachineTemplates");
        return Ok(rsp);
    };
    let template = match template(catalog, &spec.template) {
        Ok(t) => t,
        Err(e) => return fatal(rsp, e),
    };
    let kept = call.observed("instancetype").and_then(|t| t["metadata"]["labels"][INSTANCE_TYPE_LABEL].as_str().map(str::to_owned));
    let mut r = match render_vm(&owner, &spec, &template, call.input, kept.as_deref()) {
        Ok(r) => r,
        Err(errs) => return fatal(rsp, format!("invalid VirtualMachine: {errs}")),
    };
    require(&mut rsp, &owner, &spec, &r);
    require_tenants(&mut rsp, "balancers", "XLoadBalancer", &owner);
    let balancers = request::get_required_resources(call.req, "balancers").unwrap_or_default();
    join_balancers(&mut r, &owner, &balancers);
    let mut volume_warnings = Vec::new();
    match attach_volumes(call, &mut rsp, &owner, &spec, &mut r, &mut volume_warnings) {
        Ok(()) => {}
        Err(e) => return fatal(rsp, e),
    }
    let waiting = match check_networks(call, &owner, &spec) {
        Ok(Networks::Compose { waiting, used }) => {
            if let Some(net) = used {
                put(&mut rsp, "usage", &usage_of(&net, call.xr), call.observed("usage").is_some())?;
            }
            waiting
        }
        Ok(Networks::Wait(why)) => {
            response::warning(&mut rsp, format!("{why}: the VM is created once it exists"));
            return Ok(rsp);
        }
        Err(e) => return fatal(rsp, e),
    };
    if let Some(ns) = &r.namespace {
        put(&mut rsp, "namespace", ns, call.observed("namespace").is_some())?;
    }
    if let Some(u) = &r.udn {
        put(&mut rsp, "udn", u, NetworkState::of(call.observed("udn").as_ref()).ready())?;
    }
    for shape in &r.shapes {
        let key = if shape["kind"] == "VirtualMachinePreference" { "preference" } else { "instancetype" };
        put(&mut rsp, key, shape, call.observed(key).is_some())?;
    }
    let started = spec.state == PowerState::Started;
    let vmi = request::get_required_resource(call.req, "vmi");
    // The internal address is the one on the VM's first network: its private
    // one (the primary UDN, NIC `default`), else its physical one.
    let nic = match (&spec.network, &spec.physical_network) {
        (None, Some(p)) => physical_nic(p),
        _ => "default",
    };
    let obs = observe_vm(call.observed("vm").as_ref(), vmi.as_ref(), call.observed("service").as_ref(), started, nic);
    let vm_ready = matches!(obs.phase, Phase::Ready) || (!started && matches!(obs.phase, Phase::Stopped));
    put(&mut rsp, "vm", &r.vm, vm_ready && waiting.is_empty())?;
    if let Some(svc) = &r.service {
        put(&mut rsp, "service", svc, obs.external_ip.is_some())?;
    }
    let status = derive_status(Desired::Power(spec.state), &obs, &VirtualMachineStatus::default(), chrono::Utc::now());
    let mut xr_status = status::vm_status(&status);
    xr_status["namespace"] = r.namespace_name.clone().into();
    resource::update_status(response::desired_composite(&mut rsp), &xr_status)?;
    status::vm_condition(&mut rsp, &status);
    for w in waiting {
        response::warning(&mut rsp, format!("{w}: the VM starts once it is ready"));
    }
    if let Some(note) = r.instance_type.as_deref().and_then(|t| crate::shape::deprecation_note(t, call.input)) {
        response::warning(&mut rsp, note);
    }
    for w in volume_warnings {
        response::warning(&mut rsp, format!("{w}: it is attached once it is"));
    }
    response::normal(&mut rsp, format!("rendered the virtual machine of {}: {}", owner.describe(), status.state.short()));
    Ok(rsp)
}
