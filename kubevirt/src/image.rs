//! Images on a cluster: CDI `DataSource`s in the images namespace (the
//! "golden" namespace). Those an administrator put there are the catalog;
//! an image imported through the API is a DataSource of its own there.

use kube::core::DynamicObject;
use vmaas_backend::CatalogImage;
use vmaas_model::k8s::names::derived;

/// The DataSource of the imported image `id`.
pub fn data_source_name(id: &str) -> String {
    derived("image", id)
}

/// Why VMs cannot boot from DataSource `ds` yet, if they cannot: CDI
/// reports it `Ready` once its source (a PVC or snapshot) exists.
fn problem(ds: &DynamicObject) -> Option<String> {
    let conditions = ds.data["status"]["conditions"].as_array();
    let ready = conditions.and_then(|c| c.iter().find(|c| c["type"] == "Ready"));
    match ready {
        Some(c) if c["status"] == "True" => None,
        Some(c) => {
            Some(format!("its DataSource is not ready: {}", c["message"].as_str().or(c["reason"].as_str()).unwrap_or("no reason given")))
        }
        None => Some("its DataSource has no Ready condition yet".into()),
    }
}

/// The catalog: the DataSources in the images namespace, by name.
pub fn catalog(sources: &[std::sync::Arc<DynamicObject>], default: &str) -> Vec<CatalogImage> {
    let mut out: Vec<CatalogImage> = sources
        .iter()
        // Imported images are the API's own objects, not the catalog.
        .filter(|ds| crate::watch::owner_of(ds).is_none())
        .map(|ds| {
            let name = ds.metadata.name.clone().unwrap_or_default();
            let description = ds.metadata.annotations.as_ref().and_then(|a| a.get("vmaas.io/description")).cloned();
            CatalogImage {
                default: name == default,
                description: description.unwrap_or_else(|| format!("CDI DataSource {name}")),
                format: String::new(),
                virtual_size: 0,
                problem: problem(ds),
                name,
            }
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;

    fn ds(name: &str, status: serde_json::Value) -> Arc<DynamicObject> {
        let v = json!({"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataSource", "metadata": {"name": name}, "status": status});
        Arc::new(serde_json::from_value(v).unwrap())
    }

    #[test]
    fn a_data_source_is_bootable_once_ready() {
        let ready = ds("fedora", json!({"conditions": [{"type": "Ready", "status": "True"}]}));
        let waiting = ds("alpine", json!({"conditions": [{"type": "Ready", "status": "False", "reason": "NoSource"}]}));
        let c = catalog(&[ready, waiting, ds("bare", json!({}))], "fedora");
        let names: Vec<_> = c.iter().map(|i| (i.name.as_str(), i.default, i.problem.is_none())).collect();
        assert_eq!(names, vec![("alpine", false, false), ("bare", false, false), ("fedora", true, true)]);
        assert!(c[0].problem.as_deref().unwrap().contains("NoSource"), "{:?}", c[0].problem);
    }
}
