//! `RunFunction`: the XR and the input in, desired objects, readiness and
//! XR status out.

use std::time::Duration;

use function_sdk_rust::proto::v1::function_runner_service_server::FunctionRunnerService;
use function_sdk_rust::proto::v1::{Ready, Resource, RunFunctionRequest, RunFunctionResponse};
use function_sdk_rust::response::ResourceMatch;
use function_sdk_rust::{request, resource, response};
use serde::Serialize;
use serde_json::Value;
use tonic::{Request, Response, Status};
use vmaas_model::k8s::observe::observe_vm;
use vmaas_model::{Desired, Phase, Template, VirtualMachineStatus, VirtualMachineTemplate, derive_status};

use crate::status;
use crate::xr::{FunctionInput, MAX_NAME, NetworkXrSpec, VmXrSpec, network_namespace, render_network, render_vm, template_from_object};

/// How long Crossplane may cache a response.
pub const TTL: Duration = Duration::from_secs(60);

/// The function.
#[derive(Debug, Default, Clone)]
pub struct VmaasFunction;

fn observed(req: &RunFunctionRequest, name: &str) -> Option<Value> {
    request::observed_composed(req, name).and_then(|r| r.resource.as_ref()).map(resource::struct_to_json)
}

fn put<T: Serialize>(rsp: &mut RunFunctionResponse, name: &str, object: &T, ready: bool) -> Result<(), function_sdk_rust::Error> {
    let r: &mut Resource = response::desired_composed(rsp, name);
    resource::update(r, object)?;
    resource::set_ready(r, if ready { Ready::True } else { Ready::False });
    Ok(())
}

impl VmaasFunction {
    fn templates(
        &self,
        req: &RunFunctionRequest,
        input: &FunctionInput,
        rsp: &mut RunFunctionResponse,
    ) -> Option<Vec<VirtualMachineTemplate>> {
        let mut all = input.templates.clone();
        if input.templates_from_cluster {
            response::require_resources(rsp, "templates", "vmaas.io/v1alpha1", "VirtualMachineTemplate", None, None);
            let found = request::get_required_resources(req, "templates")?;
            for t in found {
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

    fn run(&self, req: &RunFunctionRequest) -> Result<RunFunctionResponse, function_sdk_rust::Error> {
        let mut rsp = response::to(req, TTL);
        let input: FunctionInput = match request::get_input(req) {
            Ok(i) => i,
            Err(e) => {
                response::fatal(&mut rsp, format!("invalid function input: {e}"));
                return Ok(rsp);
            }
        };
        let Some(xr) = request::observed_composite(req).and_then(|r| r.resource.as_ref()).map(resource::struct_to_json) else {
            response::fatal(&mut rsp, "the request has no observed composite resource");
            return Ok(rsp);
        };
        let name = xr["metadata"]["name"].as_str().unwrap_or("").to_owned();
        if let Err(reason) = vmaas_model::validation::check_dns_label(&name) {
            response::fatal(&mut rsp, format!("metadata.name: {reason}"));
            return Ok(rsp);
        }
        match xr["kind"].as_str() {
            Some("VirtualPrivateNetwork") => self.network(req, &xr, &name, rsp),
            _ => self.vm(req, &xr, &name, &input, rsp),
        }
    }

    fn network(
        &self,
        req: &RunFunctionRequest,
        xr: &Value,
        name: &str,
        mut rsp: RunFunctionResponse,
    ) -> Result<RunFunctionResponse, function_sdk_rust::Error> {
        let spec = match NetworkXrSpec::from_xr(&xr["spec"]) {
            Ok(s) => s,
            Err(e) => {
                response::fatal(&mut rsp, format!("spec: {e}"));
                return Ok(rsp);
            }
        };
        let net = render_network(name, &spec);
        put(&mut rsp, "namespace", &net.namespace, observed(req, "namespace").is_some())?;
        if let Some(u) = &net.udn {
            put(&mut rsp, "udn", u, observed(req, "udn").is_some())?;
        }
        if let Some(c) = &net.cudn {
            put(&mut rsp, "cudn", c, observed(req, "cudn").is_some())?;
        }
        resource::update_status(response::desired_composite(&mut rsp), &status::network_status(&network_namespace(name), &spec.ipv4_cidr))?;
        response::normal(&mut rsp, format!("rendered private network {name}"));
        Ok(rsp)
    }

    fn vm(
        &self,
        req: &RunFunctionRequest,
        xr: &Value,
        name: &str,
        input: &FunctionInput,
        mut rsp: RunFunctionResponse,
    ) -> Result<RunFunctionResponse, function_sdk_rust::Error> {
        let spec = match VmXrSpec::from_xr(&xr["spec"]) {
            Ok(s) => s,
            Err(e) => {
                response::fatal(&mut rsp, format!("spec: {e}"));
                return Ok(rsp);
            }
        };
        let Some(templates) = self.templates(req, input, &mut rsp) else {
            response::normal(&mut rsp, "waiting for Crossplane to fetch the VirtualMachineTemplates");
            return Ok(rsp);
        };
        let Some(wire) = templates.into_iter().find(|t| t.id == spec.template) else {
            response::fatal(&mut rsp, format!("spec.template: template {:?} does not exist", spec.template));
            return Ok(rsp);
        };
        let template = match Template::compile(wire) {
            Ok(t) => t,
            Err(e) => {
                response::fatal(&mut rsp, format!("template {:?} is invalid: {e}", spec.template));
                return Ok(rsp);
            }
        };
        let r = match render_vm(name, &spec, &template, input) {
            Ok(r) => r,
            Err(errs) => {
                response::fatal(&mut rsp, format!("invalid VirtualMachine: {errs}"));
                return Ok(rsp);
            }
        };
        if let Some(long) = r.too_long() {
            response::fatal(
                &mut rsp,
                format!(
                    "metadata.name: too long: it would name an object {long:?} ({} characters, at most {MAX_NAME}); choose a shorter name",
                    long.len()
                ),
            );
            return Ok(rsp);
        }
        response::require_resources(
            &mut rsp,
            "vmi",
            "kubevirt.io/v1",
            "VirtualMachineInstance",
            Some(ResourceMatch::Name(name.to_owned())),
            Some(r.namespace_name.clone()),
        );
        let observed_vm = observed(req, "vm");
        let observed_svc = observed(req, "service");
        let vmi = request::get_required_resource(req, "vmi");
        if let Some(ns) = &r.namespace {
            put(&mut rsp, "namespace", ns, observed(req, "namespace").is_some())?;
        }
        if let Some(u) = &r.udn {
            put(&mut rsp, "udn", u, observed(req, "udn").is_some())?;
        }
        let started = spec.state == vmaas_model::PowerState::Started;
        let obs = observe_vm(observed_vm.as_ref(), vmi.as_ref(), observed_svc.as_ref(), started);
        let vm_ready = matches!(obs.phase, Phase::Ready) || (!started && matches!(obs.phase, Phase::Stopped));
        put(&mut rsp, "vm", &r.vm, vm_ready)?;
        if let Some(svc) = &r.service {
            put(&mut rsp, "service", svc, obs.external_ip.is_some())?;
        }
        let status = derive_status(Desired::Power(spec.state), &obs, &VirtualMachineStatus::default(), chrono::Utc::now());
        resource::update_status(response::desired_composite(&mut rsp), &status::vm_status(&status))?;
        status::vm_condition(&mut rsp, &status);
        response::normal(&mut rsp, format!("rendered virtual machine {name}: {}", status.state.short()));
        Ok(rsp)
    }
}

#[tonic::async_trait]
impl FunctionRunnerService for VmaasFunction {
    async fn run_function(&self, request: Request<RunFunctionRequest>) -> Result<Response<RunFunctionResponse>, Status> {
        self.run(request.get_ref()).map(Response::new).map_err(|e| Status::internal(e.to_string()))
    }
}
