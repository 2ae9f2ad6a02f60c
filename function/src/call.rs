//! What every kind's handler shares: the [`Call`] it answers, how it puts
//! a desired object or fails, and how it asks Crossplane for the XRs of
//! other kinds it depends on (a VM's network and load balancers, a
//! volume's VMs). [`crate::function`] dispatches to the handlers; they
//! depend on this module alone, never on each other's dispatch.

use function_sdk_rust::proto::v1::{Ready, Resource, RunFunctionRequest, RunFunctionResponse};
use function_sdk_rust::response::ResourceMatch;
use function_sdk_rust::{request, resource, response};
use serde::Serialize;
use serde_json::Value;

use crate::xr::{CLAIM_NAME_LABEL, CLAIM_NAMESPACE_LABEL, FunctionInput, Owner, XR_API};

/// What every handler gets: the request, the XR and its name, the input.
pub(crate) struct Call<'a> {
    pub req: &'a RunFunctionRequest,
    pub xr: &'a Value,
    pub name: &'a str,
    pub input: &'a FunctionInput,
}

impl Call<'_> {
    /// The observed composed resource `name`, as JSON.
    pub fn observed(&self, name: &str) -> Option<Value> {
        request::observed_composed(self.req, name).and_then(|r| r.resource.as_ref()).map(resource::struct_to_json)
    }
}

/// Sets the desired composed resource `name` to `object`, with its readiness.
pub(crate) fn put<T: Serialize>(
    rsp: &mut RunFunctionResponse,
    name: &str,
    object: &T,
    ready: bool,
) -> Result<(), function_sdk_rust::Error> {
    let r: &mut Resource = response::desired_composed(rsp, name);
    resource::update(r, object)?;
    resource::set_ready(r, if ready { Ready::True } else { Ready::False });
    Ok(())
}

/// Ends `rsp` with a fatal result: Crossplane composes nothing and reports `message`.
pub(crate) fn fatal(mut rsp: RunFunctionResponse, message: impl Into<String>) -> Result<RunFunctionResponse, function_sdk_rust::Error> {
    response::fatal(&mut rsp, message);
    Ok(rsp)
}

/// Asks for `kind` XRs of `owner`'s tenant (all of them for an XR made
/// directly): what a load balancer and its VMs find each other by.
pub(crate) fn require_tenants(rsp: &mut RunFunctionResponse, name: &str, kind: &str, owner: &Owner) {
    let m = (!owner.tenant.is_empty())
        .then(|| ResourceMatch::Labels([(CLAIM_NAMESPACE_LABEL.to_owned(), owner.tenant.clone())].into_iter().collect()));
    response::require_resources(rsp, name, XR_API, kind, m, None);
}

/// Whether the XR `xr` is the one `owner`'s tenant calls `name` (an XR
/// made directly, without a tenant, only ever names another such XR).
pub(crate) fn is_named(xr: &Value, owner: &Owner, name: &str) -> bool {
    let o = Owner::of(xr);
    o.name == name && o.tenant == owner.tenant
}

/// Whether a private network's XR is of role `Secondary` (a second NIC's
/// network, with no namespace of its own).
pub(crate) fn is_secondary(net: &serde_json::Value) -> bool {
    serde_json::from_value::<crate::xr::NetworkRole>(net["spec"]["role"].clone()).is_ok_and(|r| r == crate::xr::NetworkRole::Secondary)
}

/// Asks Crossplane for the private network `network` of `owner`'s tenant
/// (by its claim's labels; an XR made directly names another by name), as
/// the required resource `key`.
pub(crate) fn require_private(rsp: &mut RunFunctionResponse, owner: &Owner, key: &str, network: &str) {
    let m = if owner.tenant.is_empty() {
        ResourceMatch::Name(network.to_owned())
    } else {
        let labels = [(CLAIM_NAMESPACE_LABEL, owner.tenant.as_str()), (CLAIM_NAME_LABEL, network)];
        ResourceMatch::Labels(labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect())
    };
    response::require_resources(rsp, key, XR_API, "XVirtualPrivateSubnet", Some(m), None);
}
