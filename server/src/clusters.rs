//! `--cluster NAME=KUBECONFIG` and `--cluster-label NAME:KEY=VALUE`: the
//! clusters a server places VMs among, as the flags give them; and the
//! flags of one cluster each (`--cluster-cdi-upload-proxy NAME=URL`, …).

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::flags::FlagError;

/// Where one cluster of several is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterSource {
    /// A Kubernetes cluster with KubeVirt, through this kubeconfig.
    Kubeconfig(PathBuf),
    /// This host, through the qemu backend (`NAME=host`).
    Host,
}

/// One `--cluster` flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterFlag {
    /// Its name.
    pub name: String,
    /// Where it is.
    pub source: ClusterSource,
}

/// `NAME=KUBECONFIG` or `NAME=host`.
pub fn parse_cluster(s: &str) -> Result<ClusterFlag, FlagError> {
    let Some((name, path)) = s.split_once('=').filter(|(_, p)| !p.is_empty()) else {
        return Err(FlagError::Form { given: s.to_owned(), expected: "NAME=KUBECONFIG (or NAME=host for this host's qemu backend)" });
    };
    vmaas_model::vm::placement::check_cluster_name(name)?;
    let source = if path == "host" { ClusterSource::Host } else { ClusterSource::Kubeconfig(PathBuf::from(path)) };
    Ok(ClusterFlag { name: name.to_owned(), source })
}

/// One `--cluster-label` flag: `NAME:KEY=VALUE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterLabel {
    /// The cluster.
    pub cluster: String,
    /// The label's key.
    pub key: String,
    /// Its value.
    pub value: String,
}

/// `NAME:KEY=VALUE`, the key and value as Kubernetes labels have them.
pub fn parse_cluster_label(s: &str) -> Result<ClusterLabel, FlagError> {
    let parsed = s.split_once(':').and_then(|(c, kv)| kv.split_once('=').map(|(k, v)| (c, k, v)));
    let Some((cluster, key, value)) = parsed else {
        return Err(FlagError::Form { given: s.to_owned(), expected: "NAME:KEY=VALUE, e.g. east:zone=eu-1" });
    };
    vmaas_model::vm::placement::check_cluster_name(cluster)?;
    vmaas_model::labels::check_key(key).map_err(|reason| FlagError::LabelKey { given: s.to_owned(), reason })?;
    vmaas_model::labels::check_name(value, true).map_err(|reason| FlagError::LabelValue { given: s.to_owned(), reason })?;
    Ok(ClusterLabel { cluster: cluster.to_owned(), key: key.to_owned(), value: value.to_owned() })
}

/// The labels of each cluster in `clusters`; a label of a cluster not
/// among them is an error naming it.
pub fn labels_by_cluster(
    clusters: &[ClusterFlag],
    labels: &[ClusterLabel],
) -> Result<BTreeMap<String, BTreeMap<String, String>>, FlagError> {
    let mut out: BTreeMap<String, BTreeMap<String, String>> = clusters.iter().map(|c| (c.name.clone(), BTreeMap::new())).collect();
    for l in labels {
        let Some(of) = out.get_mut(&l.cluster) else {
            return Err(FlagError::UnknownCluster {
                flag: "--cluster-label",
                label: format!("{}:{}={}", l.cluster, l.key, l.value),
                cluster: l.cluster.clone(),
            });
        };
        of.insert(l.key.clone(), l.value.clone());
    }
    Ok(out)
}

/// A value of one cluster: `NAME=VALUE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterValue {
    /// The cluster.
    pub cluster: String,
    /// Its value.
    pub value: String,
}

/// `NAME=VALUE`, the name a cluster's.
pub fn parse_cluster_value(s: &str) -> Result<ClusterValue, FlagError> {
    let Some((cluster, value)) = s.split_once('=').filter(|(_, v)| !v.is_empty()) else {
        return Err(FlagError::Form { given: s.to_owned(), expected: "NAME=VALUE, e.g. east=https://cdi-uploadproxy.east.example" });
    };
    vmaas_model::vm::placement::check_cluster_name(cluster)?;
    Ok(ClusterValue { cluster: cluster.to_owned(), value: value.to_owned() })
}

/// The value `values` give cluster `name`, if any (the last given).
pub fn value_of<'a>(values: &'a [ClusterValue], name: &str) -> Option<&'a str> {
    values.iter().rev().find(|v| v.cluster == name).map(|v| v.value.as_str())
}

/// Every one of `values` (of `flag`) names one of `clusters`.
pub fn check_named(flag: &'static str, values: &[ClusterValue], clusters: &[ClusterFlag]) -> Result<(), FlagError> {
    match values.iter().find(|v| !clusters.iter().any(|c| c.name == v.cluster)) {
        Some(v) => Err(FlagError::UnknownCluster { flag, label: format!("{}={}", v.cluster, v.value), cluster: v.cluster.clone() }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clusters_and_labels_are_parsed_and_bad_ones_named() {
        assert_eq!(
            parse_cluster("east=/k/east.yaml").unwrap(),
            ClusterFlag { name: "east".into(), source: ClusterSource::Kubeconfig("/k/east.yaml".into()) }
        );
        assert_eq!(parse_cluster("dev=host").unwrap().source, ClusterSource::Host);
        assert!(parse_cluster("East=/k").is_err());
        assert!(parse_cluster("east=").is_err());
        let l = parse_cluster_label("east:topology.kubernetes.io/zone=eu-1").unwrap();
        assert_eq!((l.cluster.as_str(), l.key.as_str(), l.value.as_str()), ("east", "topology.kubernetes.io/zone", "eu-1"));
        assert!(parse_cluster_label("east:zone=-bad").is_err());
        assert!(parse_cluster_label("eastzone=a").is_err());
        let east = parse_cluster("east=/k").unwrap();
        assert!(
            labels_by_cluster(std::slice::from_ref(&east), &[parse_cluster_label("west:a=b").unwrap()])
                .unwrap_err()
                .to_string()
                .contains("west")
        );
        assert_eq!(labels_by_cluster(std::slice::from_ref(&east), &[l]).unwrap()["east"]["topology.kubernetes.io/zone"], "eu-1");
        let v = parse_cluster_value("east=https://cdi.east:8443").unwrap();
        assert_eq!((v.cluster.as_str(), v.value.as_str()), ("east", "https://cdi.east:8443"));
        assert!(parse_cluster_value("east=").is_err() && parse_cluster_value("East=x").is_err());
        let values = [v, parse_cluster_value("west=https://cdi.west").unwrap()];
        assert_eq!(value_of(&values, "west"), Some("https://cdi.west"));
        assert_eq!(value_of(&values, "north"), None);
        let e = check_named("--cluster-cdi-upload-proxy", &values, std::slice::from_ref(&east)).unwrap_err().to_string();
        assert!(e.contains("--cluster-cdi-upload-proxy") && e.contains("\"west\""), "{e}");
        assert!(check_named("--x", &values[..1], &[east]).is_ok());
    }
}
