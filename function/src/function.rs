//! `RunFunction`: the XR and the input in, desired objects, readiness and
//! XR status out. Each kind of XR has its own module ([`crate::vm`],
//! [`crate::network`], [`crate::balancer`], [`crate::volume`]); this one decodes what they share and dispatches.

use std::time::Duration;

use function_sdk_rust::proto::v1::function_runner_service_server::FunctionRunnerService;
use function_sdk_rust::proto::v1::{RunFunctionRequest, RunFunctionResponse};
use function_sdk_rust::{request, resource, response};
use tonic::{Request, Response, Status};

use crate::call::{Call, fatal};
use crate::xr::{FunctionInput, Owner};

/// How long Crossplane may cache a response.
pub const TTL: Duration = Duration::from_secs(60);

/// The function.
#[derive(Debug, Default, Clone)]
pub struct VmaasFunction;

impl VmaasFunction {
    fn run(&self, req: &RunFunctionRequest) -> Result<RunFunctionResponse, function_sdk_rust::Error> {
        let rsp = response::to(req, TTL);
        let input: FunctionInput = match request::get_input(req) {
            Ok(i) => i,
            Err(e) => return fatal(rsp, format!("invalid function input: {e}")),
        };
        let Some(xr) = request::observed_composite(req).and_then(|r| r.resource.as_ref()).map(resource::struct_to_json) else {
            return fatal(rsp, "the request has no observed composite resource");
        };
        let name = xr["metadata"]["name"].as_str().unwrap_or("");
        // The XR's name, and its claim's (which names the VM): DNS labels.
        for n in [name, Owner::of(&xr).name.as_str()] {
            if let Err(reason) = vmaas_model::validation::check_dns_label(n) {
                return fatal(rsp, format!("metadata.name: {n:?}: {reason}"));
            }
        }
        let call = Call { req, xr: &xr, name, input: &input };
        match xr["kind"].as_str().unwrap_or("") {
            "XVirtualMachine" => crate::vm::run(&call, rsp),
            "XVirtualPrivateSubnet" => crate::network::private(&call, rsp),
            "PhysicalNetwork" => crate::network::physical(&call, rsp),
            "XLoadBalancer" => crate::balancer::run(&call, rsp),
            "XVolume" => crate::volume::run(&call, rsp),
            other => fatal(
                rsp,
                format!(
                    "kind: {other:?} is not a kind function-vmaas composes \
                     (XVirtualMachine, XVirtualPrivateSubnet, PhysicalNetwork, XLoadBalancer, XVolume)"
                ),
            ),
        }
    }
}

#[tonic::async_trait]
impl FunctionRunnerService for VmaasFunction {
    async fn run_function(&self, request: Request<RunFunctionRequest>) -> Result<Response<RunFunctionResponse>, Status> {
        self.run(request.get_ref())
            .map(|mut rsp| {
                crate::status::to_claim(&mut rsp);
                Response::new(rsp)
            })
            .map_err(|e| Status::internal(e.to_string()))
    }
}
