//! Crossplane `ClusterUsage`s (`protection.crossplane.io/v1beta1`): the
//! seed's reference count and finalizer on a private network. Each VM XR on
//! a named network composes one, naming the network XR as used and itself
//! as the user, so Crossplane refuses to delete a network while a VM is on
//! it, and a deletion tried meanwhile is replayed once the last VM is gone.
//! Volumes use their network, and VMs the volumes they list, the same way.

use serde_json::{Value, json};
use vmaas_model::k8s::names::derived;

use crate::xr::XR_API;

/// The API version of Crossplane's usages.
pub const USAGE_API: &str = "protection.crossplane.io/v1beta1";

/// A reference to the XR `kind` named as `xr` is, as a usage names it.
fn reference(kind: &str, xr: &Value) -> Value {
    json!({"apiVersion": XR_API, "kind": kind, "resourceRef": {"name": xr["metadata"]["name"]}})
}

/// The `ClusterUsage` that keeps the XR `of` (of kind `of_kind`) while the
/// XR `by` (of kind `by_kind`) uses it, named after `by` (XR names are
/// unique) and `what` it uses.
pub fn usage(of_kind: &str, of: &Value, by_kind: &str, by: &Value, what: &str) -> Value {
    let name = derived(by["metadata"]["name"].as_str().unwrap_or_default(), what);
    json!({
        "apiVersion": USAGE_API,
        "kind": "ClusterUsage",
        "metadata": {"name": name},
        "spec": {"of": reference(of_kind, of), "by": reference(by_kind, by), "replayDeletion": true},
    })
}

/// The `ClusterUsage` that keeps the network XR `network` while the VM XR
/// `vm` is on it.
pub fn usage_of(network: &Value, vm: &Value) -> Value {
    usage("XVirtualPrivateSubnet", network, "XVirtualMachine", vm, "network")
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
