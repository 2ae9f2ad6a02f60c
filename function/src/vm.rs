//! `VirtualMachine` XRs: the template resolved with the XR's parameters,
//! the KubeVirt VM, its floating IP and its own network rendered into the
//! XR's namespace, the networks it names checked, and its status read back
//! from KubeVirt.

use function_sdk_rust::proto::v1::{RunFunctionRequest, RunFunctionResponse};
use function_sdk_rust::response::ResourceMatch;
use function_sdk_rust::{request, resource, response};
use vmaas_model::k8s::observe::observe_vm;
use vmaas_model::{Desired, Phase, PowerState, Template, VirtualMachineStatus, VirtualMachineTemplate, derive_status};

use crate::function::{Call, fatal, put};
use crate::render::{NetworkRef, render_vm};
use crate::status::{self, NetworkState};
use crate::xr::{FunctionInput, VmXrSpec, template_from_object};

/// API version of the XRs this package defines.
const XR_API: &str = "vmaas.io/v1alpha1";

/// Asks Crossplane for what rendering and observing the VM takes: the
/// cluster's templates, the VMI, and the networks the VM names.
fn require(rsp: &mut RunFunctionResponse, call: &Call<'_>, spec: &VmXrSpec) {
    if call.input.templates_from_cluster {
        response::require_resources(rsp, "templates", XR_API, "VirtualMachineTemplate", None, None);
    }
    let by_name = |n: &str| Some(ResourceMatch::Name(n.to_owned()));
    let ns = Some(call.namespace.to_owned());
    response::require_resources(rsp, "vmi", "kubevirt.io/v1", "VirtualMachineInstance", by_name(call.name), ns.clone());
    if let Some(NetworkRef::Named(n)) = spec.network_ref() {
        response::require_resources(rsp, "network", XR_API, "VirtualPrivateNetwork", by_name(n), ns);
    }
    if let Some(p) = &spec.physical_network {
        response::require_resources(rsp, "physical-network", XR_API, "PhysicalNetwork", by_name(p), None);
    }
}

/// The catalog: the input's templates, plus the cluster's when asked
/// (`None` until Crossplane has fetched them).
fn templates(req: &RunFunctionRequest, input: &FunctionInput, rsp: &mut RunFunctionResponse) -> Option<Vec<VirtualMachineTemplate>> {
    let mut all = input.templates.clone();
    if input.templates_from_cluster {
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

/// Checks the networks the VM names, once Crossplane has fetched them:
/// `Err` is fatal (a physical network that does not admit the VM's
/// namespace); the warnings name networks not there or not ready (yet):
/// the VM is composed and starts once they are.
fn check_networks(call: &Call<'_>, spec: &VmXrSpec) -> Result<Vec<String>, String> {
    let mut waiting = Vec::new();
    if let Some(NetworkRef::Named(n)) = spec.network_ref() {
        match request::get_required_resource(call.req, "network") {
            Some(net) => {
                let state = NetworkState::of_xr(&net);
                if !state.ready() {
                    waiting.push(format!("spec.network: VirtualPrivateNetwork {n:?} is {}", state.state));
                }
            }
            None => waiting.push(format!("spec.network: no VirtualPrivateNetwork {n:?} in namespace {:?} (yet)", call.namespace)),
        }
    }
    if let Some(p) = &spec.physical_network {
        match request::get_required_resource(call.req, "physical-network") {
            Some(net) => {
                let admitted = net["spec"]["namespaces"].as_array().is_some_and(|a| a.iter().any(|n| n == call.namespace));
                if !admitted {
                    return Err(format!("spec.physicalNetwork: PhysicalNetwork {p:?} does not admit namespace {:?}", call.namespace));
                }
                let state = NetworkState::of_xr(&net);
                if !state.ready() {
                    waiting.push(format!("spec.physicalNetwork: PhysicalNetwork {p:?} is {}", state.state));
                }
            }
            None => waiting.push(format!("spec.physicalNetwork: no PhysicalNetwork {p:?} (yet)")),
        }
    }
    Ok(waiting)
}

/// Composes a `VirtualMachine` XR.
pub(crate) fn run(call: &Call<'_>, mut rsp: RunFunctionResponse) -> Result<RunFunctionResponse, function_sdk_rust::Error> {
    if call.namespace.is_empty() {
        return fatal(rsp, "metadata.namespace: a VirtualMachine XR is namespaced; its VM lives in its namespace");
    }
    let spec = match VmXrSpec::from_xr(&call.xr["spec"]) {
        Ok(s) => s,
        Err(e) => return fatal(rsp, format!("spec: {e}")),
    };
    require(&mut rsp, call, &spec);
    let Some(catalog) = templates(call.req, call.input, &mut rsp) else {
        response::normal(&mut rsp, "waiting for Crossplane to fetch the VirtualMachineTemplates");
        return Ok(rsp);
    };
    let template = match template(catalog, &spec.template) {
        Ok(t) => t,
        Err(e) => return fatal(rsp, e),
    };
    let r = match render_vm(call.name, call.namespace, &spec, &template, call.input) {
        Ok(r) => r,
        Err(errs) => return fatal(rsp, format!("invalid VirtualMachine: {errs}")),
    };
    let waiting = match check_networks(call, &spec) {
        Ok(w) => w,
        Err(e) => return fatal(rsp, e),
    };
    if let Some(u) = &r.udn {
        put(&mut rsp, "udn", u, NetworkState::of(call.observed("udn").as_ref()).ready())?;
    }
    let started = spec.state == PowerState::Started;
    let vmi = request::get_required_resource(call.req, "vmi");
    let obs = observe_vm(call.observed("vm").as_ref(), vmi.as_ref(), call.observed("service").as_ref(), started);
    let vm_ready = matches!(obs.phase, Phase::Ready) || (!started && matches!(obs.phase, Phase::Stopped));
    put(&mut rsp, "vm", &r.vm, vm_ready && waiting.is_empty())?;
    if let Some(svc) = &r.service {
        put(&mut rsp, "service", svc, obs.external_ip.is_some())?;
    }
    let status = derive_status(Desired::Power(spec.state), &obs, &VirtualMachineStatus::default(), chrono::Utc::now());
    resource::update_status(response::desired_composite(&mut rsp), &status::vm_status(&status))?;
    status::vm_condition(&mut rsp, &status);
    for w in waiting {
        response::warning(&mut rsp, format!("{w}: the VM starts once it is ready"));
    }
    response::normal(&mut rsp, format!("rendered virtual machine {}: {}", call.name, status.state.short()));
    Ok(rsp)
}
