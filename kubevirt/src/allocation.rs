//! Why the cluster's load balancer has not given a Service its address,
//! and asking it again. MetalLB's controller says why in an
//! `AllocationFailed` event on the Service (`Failed to allocate IP for
//! "ns/name": no available IPs in pool public`), and does not try that
//! Service again until it changes. An address can be refused only for a
//! while: asked for by one VM's Service while another's still holds it
//! (an external IP moving between VMs), or from a pool the platform team
//! then grows. So for a Service still without an address this reads the
//! latest such event (one list, by field selector) and marks the Service
//! with it (`vmaas.io/allocation-retry`, a merge patch by a field manager
//! of its own, so the backend's server-side applies leave it be): MetalLB
//! sees a change and tries again, once per failure it reported.

use k8s_openapi::api::core::v1::{Event, Service};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;

use crate::cluster::Cluster;

/// The annotation that asks MetalLB to try again.
pub const RETRY_ANNOTATION: &str = "vmaas.io/allocation-retry";

/// MetalLB's latest refusal to give a Service an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// Its message.
    pub message: String,
    /// Which refusal it is (the event's uid and count).
    pub stamp: String,
}

/// MetalLB's latest refusal for Service `name` in `ns`, if any. A failure
/// to read the events is no refusal: the caller still says the address is
/// pending.
pub async fn failure(cluster: &Cluster, ns: &str, name: &str) -> Option<Failure> {
    let events: Api<Event> = Api::namespaced(cluster.client(), ns);
    let fields = format!("involvedObject.kind=Service,involvedObject.name={name},reason=AllocationFailed");
    let list = events.list(&ListParams::default().fields(&fields)).await.ok()?;
    let when = |e: &Event| e.last_timestamp.as_ref().map(|t| t.0).or(e.event_time.as_ref().map(|t| t.0));
    let e = list.items.into_iter().max_by_key(when)?;
    let stamp = format!("{}-{}", e.metadata.uid.as_deref().unwrap_or_default(), e.count.unwrap_or(1));
    Some(Failure { message: e.message.filter(|m| !m.is_empty())?, stamp })
}

/// Marks Service `name` in `ns` with refusal `f`, so MetalLB tries again
/// (a no-op once marked). Best effort: a failed patch is tried at the next
/// reconcile.
async fn retry(cluster: &Cluster, ns: &str, name: &str, f: &Failure) {
    let services: Api<Service> = Api::namespaced(cluster.client(), ns);
    let patch = json!({"metadata": {"annotations": { RETRY_ANNOTATION: f.stamp }}});
    let params = PatchParams { field_manager: Some("vmaas-allocation".into()), ..PatchParams::default() };
    if let Err(e) = services.patch(name, &params, &Patch::Merge(&patch)).await {
        tracing::debug!(service = name, namespace = ns, error = %e, "could not ask MetalLB to try again");
    }
}

/// `why`, with MetalLB's reason for Service `name` in `ns` if it gave one
/// (and MetalLB asked to try again).
pub async fn explained(cluster: &Cluster, ns: &str, name: &str, why: &str) -> String {
    match failure(cluster, ns, name).await {
        Some(f) => {
            retry(cluster, ns, name, &f).await;
            format!("{why}: MetalLB: {}", f.message)
        }
        None => why.to_owned(),
    }
}
