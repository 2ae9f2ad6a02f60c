//! Where each vmaas object lives in the cluster and how its objects are
//! labelled, so that watches find them and nothing else.

use std::collections::BTreeMap;

use vmaas_model::ObjectKind;
use vmaas_model::k8s::names::{MAX_NAME, STRONG_DIGITS, fnv1a, strong_hash};

/// The field manager of every server-side apply, and the finalizer's owner.
pub const MANAGER: &str = "vmaas";
/// The finalizer the server keeps on the objects it made, so that none is
/// removed (by anyone) before the server has removed what hangs off it.
pub const FINALIZER: &str = "vmaas.io/cleanup";
/// Label: the id of the vmaas object a Kubernetes object belongs to.
pub const ID_LABEL: &str = "vmaas.io/id";
/// Label: the kind of that vmaas object (`virtual_machine`, `subnet`, …).
pub const KIND_LABEL: &str = "vmaas.io/kind";
/// Label: the standard "managed by" label.
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// Annotation on a KubeVirt VM: the restart generation acted on.
pub const RESTART_ANNOTATION: &str = "vmaas.io/restart-generation";

/// MetalLB's annotation asking for given addresses (an external IP, a
/// load balancer's address).
pub const METALLB_IPS: &str = "metallb.io/loadBalancerIPs";

/// A request generation an object records in annotation `key` (0 when it has none).
pub fn generation(o: &kube::core::DynamicObject, key: &str) -> u64 {
    o.metadata.annotations.as_ref().and_then(|a| a.get(key)).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// Annotation on a namespace: the tenant it belongs to, exactly (its
/// `vmaas.io/tenant` label holds the same as a label value).
pub const TENANT_ANNOTATION: &str = "vmaas.io/tenant";

/// The namespace of tenant `tenant`'s objects: the prefix, the tenant's
/// name made a DNS label, and a hash of both (two tenants never share one).
pub fn tenant_namespace(prefix: &str, tenant: &str) -> String {
    hashed(&format!("{prefix}{tenant}"), tenant)
}

/// The namespace of subnet `subnet` (its id) of `tenant`: the network the
/// namespace's pods are on is the subnet's (a primary UDN), so a subnet's
/// VMs live in a namespace of their own.
pub fn subnet_namespace(prefix: &str, tenant: &str, subnet: &str) -> String {
    hashed(&subnet_readable(prefix, tenant, subnet), &format!("{tenant}/{subnet}"))
}

/// The name releases before 64-bit hashes gave [`tenant_namespace`]
/// (32 bits of FNV-1a), looked for so that a cluster they ran on keeps its
/// tenants' namespaces (`crate::homes`).
pub fn legacy_tenant_namespace(prefix: &str, tenant: &str) -> String {
    legacy_hashed(&format!("{prefix}{tenant}"), tenant)
}

/// The name releases before 64-bit hashes gave [`subnet_namespace`].
pub fn legacy_subnet_namespace(prefix: &str, tenant: &str, subnet: &str) -> String {
    legacy_hashed(&subnet_readable(prefix, tenant, subnet), &format!("{tenant}/{subnet}"))
}

/// The readable part of a subnet's namespace: the tenant and the last six
/// letters or digits of the subnet's id, reversed.
fn subnet_readable(prefix: &str, tenant: &str, subnet: &str) -> String {
    let short: String = subnet.chars().rev().filter(char::is_ascii_alphanumeric).take(6).collect();
    format!("{prefix}{tenant}-{short}")
}

/// `readable` made a DNS label, cut to fit `digits` more after a dash.
fn readable_part(readable: &str, digits: usize) -> String {
    let clean: String = readable.chars().map(|c| c.to_ascii_lowercase()).map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
    let keep = MAX_NAME - digits - 1;
    clean[..clean.len().min(keep)].trim_matches('-').to_owned()
}

/// `readable` made a DNS label, cut to fit, then a dash and 64 bits of the
/// SHA-256 of `key` (fixed forever, or namespaces would move): no one finds
/// a tenant name whose namespace is another's.
fn hashed(readable: &str, key: &str) -> String {
    format!("{}-{}", readable_part(readable, STRONG_DIGITS), strong_hash(key))
}

/// [`hashed`] as releases before 64-bit hashes made it: 32 bits of FNV-1a.
fn legacy_hashed(readable: &str, key: &str) -> String {
    format!("{}-{:08x}", readable_part(readable, 8), fnv1a(key) & 0xffff_ffff)
}

/// A label value made of `s`: at most 63 characters of letters, digits,
/// `-`, `_` and `.`, starting and ending with a letter or digit.
pub fn label_value(s: &str) -> String {
    let v: String = s.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '-' }).take(63).collect();
    v.trim_matches(|c: char| !c.is_ascii_alphanumeric()).to_owned()
}

/// The labels of every object made for vmaas object `id` of `kind`.
pub fn labels(kind: ObjectKind, id: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (ID_LABEL.to_owned(), label_value(id)),
        (KIND_LABEL.to_owned(), kind.as_str().to_owned()),
        (MANAGED_BY.to_owned(), MANAGER.to_owned()),
    ])
}

/// The label selector of every object vmaas made.
pub fn selector() -> String {
    format!("{MANAGED_BY}={MANAGER},{ID_LABEL}")
}

/// The selector of the objects of vmaas object `id`.
pub fn selector_of(id: &str) -> String {
    format!("{MANAGED_BY}={MANAGER},{ID_LABEL}={}", label_value(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenants_get_distinct_valid_namespaces() {
        let a = tenant_namespace("vmaas-", "Acme Corp");
        let b = tenant_namespace("vmaas-", "acme-corp");
        assert_ne!(a, b, "the hash keeps tenants apart");
        for n in [&a, &b, &tenant_namespace("vmaas", &"x".repeat(200))] {
            assert!(vmaas_model::validation::check_dns_label(n).is_ok(), "{n}");
        }
        assert!(a.starts_with("vmaas-acme-corp-") && a.len() == "vmaas-acme-corp-".len() + 16, "{a}");
        let (s1, s2) = (subnet_namespace("vmaas-", "acme", "0190aa-01"), subnet_namespace("vmaas-", "acme", "0190aa-02"));
        assert!(s1 != s2 && s1.starts_with("vmaas-acme-10aa09-"), "{s1} {s2}");
    }

    #[test]
    fn the_tenant_found_to_share_acme_namespace_no_longer_does() {
        // Found by a search of 2^32 names: same legacy namespace as acme's.
        assert_eq!(legacy_tenant_namespace("vmaas-", "acme>#{?&>+"), legacy_tenant_namespace("vmaas-", "acme"));
        assert_eq!(legacy_tenant_namespace("vmaas-", "acme"), "vmaas-acme-f4f6de0f");
        assert_ne!(tenant_namespace("vmaas-", "acme>#{?&>+"), tenant_namespace("vmaas-", "acme"));
        // The hash is SHA-256's first 8 bytes (`printf acme | sha256sum`): fixed forever.
        assert_eq!(tenant_namespace("vmaas-", "acme"), "vmaas-acme-822b33ad87c148a0");
    }

    #[test]
    fn label_values_are_valid() {
        assert_eq!(label_value("0190a-b"), "0190a-b");
        assert_eq!(label_value("a/b c"), "a-b-c");
        assert_eq!(label_value(&"y".repeat(80)).len(), 63);
        assert_eq!(label_value("-x-"), "x");
    }
}
