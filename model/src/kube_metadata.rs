//! Labels and annotations that travel to the Kubernetes objects of a VM.
//!
//! Two kinds travel:
//! - a template's ([`KubeMetadata`]): what platform teams write on KubeVirt
//!   VMs (`vm.kubevirt.io/template`, `vm.kubevirt.io/os`, `app`), on the
//!   `VirtualMachine` and on its instance template (so on its pods), as
//!   seed 002 does. Keys under `vmaas.io` are vmaas's own and refused.
//! - a tenant's (the VM's `metadata.labels` and `metadata.annotations`):
//!   each key travels under [`TENANT_DOMAIN`], so that a tenant never
//!   writes a key the platform or vmaas reads: `app` travels as
//!   `tenant.vmaas.io/app`, `example.com/team` as
//!   `example.com.tenant.vmaas.io/team` ([`tenant_key`]).
//!
//! vmaas's own labels and annotations are set last and always win.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::validation::ValidationErrors;

/// The domain tenant keys travel under.
pub const TENANT_DOMAIN: &str = "tenant.vmaas.io";

/// The domain of vmaas's own keys, which templates may not write.
pub const OWN_DOMAIN: &str = "vmaas.io";

/// Longest key prefix Kubernetes takes (a DNS subdomain).
const PREFIX_MAX: usize = 253;

/// A template's labels and annotations for the Kubernetes objects of its
/// VMs. Empty: vmaas's own only.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KubeMetadata {
    /// Labels of the `VirtualMachine`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations of the `VirtualMachine`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Labels of its instance template (its `VirtualMachineInstance` and pod).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub instance_labels: BTreeMap<String, String>,
    /// Annotations of its instance template.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub instance_annotations: BTreeMap<String, String>,
}

impl KubeMetadata {
    /// Whether nothing travels.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// The field names of what is set (`labels`, `instance_annotations`).
    pub fn fields(&self) -> Vec<&'static str> {
        let maps = [
            ("labels", &self.labels),
            ("annotations", &self.annotations),
            ("instance_labels", &self.instance_labels),
            ("instance_annotations", &self.instance_annotations),
        ];
        maps.into_iter().filter(|(_, m)| !m.is_empty()).map(|(f, _)| f).collect()
    }

    /// Checks keys (Kubernetes' rules, not vmaas's domain) and label
    /// values, naming fields under `prefix` (`spec_defaults`).
    pub fn check(&self, prefix: &str, errs: &mut ValidationErrors) {
        for (field, map, labels) in [
            ("labels", &self.labels, true),
            ("annotations", &self.annotations, false),
            ("instance_labels", &self.instance_labels, true),
            ("instance_annotations", &self.instance_annotations, false),
        ] {
            let at = format!("{prefix}.{field}");
            crate::labels::check_map(&at, map, labels, errs);
            for k in map.keys().filter(|k| is_own(k)) {
                errs.push(format!("{at}.{k}"), format!("keys under {OWN_DOMAIN} are vmaas's own"));
            }
        }
    }
}

/// Whether `key`'s prefix is vmaas's domain or under it.
fn is_own(key: &str) -> bool {
    key.split_once('/').is_some_and(|(p, _)| p == OWN_DOMAIN || p.ends_with(&format!(".{OWN_DOMAIN}")))
}

/// The key a tenant's `key` travels as: under [`TENANT_DOMAIN`], its own
/// prefix (if any) in front. `None` when that prefix would be longer than
/// Kubernetes allows (a tenant prefix over 237 characters).
pub fn tenant_key(key: &str) -> Option<String> {
    let out = match key.split_once('/') {
        Some((prefix, name)) => format!("{prefix}.{TENANT_DOMAIN}/{name}"),
        None => format!("{TENANT_DOMAIN}/{key}"),
    };
    out.split_once('/').is_some_and(|(p, _)| p.len() <= PREFIX_MAX).then_some(out)
}

/// A tenant's labels or annotations, as they travel ([`tenant_key`]).
pub fn tenant_map(map: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    map.iter().filter_map(|(k, v)| tenant_key(k).map(|k| (k, v.clone()))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenant_keys_travel_under_the_tenant_domain() {
        assert_eq!(tenant_key("app").as_deref(), Some("tenant.vmaas.io/app"));
        assert_eq!(tenant_key("example.com/team").as_deref(), Some("example.com.tenant.vmaas.io/team"));
        assert_eq!(tenant_key("vmaas.io/id").as_deref(), Some("vmaas.io.tenant.vmaas.io/id"), "never vmaas's own");
        assert_eq!(tenant_key(&format!("{}/x", "a".repeat(240))), None);
    }

    #[test]
    fn a_template_may_not_write_vmaas_keys() {
        let m = KubeMetadata {
            labels: BTreeMap::from([("vm.kubevirt.io/template".into(), "rhel9".into()), ("vmaas.io/id".into(), "x".into())]),
            annotations: BTreeMap::from([("ops.vmaas.io/x".into(), "y".into())]),
            instance_labels: BTreeMap::from([("kubevirt.io/size".into(), "not a value!".into())]),
            ..Default::default()
        };
        let mut errs = ValidationErrors::default();
        m.check("spec_defaults", &mut errs);
        let fields: Vec<String> = errs.iter().map(|e| e.field.clone()).collect();
        assert_eq!(
            fields,
            [
                "spec_defaults.labels.vmaas.io/id",
                "spec_defaults.annotations.ops.vmaas.io/x",
                "spec_defaults.instance_labels.kubevirt.io/size"
            ]
        );
        assert_eq!(m.fields(), ["labels", "annotations", "instance_labels"]);
    }
}
