//! Network XRs: a tenant's private network (`XVirtualPrivateSubnet`, from
//! a `VirtualPrivateSubnet` claim: a namespace with a primary layer-2 UDN,
//! where the VMs on it live; or, of role `Secondary`, a layer-2 CUDN over
//! the tenant's namespaces, a second NIC's network) and a platform team's
//! `PhysicalNetwork` (a localnet CUDN offered to the tenants it lists).

use function_sdk_rust::proto::v1::RunFunctionResponse;
use function_sdk_rust::{resource, response};
use serde_json::json;

use crate::call::{Call, fatal, put};
use crate::render::{render_network, render_physical, render_secondary};
use crate::status::NetworkState;
use crate::xr::{NetworkRole, NetworkXrSpec, Owner, PhysicalNetworkXrSpec};

/// Composes an `XVirtualPrivateSubnet`.
pub(crate) fn private(call: &Call<'_>, mut rsp: RunFunctionResponse) -> Result<RunFunctionResponse, function_sdk_rust::Error> {
    let owner = Owner::of(call.xr);
    let spec = match NetworkXrSpec::from_xr(&call.xr["spec"]) {
        Ok(s) => s,
        Err(e) => return fatal(rsp, format!("spec: {e}")),
    };
    if spec.role == NetworkRole::Secondary {
        return secondary(call, rsp, &owner, &spec);
    }
    let net = match render_network(&owner, &spec) {
        Ok(n) => n,
        Err(e) => return fatal(rsp, format!("invalid VirtualPrivateSubnet: {e}")),
    };
    let state = NetworkState::of(call.observed("udn").as_ref());
    put(&mut rsp, "namespace", &net.namespace, call.observed("namespace").is_some())?;
    put(&mut rsp, "udn", &net.udn, state.ready())?;
    let fields = json!({"ipv4Cidr": spec.ipv4_cidr, "namespace": net.namespace.metadata.name});
    resource::update_status(response::desired_composite(&mut rsp), &state.to_status(fields))?;
    state.condition(&mut rsp);
    response::normal(&mut rsp, format!("rendered private network of {}: {}", owner.describe(), state.state));
    Ok(rsp)
}

/// Composes an `XVirtualPrivateSubnet` of role `Secondary`: its CUDN.
fn secondary(
    call: &Call<'_>,
    rsp: RunFunctionResponse,
    owner: &Owner,
    spec: &NetworkXrSpec,
) -> Result<RunFunctionResponse, function_sdk_rust::Error> {
    let cudn = match render_secondary(owner, spec) {
        Ok(c) => c,
        Err(e) => return fatal(rsp, format!("invalid VirtualPrivateSubnet: {e}")),
    };
    let fields = json!({"ipv4Cidr": spec.ipv4_cidr, "networkName": cudn.metadata.name});
    compose_cudn(call, rsp, &cudn, fields, &format!("secondary network of {}", owner.describe()))
}

/// Puts `cudn` in the desired state (ready once OVN-K says so), with
/// `fields` and its state in the composite's status and condition.
fn compose_cudn<T: serde::Serialize>(
    call: &Call<'_>,
    mut rsp: RunFunctionResponse,
    cudn: &T,
    fields: serde_json::Value,
    what: &str,
) -> Result<RunFunctionResponse, function_sdk_rust::Error> {
    let state = NetworkState::of(call.observed("cudn").as_ref());
    put(&mut rsp, "cudn", cudn, state.ready())?;
    resource::update_status(response::desired_composite(&mut rsp), &state.to_status(fields))?;
    state.condition(&mut rsp);
    response::normal(&mut rsp, format!("rendered {what}: {}", state.state));
    Ok(rsp)
}

/// Composes a `PhysicalNetwork` XR.
pub(crate) fn physical(call: &Call<'_>, rsp: RunFunctionResponse) -> Result<RunFunctionResponse, function_sdk_rust::Error> {
    let spec = match PhysicalNetworkXrSpec::from_xr(&call.xr["spec"]) {
        Ok(s) => s,
        Err(e) => return fatal(rsp, format!("spec: {e}")),
    };
    let cudn = match render_physical(call.name, &spec) {
        Ok(c) => c,
        Err(e) => return fatal(rsp, format!("invalid PhysicalNetwork: {e}")),
    };
    let fields = json!({"physicalNetworkName": spec.physical_network_name, "namespaces": spec.namespaces});
    compose_cudn(call, rsp, &cudn, fields, &format!("physical network {}", call.name))
}
