//! Where a VM may run and what it holds there, as KubeVirt writes it: node
//! selectors, tolerations, affinity, dedicated CPUs and huge pages. A
//! template publishes them ([`crate::spec::SpecDefaults`]); the machine
//! carries them ([`Scheduling`]). On one host most have no meaning, and
//! the qemu backend refuses them naming the field.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::labels::check_key;
use crate::validation::ValidationErrors;

/// How a toleration matches a taint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum TolerationOperator {
    /// The taint's value equals the toleration's.
    Equal,
    /// Any value (a toleration without a key tolerates every taint).
    Exists,
}

/// What a taint does to what does not tolerate it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum TaintEffect {
    /// Not scheduled there.
    NoSchedule,
    /// Scheduled there only when nowhere else.
    PreferNoSchedule,
    /// Not scheduled there, and evicted.
    NoExecute,
}

/// A toleration, as Kubernetes writes it (in snake case).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Toleration {
    /// The taint's key (every key when absent, with `Exists`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// `Equal` (default) or `Exists`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<TolerationOperator>,
    /// The value `Equal` compares.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// The effect tolerated (every effect when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<TaintEffect>,
    /// How long a `NoExecute` taint is tolerated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toleration_seconds: Option<i64>,
}

/// The huge page sizes x86_64 has.
pub const HUGEPAGE_SIZES: [&str; 2] = ["2Mi", "1Gi"];

/// Where a VM may run and what it holds there. Empty: anywhere, shared CPUs,
/// normal pages.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scheduling {
    /// Node labels a node must have.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Taints the VM tolerates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// Kubernetes' `affinity` (`nodeAffinity`, `podAffinity`,
    /// `podAntiAffinity`), as Kubernetes writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Value>,
    /// Each vCPU pinned to a host CPU of its own.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dedicated_cpus: bool,
    /// Guest memory on huge pages of this size (`2Mi` or `1Gi`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hugepages: Option<String>,
}

impl Scheduling {
    /// Whether nothing is asked.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// Checks it, naming fields under `prefix` (`spec_defaults`).
    pub fn check(&self, prefix: &str, errs: &mut ValidationErrors) {
        crate::labels::check_map(&format!("{prefix}.node_selector"), &self.node_selector, true, errs);
        for (i, t) in self.tolerations.iter().enumerate() {
            check_toleration(t, &format!("{prefix}.tolerations[{i}]"), errs);
        }
        if let Some(a) = &self.affinity
            && let Err(why) = check_affinity(a)
        {
            errs.push(format!("{prefix}.affinity"), why.to_string());
        }
        if let Some(p) = &self.hugepages
            && !HUGEPAGE_SIZES.contains(&p.as_str())
        {
            errs.push(format!("{prefix}.hugepages"), format!("must be 2Mi or 1Gi (x86_64's huge page sizes), got {p:?}"));
        }
    }
}

fn check_toleration(t: &Toleration, field: &str, errs: &mut ValidationErrors) {
    if let Some(Err(e)) = t.key.as_deref().map(check_key) {
        errs.push(format!("{field}.key"), e.to_string());
    }
    let exists = t.operator == Some(TolerationOperator::Exists);
    if exists && t.value.as_deref().is_some_and(|v| !v.is_empty()) {
        errs.push(format!("{field}.value"), "must be empty with operator Exists");
    }
    if t.key.is_none() && !exists {
        errs.push(format!("{field}.key"), "is required unless operator is Exists");
    }
    if t.toleration_seconds.is_some() && t.effect != Some(TaintEffect::NoExecute) {
        errs.push(format!("{field}.toleration_seconds"), "applies to effect NoExecute only");
    }
}

/// An affinity is an object of `nodeAffinity`, `podAffinity` and
/// `podAntiAffinity`, each as Kubernetes types it.
fn check_affinity(a: &Value) -> Result<(), AffinityError> {
    let Some(o) = a.as_object() else { return Err(AffinityError::NotObject) };
    if let Some(k) = o.keys().find(|k| !["nodeAffinity", "podAffinity", "podAntiAffinity"].contains(&k.as_str())) {
        return Err(AffinityError::Key(k.clone()));
    }
    #[cfg(feature = "kubernetes")]
    serde_json::from_value::<k8s_openapi::api::core::v1::Affinity>(a.clone()).map_err(AffinityError::Kubernetes)?;
    Ok(())
}

/// Why a value is not an affinity.
#[derive(Debug, thiserror::Error)]
pub enum AffinityError {
    /// Not a JSON object.
    #[error("must be an object")]
    NotObject,
    /// A key other than the three kinds of affinity.
    #[error("has {0:?}: expected nodeAffinity, podAffinity or podAntiAffinity")]
    Key(String),
    /// Not what Kubernetes' `Affinity` type reads.
    #[error("is not a Kubernetes affinity: {0}")]
    Kubernetes(serde_json::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(s: serde_json::Value) -> Vec<String> {
        let s: Scheduling = serde_json::from_value(s).unwrap();
        let mut errs = ValidationErrors::default();
        s.check("spec_defaults", &mut errs);
        errs.0.into_iter().map(|e| e.field).collect()
    }

    #[test]
    fn what_kubernetes_takes_is_taken_and_the_rest_named() {
        let good = serde_json::json!({
            "node_selector": {"kubernetes.io/arch": "amd64"},
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}, {"operator": "Exists"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}},
            "dedicated_cpus": true, "hugepages": "1Gi"
        });
        assert!(fields(good).is_empty());
        let bad = serde_json::json!({
            "node_selector": {"bad key!": "x"},
            "tolerations": [{"value": "x"}, {"key": "k", "toleration_seconds": 5}],
            "affinity": {"nodeAffinty": {}},
            "hugepages": "4Ki"
        });
        assert_eq!(
            fields(bad),
            [
                "spec_defaults.node_selector.bad key!",
                "spec_defaults.tolerations[0].key",
                "spec_defaults.tolerations[1].toleration_seconds",
                "spec_defaults.affinity",
                "spec_defaults.hugepages"
            ]
        );
    }
}
