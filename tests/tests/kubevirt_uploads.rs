//! Image uploads on the kubevirt backend, the way `virtctl image-upload`
//! does them: a DataVolume with an `upload` source, a token from CDI's
//! aggregated `UploadTokenRequest` API (played cdi-apiserver behind the real
//! kube-apiserver's aggregator, in a namespace the test makes), and the file
//! streamed to CDI's upload proxy (played on loopback, TLS trusted through
//! `--cdi-upload-proxy-ca`). The bytes CDI receives are the bytes uploaded;
//! a file with another SHA-256 than asked is refused and a right one then
//! replaces it; a VM boots from the upload. With this host and a cluster
//! as two clusters of one server, an upload is made on both, and a stopped
//! VM of this host moves to the cluster with its disk (`vmaas vm move`).

use reqwest::Method;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use vmaas_tests::k8s::Cluster;
use vmaas_tests::kubevirt::{Controllers, IMAGES, PICK, api_until, data_source, env_with, objects_of, the_vm};
use vmaas_tests::vms::{self, V1};
use vmaas_tests::{Db, Server};

/// Creates image `name` to be uploaded, asking for `sha256`; its id.
async fn image(s: &Server, t: &str, name: &str, sha256: &str) -> String {
    let body = json!({"object": {"metadata": {"name": name}, "spec": {"sha256": sha256}}});
    let (st, img) = s.raw(Method::POST, &format!("{V1}/images"), Some(t), Some(body)).await;
    assert_eq!(st, 201, "{img}");
    img["object"]["id"].as_str().unwrap().to_owned()
}

/// PUTs `data` as image `id`'s file: the status and the answer.
async fn put(s: &Server, t: &str, id: &str, data: Vec<u8>) -> (u16, Value) {
    let rsp = reqwest::Client::new().put(format!("{}{V1}/images/{id}/content", s.endpoint)).bearer_auth(t).body(data).send().await.unwrap();
    (rsp.status().as_u16(), rsp.json().await.unwrap_or_default())
}

/// Waits until the server has listed cluster `name` (it lists a cluster
/// that did not answer at its start in the background; until then an
/// upload to it is refused, as what it holds is not known).
async fn listed(s: &Server, name: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let (_, health) = s.raw(Method::GET, "/healthz", None, None).await;
        if health["backend"]["details"]["clusters"][name]["reachable"] == true {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "cluster {name} never listed: {health:#}\n{}", s.log());
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

fn hex(data: &[u8]) -> String {
    format!("{:x}", Sha256::digest(data))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_goes_through_cdis_token_api_and_upload_proxy() {
    let mut k = Cluster::start_aggregated().await;
    let proxy = vmaas_tests::cdi_upload::serve(&mut k).await;
    let ca = proxy.ca.display().to_string();
    let (k, _kubevirt, s) = env_with(k, &["--cdi-upload-proxy", &proxy.url, "--cdi-upload-proxy-ca", &ca]).await;
    vms::publish(&s, PICK);
    let t = s.token("acme", false);
    let state = |v: Option<&Value>| v.and_then(|v| v["status"]["state"].as_str()).unwrap_or("").to_owned();
    let data: Vec<u8> = (0..300_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();

    // Waiting for its file, then uploaded: CDI got exactly the bytes.
    let id = image(&s, &t, "mine", &hex(&data)).await;
    let waiting = |v: Option<&Value>| v.and_then(|v| v["status"]["message"].as_str()).is_some_and(|m| m.contains("waiting for the upload"));
    let pending = api_until(&s, &t, &format!("images/{id}"), "waiting for the upload", waiting).await;
    assert_eq!(state(Some(&pending)), "IMAGE_STATE_PENDING", "{pending:#}");
    let (st, b) = put(&s, &t, &id, data.clone()).await;
    assert_eq!(st, 200, "{b}\n{}", s.log());
    api_until(&s, &t, &format!("images/{id}"), "READY", |v| state(v) == "IMAGE_STATE_READY").await;
    let dv = objects_of(&k, "/apis/cdi.kubevirt.io/v1beta1/datavolumes", &id).await;
    assert_eq!((dv.len(), &dv[0]["spec"]["source"]), (1, &json!({"upload": {}})), "{dv:#?}");
    let pvc = format!("{IMAGES}/{}", dv[0]["metadata"]["name"].as_str().unwrap());
    assert!(proxy.received.lock().unwrap().get(&pvc) == Some(&data), "CDI received other bytes than uploaded for {pvc}");

    // Another SHA-256 than asked: refused, naming the content; the right file then replaces it.
    let wanted: Vec<u8> = data.iter().rev().copied().collect();
    let other = image(&s, &t, "checked", &hex(&wanted)).await;
    let (st, e) = put(&s, &t, &other, data.clone()).await;
    assert_eq!(st, 400, "{e}");
    assert_eq!(e["details"][0]["field"], "content", "{e}");
    assert!(e["message"].as_str().unwrap_or_default().contains("SHA-256"), "{e}");
    api_until(&s, &t, &format!("images/{other}"), "FAILED", |v| state(v) == "IMAGE_STATE_FAILED").await;
    assert!(objects_of(&k, "/apis/cdi.kubevirt.io/v1beta1/datavolumes", &other).await.is_empty(), "the refused file's volume is gone");
    let (st, b) = put(&s, &t, &other, wanted.clone()).await;
    assert_eq!(st, 200, "{b}");
    api_until(&s, &t, &format!("images/{other}"), "READY", |v| state(v) == "IMAGE_STATE_READY").await;

    // A VM boots from the upload: its root disk is cloned from the image's DataSource.
    let body = json!({"object": {"metadata": {"name": "up"}, "spec": {"template": "pick", "template_parameters": {"vm_image": {"value": "mine"}}}}});
    let (st, vm) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(body)).await;
    assert_eq!(st, 201, "{vm}");
    let vm = vm["object"]["id"].as_str().unwrap().to_owned();
    vms::wait_ready(&s, &t, &vm).await;
    let root = the_vm(&k, &vm).await["spec"]["dataVolumeTemplates"][0]["spec"]["sourceRef"].clone();
    assert_eq!(root["name"], dv[0]["metadata"]["name"], "{root}");
}

/// This host and a cluster as the two clusters of one server: an upload is
/// kept by the server once and made on both (the host computes its SHA-256
/// and size, CDI receives exactly the bytes); a file another SHA-256 than
/// asked is refused naming the cluster that refused it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_is_made_on_every_cluster() {
    let mut k = Cluster::start_aggregated().await;
    let proxy = vmaas_tests::cdi_upload::serve(&mut k).await;
    k.namespace(IMAGES).await;
    data_source(&k, "test-guest").await;
    let _kubevirt = Controllers::start(&k).await;
    let (kube, ca) = (format!("k8s={}", vmaas_tests::chart::server_kubeconfig(&k).await.display()), proxy.ca.display().to_string());
    let host = vmaas_tests::qemu_args(&vmaas_tests::images_dir());
    let mut args = vec!["--backend", "kubevirt", "--cluster", "dev=host", "--cluster", &kube, "--default-image", "test-guest"];
    args.extend(["--cdi-upload-proxy", &proxy.url, "--cdi-upload-proxy-ca", &ca]);
    args.extend(host.iter().map(String::as_str));
    let s = Server::start_with(Db::Sqlite, &args).await.expect("sqlite");
    listed(&s, "k8s").await;
    let t = s.token("acme", false);
    let data: Vec<u8> = (0..204_800u32).map(|i| (i.wrapping_mul(2_246_822_519) >> 24) as u8).collect();

    let id = image(&s, &t, "both", &hex(&data)).await;
    let (st, b) = put(&s, &t, &id, data.clone()).await;
    assert_eq!(st, 200, "{b}\n{}", s.log());
    let img =
        api_until(&s, &t, &format!("images/{id}"), "READY", |v| v.and_then(|v| v["status"]["state"].as_str()) == Some("IMAGE_STATE_READY"))
            .await;
    assert_eq!(
        (img["status"]["sha256"].as_str(), img["status"]["size_bytes"].as_u64()),
        (Some(hex(&data).as_str()), Some(204_800)),
        "{img:#}"
    );
    let dv = objects_of(&k.api(), "/apis/cdi.kubevirt.io/v1beta1/datavolumes", &id).await;
    assert_eq!(dv.len(), 1, "{dv:#?}");
    let pvc = format!("{IMAGES}/{}", dv[0]["metadata"]["name"].as_str().unwrap());
    assert!(proxy.received.lock().unwrap().get(&pvc) == Some(&data), "the cluster's CDI received other bytes than uploaded");

    let other = image(&s, &t, "checked", &hex(b"something else")).await;
    let (st, e) = put(&s, &t, &other, data).await;
    assert_eq!(st, 400, "{e}");
    let message = e["message"].as_str().unwrap_or_default();
    assert!(e["details"][0]["field"] == "content" && message.contains("on cluster dev") && message.contains("SHA-256"), "{e}");
    assert!(objects_of(&k.api(), "/apis/cdi.kubevirt.io/v1beta1/datavolumes", &other).await.is_empty(), "nothing sent on once refused");

    // VMs of this host moved to the cluster (`vmaas vm move`). One that
    // never ran has no disk: it is made there from its image.
    vms::publish(&s, vmaas_tests::vms::TINY);
    let create = |name: &str, state: &str| json!({"object": {"metadata": {"name": name}, "spec": {"template": "tiny", "state": state, "placement": {"cluster": "dev"}}}});
    let (st, fresh) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(create("fresh", "stopped"))).await;
    assert_eq!(st, 201, "{fresh}");
    let fresh = fresh["object"]["id"].as_str().unwrap().to_owned();
    vms::wait_state(&s, &t, &format!("{V1}/virtual_machines/{fresh}"), "VIRTUAL_MACHINE_STATE_STOPPED", 60).await;
    let out = s.cli(&t, &["vm", "move", "fresh", "--cluster", "k8s", "--wait", "--timeout", "90s"]);
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stderr), s.log());
    let on_k8s = objects_of(&k.api(), vmaas_tests::kubevirt::VMS, &fresh).await;
    assert_eq!(on_k8s.len(), 1, "made on the cluster");
    assert_eq!(on_k8s[0]["spec"]["dataVolumeTemplates"][0]["spec"]["sourceRef"]["name"], "test-guest", "{on_k8s:#?}");
    assert!(objects_of(&k.api(), "/apis/cdi.kubevirt.io/v1beta1/datavolumes", &fresh).await.is_empty(), "nothing carried");

    // One that ran: its disk exported here, taken in through the cluster's
    // upload proxy, with what its guest wrote.
    let (st, vm) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(create("mover", "started"))).await;
    assert_eq!(st, 201, "{vm}");
    let vm = vm["object"]["id"].as_str().unwrap().to_owned();
    vms::wait_ready(&s, &t, &vm).await;
    let wrote = vms::console(&s, &t, &vm, "echo moved-$((6*7)) > /data/marker && sync && echo wrote-marker");
    assert!(wrote.contains("wrote-marker"), "{wrote}");
    let out = s.cli(&t, &["vm", "move", "mover", "--cluster", "k8s", "--wait", "--timeout", "90s"]);
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stderr), s.log());
    let (_, moved) = s.raw(Method::GET, &format!("{V1}/virtual_machines/{vm}"), Some(&t), None).await;
    assert_eq!(moved["object"]["status"]["cluster"], "k8s", "{moved:#}");
    let dvs = objects_of(&k.api(), "/apis/cdi.kubevirt.io/v1beta1/datavolumes", &vm).await;
    assert_eq!(dvs.len(), 1, "{dvs:#?}");
    let pvc = format!("{}/{}", dvs[0]["metadata"]["namespace"].as_str().unwrap(), dvs[0]["metadata"]["name"].as_str().unwrap());
    let received = proxy.received.lock().unwrap().get(&pvc).cloned().expect("the cluster's CDI took the disk");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("moved.qcow2"), received).unwrap();
    let raw = dir.path().join("moved.raw");
    let convert = ["convert", "-f", "qcow2", "-O", "raw"];
    let out = std::process::Command::new("qemu-img").args(convert).arg(dir.path().join("moved.qcow2")).arg(&raw).output().unwrap();
    assert!(out.status.success(), "the moved disk is a qcow2: {}", String::from_utf8_lossy(&out.stderr));
    let raw = std::fs::read(raw).unwrap();
    assert!(raw.windows(8).any(|w| w == b"moved-42"), "the moved disk holds what the guest wrote");
    assert!(objects_of(&k.api(), vmaas_tests::kubevirt::VMS, &vm).await.len() == 1, "made on the cluster");
}
