//! Where each tenant's objects live: the namespace of a tenant (or of one
//! of its subnets), found once per run and then remembered. It is the
//! name [`crate::names`] gives it, or the name an older release gave it
//! (32 bits of FNV-1a) when the cluster has that one recorded for the
//! same tenant, so a cluster an older release ran on keeps its tenants'
//! objects where they are. A namespace recorded for another tenant (its
//! `vmaas.io/tenant` annotation, else its label) is never used or
//! adopted: the object waits, DEGRADED, with a message saying so.

use std::collections::HashMap;
use std::sync::Mutex;

use kube::core::DynamicObject;
use vmaas_backend::BackendError;
use vmaas_model::k8s::render::TENANT_LABEL;

use crate::cluster::Cluster;
use crate::names::{TENANT_ANNOTATION, legacy_subnet_namespace, legacy_tenant_namespace, subnet_namespace, tenant_namespace};
use crate::turns::{Look, Turns};

/// The namespaces found since start: by the name this release gives, the
/// one in use; and the turns of the looks under way (one per name).
#[derive(Debug, Default)]
pub(crate) struct Homes {
    found: Mutex<HashMap<String, String>>,
    turns: Turns,
}

impl Homes {
    fn get(&self, wanted: &str) -> Option<String> {
        self.found.lock().ok().and_then(|m| m.get(wanted).cloned())
    }

    fn put(&self, wanted: &str, found: &str) {
        if let Ok(mut m) = self.found.lock() {
            m.insert(wanted.to_owned(), found.to_owned());
        }
    }

    /// Forgets namespace `ns` (deleted): the next look finds it again.
    pub(crate) fn forget(&self, ns: &str) {
        if let Ok(mut m) = self.found.lock() {
            m.retain(|_, v| v != ns);
        }
    }
}

/// Whose a namespace is, as it records it: its annotation, else its label
/// (`None`: it records no tenant).
pub fn recorded_tenant(ns: &DynamicObject) -> Option<&str> {
    let annotation = ns.metadata.annotations.as_ref().and_then(|a| a.get(TENANT_ANNOTATION));
    annotation.or_else(|| ns.metadata.labels.as_ref().and_then(|l| l.get(TENANT_LABEL))).map(String::as_str)
}

/// Whether a namespace recording `recorded` may hold `tenant`'s objects:
/// it records that very tenant, or none. (A tenant's name is a label value
/// unchanged, `vmaas_model::validation::check_tenant_name`, so the label
/// holds it exactly.)
fn belongs(recorded: Option<&str>, tenant: &str) -> bool {
    recorded.is_none_or(|r| r == tenant)
}

impl Homes {
    /// The namespace of `tenant`'s objects (of its subnet `subnet`, when
    /// given), as [`Homes`] finds it; an error when it is recorded for
    /// another tenant.
    pub(crate) async fn find(&self, cluster: &Cluster, prefix: &str, tenant: &str, subnet: Option<&str>) -> Result<String, BackendError> {
        let (wanted, legacy) = match subnet {
            None => (tenant_namespace(prefix, tenant), legacy_tenant_namespace(prefix, tenant)),
            Some(id) => (subnet_namespace(prefix, tenant, id), legacy_subnet_namespace(prefix, tenant, id)),
        };
        // One look per name at a time: the others find its answer.
        let _turn = match self.turns.look(&wanted, || self.get(&wanted)).await {
            Look::Remembered(found) => return Ok(found),
            Look::Ask(turn) => turn,
        };
        let found = match get_namespace(cluster, &wanted).await? {
            Some(ns) => {
                let recorded = recorded_tenant(&ns);
                if !belongs(recorded, tenant) {
                    return Err(BackendError::transient(
                        format!("placing tenant {tenant:?}'s objects in namespace {wanted}"),
                        format!(
                            "namespace {wanted} is recorded for tenant {:?} ({TENANT_ANNOTATION}): vmaas never places a tenant's objects in another tenant's namespace; an administrator must delete or relabel it",
                            recorded.unwrap_or_default()
                        ),
                    ));
                }
                wanted.clone()
            }
            // An older release's namespace of the same tenant is kept.
            None => match get_namespace(cluster, &legacy).await? {
                Some(ns) if recorded_tenant(&ns).is_some_and(|r| r == tenant) => legacy,
                _ => wanted.clone(),
            },
        };
        self.put(&wanted, &found);
        Ok(found)
    }
}

/// Namespace `name` as the API server has it now.
async fn get_namespace(cluster: &Cluster, name: &str) -> Result<Option<DynamicObject>, BackendError> {
    cluster.api(&cluster.res.namespace, "").get_opt(name).await.map_err(|e| BackendError::transient(format!("reading namespace {name}"), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(annotation: Option<&str>, label: Option<&str>) -> DynamicObject {
        let mut o = DynamicObject::new("n", &kube::core::ApiResource::erase::<k8s_openapi::api::core::v1::Namespace>(&()));
        o.metadata.annotations = annotation.map(|a| [(TENANT_ANNOTATION.to_owned(), a.to_owned())].into());
        o.metadata.labels = label.map(|l| [(TENANT_LABEL.to_owned(), l.to_owned())].into());
        o
    }

    #[test]
    fn a_namespace_is_its_recorded_tenant_s_only() {
        assert!(belongs(recorded_tenant(&ns(None, None)), "acme"), "an unrecorded namespace is taken and recorded");
        assert!(belongs(recorded_tenant(&ns(Some("acme"), Some("acme"))), "acme"));
        assert!(!belongs(recorded_tenant(&ns(None, Some("globex"))), "acme"), "a forged label");
        assert!(!belongs(recorded_tenant(&ns(Some("globex"), Some("acme"))), "acme"), "the annotation wins");
    }
}
