//! The baseline of `vmaas-bench kubevirt` (issue 57, goal 3): a bare
//! kube-rs client applying server-side the same KubeVirt VMs vmaas
//! rendered and applied, from as many tasks as vmaas has clients, each to
//! the cluster vmaas put it on, on fresh API servers of the same kind (the
//! namespaces made beforehand, untimed). Its rate is the VMs over the time
//! from the first apply sent to the last one seen by the same watch that
//! times vmaas's phase ([`crate::kubevirt_watch`]), so that both phases pay
//! for the same measuring; the rate to the last apply acknowledged is kept
//! beside it.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use vmaas_tests::k8s::Cluster;

use crate::kubevirt_cost::Cost;
use crate::kubevirt_watch::{Seen, all_seen, follow};

/// The field manager of the bare applies.
const MANAGER: &str = "bench-bare";

/// The KubeVirt VirtualMachine resource.
fn vm_resource() -> ApiResource {
    ApiResource {
        group: "kubevirt.io".into(),
        version: "v1".into(),
        api_version: "kubevirt.io/v1".into(),
        kind: "VirtualMachine".into(),
        plural: "virtualmachines".into(),
    }
}

/// What vmaas applied of each KubeVirt VM on each of `clusters` (its
/// index, and the object as applied: kind, name, namespace, labels,
/// annotations, spec).
pub(crate) async fn capture(clusters: &[Cluster]) -> Vec<(usize, Value)> {
    let mut out = Vec::new();
    for (i, c) in clusters.iter().enumerate() {
        let (_, list) = c.request(reqwest::Method::GET, "/apis/kubevirt.io/v1/virtualmachines", None, None).await;
        for vm in list["items"].as_array().into_iter().flatten() {
            let m = &vm["metadata"];
            let metadata = json!({"name": m["name"], "namespace": m["namespace"], "labels": m["labels"], "annotations": m["annotations"]});
            out.push((i, json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": metadata, "spec": vm["spec"]})));
        }
    }
    out
}

/// A kube-rs client of the cluster whose kubeconfig is `path`.
async fn client(path: &Path) -> anyhow::Result<kube::Client> {
    let config = kube::config::Kubeconfig::read_from(path)?;
    let config = kube::Config::from_custom_kubeconfig(config, &kube::config::KubeConfigOptions::default()).await?;
    Ok(kube::Client::try_from(config)?)
}

/// What the bare client measured.
pub(crate) struct Bare {
    /// VMs per second, until the last was seen by the watch.
    pub seen: f64,
    /// VMs per second, until the last apply was acknowledged.
    pub acknowledged: f64,
    /// What the applies (and the watch) cost.
    pub cost: Cost,
}

/// Applies `objects` (each to its cluster among the fresh `clusters`) from
/// `tasks` tasks, watched as vmaas's phase is.
pub(crate) async fn rate(clusters: &[Cluster], objects: Vec<(usize, Value)>, tasks: usize) -> anyhow::Result<Bare> {
    let mut clients = Vec::new();
    for c in clusters {
        clients.push(client(&c.kubeconfig()).await?);
    }
    let namespaces: std::collections::BTreeSet<(usize, String)> =
        objects.iter().filter_map(|(i, o)| Some((*i, o["metadata"]["namespace"].as_str()?.to_owned()))).collect();
    for (i, ns) in namespaces {
        clusters[i].namespace(&ns).await;
    }
    let seen: Seen = Arc::default();
    for c in clusters {
        follow(&c.api(), seen.clone()).await?;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let ids: Vec<String> = objects.iter().filter_map(|(_, o)| Some(o["metadata"]["labels"]["vmaas.io/id"].as_str()?.to_owned())).collect();
    anyhow::ensure!(ids.len() == objects.len(), "an applied VM without its vmaas.io/id label");
    let (objects, clients, next) = (Arc::new(objects), Arc::new(clients), Arc::new(AtomicUsize::new(0)));
    let before = crate::kubevirt_cost::snapshot(clusters, None).await?;
    let started = Instant::now();
    let workers: Vec<_> = (0..tasks)
        .map(|_| {
            let (objects, clients, next) = (objects.clone(), clients.clone(), next.clone());
            tokio::spawn(async move {
                let (ar, params) = (vm_resource(), PatchParams::apply(MANAGER).validation_strict());
                loop {
                    let Some((i, obj)) = objects.get(next.fetch_add(1, Ordering::Relaxed)) else { return Ok::<_, anyhow::Error>(()) };
                    let (name, ns) = (obj["metadata"]["name"].as_str().unwrap_or_default(), obj["metadata"]["namespace"].as_str());
                    let api = kube::Api::<DynamicObject>::namespaced_with(clients[*i].clone(), ns.unwrap_or_default(), &ar);
                    api.patch(name, &params, &Patch::Apply(obj)).await.with_context(|| format!("applying {name}"))?;
                }
            })
        })
        .collect();
    for w in workers {
        w.await??;
    }
    let acknowledged = objects.len() as f64 / started.elapsed().as_secs_f64();
    let last = all_seen(&seen, ids.iter().map(String::as_str), started).await?;
    let seen = objects.len() as f64 / last.duration_since(started).as_secs_f64();
    Ok(Bare { seen, acknowledged, cost: before.until(&crate::kubevirt_cost::snapshot(clusters, None).await?) })
}
