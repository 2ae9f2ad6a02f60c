//! A cluster whose API server stops answering: the kubevirt backend's VMs
//! are DEGRADED (`ClusterUnreachable`, since when and why) with the last
//! state the cluster showed, and READY again once it answers; nothing is
//! lost or made twice. The API server is stopped and started again on the
//! same port and etcd (`Cluster::stop_apiserver`).

use serde_json::Value;
use vmaas_tests::kubevirt::{VMS, env, objects_of};
use vmaas_tests::vms::{self, V1};

/// The DEGRADED condition of VM `v`, if it is true.
fn degraded(v: &Value) -> Option<Value> {
    let conditions = v["status"]["conditions"].as_array()?;
    conditions.iter().find(|c| c["type"] == "VIRTUAL_MACHINE_CONDITION_TYPE_DEGRADED" && c["status"] == "CONDITION_STATUS_TRUE").cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_that_stops_answering_degrades_its_vms_until_it_is_back() {
    let (mut k, kubevirt, s) = env().await;
    let t = s.token("acme", false);
    let id = vms::create(&s, &t, "web", "tiny").await;
    let ready = vms::wait_ready(&s, &t, &id).await;
    let address = ready["status"]["internalIP"].clone();

    kubevirt.pause(true);
    k.stop_apiserver();
    // An apply under way when the API server goes may fail first (DEGRADED
    // BackendError, retried); the health check then names the cause.
    let down = vms::wait_until(&s, &t, &id, "DEGRADED ClusterUnreachable while the cluster is away", 60, |v| {
        degraded(v).is_some_and(|d| d["reason"] == "ClusterUnreachable")
    })
    .await;
    let why = degraded(&down).unwrap();
    assert_eq!(why["reason"], "ClusterUnreachable", "{why}");
    assert!(why["message"].as_str().unwrap_or_default().contains("has not answered since"), "{why}");
    assert_eq!(down["status"]["internalIP"], address, "the last state the cluster showed: {down:#}");
    // The API still answers for it, and takes changes for when the cluster is back.
    let (st, _) = s.raw(reqwest::Method::GET, &format!("{V1}/virtual_machines/{id}"), Some(&t), None).await;
    assert_eq!(st, 200);

    k.start_apiserver().await;
    kubevirt.pause(false);
    let back = vms::wait_until(&s, &t, &id, "READY once the cluster answers", 90, |v| {
        v["status"]["state"] == "VIRTUAL_MACHINE_STATE_READY" && degraded(v).is_none()
    })
    .await;
    assert_eq!(back["status"]["internalIP"], address);
    assert_eq!(objects_of(&k, VMS, &id).await.len(), 1, "one KubeVirt VM: nothing made twice");
}
