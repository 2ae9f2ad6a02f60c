//! Exports on the kubevirt backend against a real kube-apiserver with
//! KubeVirt's CRDs: a stopped VM's disk and a snapshot are exported
//! through a `VirtualMachineExport` with a token Secret; the test plays
//! KubeVirt's export controller (a Ready status with a link on a made-up
//! host) and its export proxy on loopback, which the server is given
//! (`--kubevirt-export-proxy`). The download is one qcow2 file holding the
//! claim's image, with its SHA-256; the export objects are gone after.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use vmaas_tests::k8s::Cluster;
use vmaas_tests::kubevirt::{env_with, objects_of, ready_snapshot, the_vm};
use vmaas_tests::virt_export::{EXPORTS, VirtExport, disk_of};
use vmaas_tests::vms::{self, V1};

/// The raw image inside qcow2 `bytes`, by `qemu-img convert`.
fn raw_of(bytes: &[u8]) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let (q, r) = (dir.path().join("d.qcow2"), dir.path().join("d.raw"));
    std::fs::write(&q, bytes).unwrap();
    let info = std::process::Command::new("qemu-img").args(["info", "--output=json"]).arg(&q).output().unwrap();
    let info: Value = serde_json::from_slice(&info.stdout).unwrap();
    assert_eq!(info["format"], "qcow2", "{info}");
    assert!(info.get("backing-filename").is_none(), "self-contained: {info}");
    let out = std::process::Command::new("qemu-img").args(["convert", "-f", "qcow2", "-O", "raw"]).arg(&q).arg(&r).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::read(&r).unwrap()
}

/// Downloads `path` (under the API) with `token`: its bytes, after checking `X-Checksum-Sha256`.
async fn download(s: &vmaas_tests::Server, token: &str, path: &str) -> Vec<u8> {
    let r = reqwest::Client::new().get(format!("{}{V1}/{path}", s.endpoint)).bearer_auth(token).send().await.unwrap();
    if r.status() != 200 {
        panic!("{path}: {} {}\n{}", r.status(), r.text().await.unwrap_or_default(), s.log());
    }
    let said = r.headers().get("x-checksum-sha256").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let body = r.bytes().await.unwrap().to_vec();
    assert_eq!(said, format!("{:x}", Sha256::digest(&body)), "the checksum is the body's");
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_vms_disk_and_a_snapshot_are_exported_through_kubevirt() {
    let k = Cluster::start().await;
    let played = VirtExport::start(k.api()).await;
    let (k, _kubevirt, s) = env_with(k, &["--kubevirt-export-proxy", &played.url]).await;
    let t = s.token("acme", false);
    let vm = vms::create(&s, &t, "db", "tiny").await;
    vms::wait_ready(&s, &t, &vm).await;
    let kv = the_vm(&k, &vm).await;
    let ns = kv["metadata"]["namespace"].as_str().unwrap().to_owned();
    let claim = kv["spec"]["template"]["spec"]["volumes"][0]["dataVolume"]["name"].as_str().unwrap().to_owned();

    // A running VM's disk is not exported; nothing is made.
    let (st, e) = s.raw(Method::GET, &format!("{V1}/virtual_machines/{vm}/export"), Some(&t), None).await;
    assert_eq!((st, e["details"][0]["field"].as_str()), (400, Some("spec.state")), "{e}");
    assert!(objects_of(&k, EXPORTS, &vm).await.is_empty());
    let stop = json!({"object": {"spec": {"state": "stopped"}}});
    let (st, b) = s.raw(Method::PATCH, &format!("{V1}/virtual_machines/{vm}"), Some(&t), Some(stop)).await;
    assert_eq!(st, 200, "{b}");
    vms::wait_state(&s, &t, &format!("{V1}/virtual_machines/{vm}"), "VIRTUAL_MACHINE_STATE_STOPPED", 30).await;

    // Through KubeVirt: the claim's image, as one qcow2 file.
    let body = download(&s, &t, &format!("virtual_machines/{vm}/export")).await;
    assert!(raw_of(&body) == disk_of(&claim), "the export holds the boot claim {claim}'s image");
    assert_eq!(played.served(), 1, "fetched once, with the export's token");
    let export = played.readied().remove(0);
    assert_eq!(export["metadata"]["namespace"], ns.as_str());
    assert_eq!(export["metadata"]["labels"]["vmaas.io/id"], vm.as_str(), "{export}");
    assert_eq!(export["spec"]["source"], json!({"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": kv["metadata"]["name"]}));
    gone(&k, &ns, &vm).await;

    // A snapshot's disk, through an export of its VirtualMachineSnapshot.
    let (id, made) = ready_snapshot(&k, &s, &t, "before", "db").await;
    let body = download(&s, &t, &format!("compute_instance_snapshots/{id}/export?disk=rootdisk")).await;
    assert!(raw_of(&body) == disk_of(&claim), "the snapshot's export holds its boot claim's image");
    assert_eq!(played.served(), 2);
    let export = played.readied().remove(1);
    assert_eq!(export["spec"]["source"]["kind"], "VirtualMachineSnapshot");
    assert_eq!(export["spec"]["source"]["name"], made["metadata"]["name"]);
    gone(&k, &ns, &id).await;

    // Another tenant exports nothing of acme's.
    let other = s.token("globex", false);
    let (st, _) = s.raw(Method::GET, &format!("{V1}/virtual_machines/{vm}/export"), Some(&other), None).await;
    assert_eq!(st, 404);
    assert_eq!(played.served(), 2);
}

/// Waits until the export objects of `id` (the export and its token Secret) in `ns` are deleted.
async fn gone(k: &Cluster, ns: &str, id: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let exports = objects_of(k, EXPORTS, id).await;
        let secrets = objects_of(k, &format!("/api/v1/namespaces/{ns}/secrets"), id).await;
        if exports.is_empty() && secrets.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "export objects left: {exports:?} {secrets:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
