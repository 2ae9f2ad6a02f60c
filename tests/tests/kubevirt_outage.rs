//! A cluster whose API server stops answering: the kubevirt backend's VMs
//! are DEGRADED (`ClusterUnreachable`, since when and why) with the last
//! state the cluster showed, and READY again once it answers; nothing is
//! lost or made twice. The API server is stopped and started again on the
//! same port and etcd (`Cluster::stop_apiserver`). A server started while
//! its cluster is away does not take the images it has not listed yet for
//! missing ones: a create waits for them, and is UNAVAILABLE, not INVALID,
//! if they do not come.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::k8s::Cluster;
use vmaas_tests::kubevirt::{Controllers, IMAGES, VMS, data_source, env, objects_of, start};
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

    kubevirt.halt().await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_before_the_cluster_is_listed_waits_for_its_images() {
    let mut k = Cluster::start().await;
    k.namespace(IMAGES).await;
    data_source(&k, "test-guest").await;
    let kubevirt = Controllers::start(&k).await;
    kubevirt.halt().await;
    // The server's identity (the chart's account) is made while the API server answers.
    vmaas_tests::chart::server_kubeconfig(&k).await;
    k.stop_apiserver();
    let s = start(&k).await;
    let t = s.token("acme", false);
    let body = json!({"object": {"metadata": {"name": "early"}, "spec": {"template": "tiny"}}});

    // The catalog is not known: the create waits for it, then says so.
    let asked = Instant::now();
    let (st, err) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(body.clone())).await;
    assert_eq!((st, err["code"].as_u64()), (503, Some(14)), "UNAVAILABLE, not a missing image: {err}");
    assert!(err["message"].as_str().unwrap_or_default().contains("image catalog is not known yet"), "{err}");
    assert!(asked.elapsed() >= Duration::from_secs(5), "it waited for the cluster first: {:?}", asked.elapsed());
    let (_, list) = s.raw(Method::GET, &format!("{V1}/virtual_machines"), Some(&t), None).await;
    assert_eq!(list["items"].as_array().map(Vec::len), Some(0), "nothing half-made: {list}");

    // Once the cluster is back (and listed again, after the watch's backoff), the create is taken.
    k.start_apiserver().await;
    kubevirt.pause(false);
    let deadline = Instant::now() + Duration::from_secs(90);
    let vm = loop {
        let (st, vm) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(body.clone())).await;
        if st == 201 {
            break vm;
        }
        assert_eq!(st, 503, "only UNAVAILABLE until the images are listed: {vm}");
        assert!(Instant::now() < deadline, "the create is never taken: {vm}");
    };
    let id = vm["object"]["id"].as_str().unwrap_or_default().to_owned();
    vms::wait_ready(&s, &t, &id).await;
}
