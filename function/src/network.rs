//! Network XRs: a tenant's `VirtualPrivateNetwork` (a secondary layer-2
//! UDN in its namespace) and a platform team's cluster-scoped
//! `PhysicalNetwork` (a localnet CUDN offered to the namespaces it lists).

use function_sdk_rust::proto::v1::RunFunctionResponse;
use function_sdk_rust::{resource, response};
use serde_json::json;

use crate::function::{Call, fatal, put};
use crate::render::{render_network, render_physical};
use crate::status::NetworkState;
use crate::xr::{NetworkXrSpec, PhysicalNetworkXrSpec};

/// Composes a `VirtualPrivateNetwork` XR.
pub(crate) fn private(call: &Call<'_>, mut rsp: RunFunctionResponse) -> Result<RunFunctionResponse, function_sdk_rust::Error> {
    if call.namespace.is_empty() {
        return fatal(rsp, "metadata.namespace: a VirtualPrivateNetwork lives in the namespace of the VMs that use it");
    }
    let spec = match NetworkXrSpec::from_xr(&call.xr["spec"]) {
        Ok(s) => s,
        Err(e) => return fatal(rsp, format!("spec: {e}")),
    };
    let udn = match render_network(call.name, call.namespace, &spec) {
        Ok(u) => u,
        Err(e) => return fatal(rsp, format!("invalid VirtualPrivateNetwork: {e}")),
    };
    let state = NetworkState::of(call.observed("udn").as_ref());
    put(&mut rsp, "udn", &udn, state.ready())?;
    resource::update_status(response::desired_composite(&mut rsp), &state.to_status(json!({"ipv4Cidr": spec.ipv4_cidr})))?;
    state.condition(&mut rsp);
    response::normal(&mut rsp, format!("rendered private network {}: {}", call.name, state.state));
    Ok(rsp)
}

/// Composes a `PhysicalNetwork` XR.
pub(crate) fn physical(call: &Call<'_>, mut rsp: RunFunctionResponse) -> Result<RunFunctionResponse, function_sdk_rust::Error> {
    let spec = match PhysicalNetworkXrSpec::from_xr(&call.xr["spec"]) {
        Ok(s) => s,
        Err(e) => return fatal(rsp, format!("spec: {e}")),
    };
    let cudn = match render_physical(call.name, &spec) {
        Ok(c) => c,
        Err(e) => return fatal(rsp, format!("invalid PhysicalNetwork: {e}")),
    };
    let state = NetworkState::of(call.observed("cudn").as_ref());
    put(&mut rsp, "cudn", &cudn, state.ready())?;
    let fields = json!({"physicalNetworkName": spec.physical_network_name, "namespaces": spec.namespaces});
    resource::update_status(response::desired_composite(&mut rsp), &state.to_status(fields))?;
    state.condition(&mut rsp);
    response::normal(&mut rsp, format!("rendered physical network {}: {}", call.name, state.state));
    Ok(rsp)
}
