//! Where a VM may run when a server drives several clusters
//! (`spec.placement`): a cluster by name, or any cluster whose labels
//! include the ones asked. Fixed at create; the cluster the VM was placed
//! on is `status.cluster`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::validation::ValidationErrors;

/// Where a VM may run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Placement {
    /// The cluster, by name; none: any cluster that fits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// Labels the cluster must have (each key with that value).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

impl Placement {
    /// Whether a cluster named `name` with `labels` is one the VM may run on.
    pub fn admits(&self, name: &str, labels: &BTreeMap<String, String>) -> bool {
        self.cluster.as_deref().is_none_or(|c| c == name) && self.labels.iter().all(|(k, v)| labels.get(k) == Some(v))
    }

    /// Whether it asks for nothing.
    pub fn is_empty(&self) -> bool {
        self.cluster.is_none() && self.labels.is_empty()
    }

    /// Checks names and labels, naming fields under `prefix`.
    pub fn check(&self, prefix: &str, errs: &mut ValidationErrors) {
        if let Some(c) = &self.cluster
            && let Err(reason) = check_cluster_name(c)
        {
            errs.push(format!("{prefix}.cluster"), reason);
        }
        crate::labels::check_map(&format!("{prefix}.labels"), &self.labels, true, errs);
    }

    /// Why none of `clusters` (each a name and its labels) admits it, if
    /// none does: naming what it asks and every cluster there is.
    pub fn unmatched<'a>(&self, clusters: impl IntoIterator<Item = (&'a str, &'a BTreeMap<String, String>)> + Clone) -> Option<String> {
        if clusters.clone().into_iter().any(|(name, labels)| self.admits(name, labels)) {
            return None;
        }
        let known: Vec<String> = clusters.into_iter().map(|(name, labels)| format!("{name} {}", describe_labels(labels))).collect();
        Some(format!("no cluster matches {} (clusters: {})", self.describe(), known.join(", ")))
    }

    /// `cluster=NAME`, `k=v` … for messages.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self.cluster.iter().map(|c| format!("cluster {c:?}")).collect();
        if !self.labels.is_empty() {
            parts.push(format!("labels {}", describe_labels(&self.labels)));
        }
        if parts.is_empty() { "anywhere".to_owned() } else { parts.join(" and ") }
    }
}

/// `{k=v, …}` for messages.
pub fn describe_labels(labels: &BTreeMap<String, String>) -> String {
    let kv: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{{{}}}", kv.join(", "))
}

/// A cluster's name: a DNS label (lower-case letters, digits and `-`, at most 63).
pub fn check_cluster_name(name: &str) -> Result<(), BadClusterName> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if ok { Ok(()) } else { Err(BadClusterName(name.to_owned())) }
}

/// A name that is no cluster's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a cluster name (lower-case letters, digits and '-', at most 63)")]
pub struct BadClusterName(pub String);

/// The reason, as a field error takes it.
impl From<BadClusterName> for String {
    fn from(e: BadClusterName) -> String {
        e.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_cluster_is_admitted_by_its_name_and_by_every_label_asked() {
        let p = Placement { cluster: None, labels: labels(&[("zone", "a")]) };
        assert!(p.admits("east", &labels(&[("zone", "a"), ("tier", "gold")])));
        assert!(!p.admits("west", &labels(&[("zone", "b")])));
        assert!(!p.admits("north", &labels(&[])));
        let named = Placement { cluster: Some("east".into()), labels: BTreeMap::new() };
        assert!(named.admits("east", &labels(&[])));
        assert!(!named.admits("west", &labels(&[])));
        assert!(Placement::default().admits("any", &labels(&[])));
        let (a, b) = (labels(&[("zone", "a")]), labels(&[("zone", "b")]));
        assert_eq!(named.unmatched([("east", &a), ("west", &b)]), None);
        let far = Placement { cluster: Some("north".into()), labels: BTreeMap::new() };
        assert_eq!(
            far.unmatched([("east", &a), ("west", &b)]).as_deref(),
            Some("no cluster matches cluster \"north\" (clusters: east {zone=a}, west {zone=b})")
        );
    }

    #[test]
    fn bad_names_and_labels_are_named() {
        let p = Placement { cluster: Some("East_1".into()), labels: labels(&[("bad key!", "v"), ("zone", "-x")]) };
        let mut errs = ValidationErrors::default();
        p.check("object.spec.placement", &mut errs);
        let text = format!("{errs:?}");
        assert!(text.contains("object.spec.placement.cluster"), "{text}");
        assert!(text.contains("object.spec.placement.labels.bad key!"), "{text}");
        assert!(text.contains("object.spec.placement.labels.zone"), "{text}");
    }

    #[test]
    fn unknown_fields_are_refused() {
        let e = serde_json::from_str::<Placement>(r#"{"clusters": "east"}"#).unwrap_err();
        assert!(e.to_string().contains("clusters"), "{e}");
    }
}
