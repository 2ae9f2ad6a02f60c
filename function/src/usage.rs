//! Crossplane `ClusterUsage`s (`protection.crossplane.io/v1beta1`): the
//! seed's reference count and finalizer on a private network. Each VM XR on
//! a named network composes one, naming the network XR as used and itself
//! as the user, so Crossplane refuses to delete a network while a VM is on
//! it, and a deletion tried meanwhile is replayed once the last VM is gone.

use serde_json::{Value, json};
use vmaas_model::k8s::names::derived;

use crate::xr::XR_API;

/// The API version of Crossplane's usages.
pub const USAGE_API: &str = "protection.crossplane.io/v1beta1";

/// A reference to the XR `kind` named as `xr` is, as a usage names it.
fn reference(kind: &str, xr: &Value) -> Value {
    json!({"apiVersion": XR_API, "kind": kind, "resourceRef": {"name": xr["metadata"]["name"]}})
}

/// The `ClusterUsage` that keeps the network XR `network` while the VM XR
/// `vm` is on it (named after the VM XR, whose names are unique).
pub fn usage_of(network: &Value, vm: &Value) -> Value {
    let name = derived(vm["metadata"]["name"].as_str().unwrap_or_default(), "network");
    json!({
        "apiVersion": USAGE_API,
        "kind": "ClusterUsage",
        "metadata": {"name": name},
        "spec": {"of": reference("XVirtualPrivateSubnet", network), "by": reference("XVirtualMachine", vm), "replayDeletion": true},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vm_uses_its_network() {
        let net = json!({"apiVersion": "vmaas.io/v1alpha1", "kind": "XVirtualPrivateSubnet", "metadata": {"name": "example-x1"}});
        let vm = json!({"apiVersion": "vmaas.io/v1alpha1", "kind": "XVirtualMachine", "metadata": {"name": "web-y2"}});
        let u = usage_of(&net, &vm);
        assert_eq!(u["metadata"]["name"], "web-y2-network");
        assert_eq!(
            u["spec"]["of"],
            json!({"apiVersion": "vmaas.io/v1alpha1", "kind": "XVirtualPrivateSubnet", "resourceRef": {"name": "example-x1"}})
        );
        assert_eq!(u["spec"]["by"]["kind"], "XVirtualMachine");
        assert_eq!(u["spec"]["by"]["resourceRef"]["name"], "web-y2");
    }
}
