//! A stopped VM moved between two clusters (its `spec.placement` changed):
//! its boot disk exported on east through KubeVirt's export proxy (played,
//! `--cluster-kubevirt-export-proxy east=…`), taken in on west through
//! CDI's upload proxy (played behind west's real kube-apiserver's
//! aggregator, `--cluster-cdi-upload-proxy west=…`): west's DataVolume
//! holds exactly the exported disk, west's KubeVirt VM boots from it (no
//! template: nothing cloned from the image), east keeps nothing of it, and
//! the VM starts on west. A VM to run is not moved; a move that fails
//! halfway (west's proxy not trusted) leaves the VM whole where it was and
//! is made once that is mended (a restart); a move from a cluster that
//! exports no disks leaves the VM where it is, saying why.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::chart::server_kubeconfig;
use vmaas_tests::k8s::{Cluster, KubeApi};
use vmaas_tests::kubevirt::{Controllers, IMAGES, VMS, data_source, node, objects_of};
use vmaas_tests::virt_export::{VirtExport, disk_of};
use vmaas_tests::vms::{self, TINY, V1};
use vmaas_tests::{Db, Server};

const DVS: &str = "/apis/cdi.kubevirt.io/v1beta1/datavolumes";

/// The catalog's image, one node and the controllers played on `k`.
async fn furnish(k: &Cluster) -> Controllers {
    k.namespace(IMAGES).await;
    data_source(k, "test-guest").await;
    node(k, "node-1", "4", "8Gi", json!({})).await;
    Controllers::start(k).await
}

/// The raw image in qcow2 `bytes`.
fn raw_of(bytes: &[u8]) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let (q, r) = (dir.path().join("d.qcow2"), dir.path().join("d.raw"));
    std::fs::write(&q, bytes).unwrap();
    let out = std::process::Command::new("qemu-img").args(["convert", "-f", "qcow2", "-O", "raw"]).arg(&q).arg(&r).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::read(&r).unwrap()
}

async fn patch(s: &Server, t: &str, id: &str, spec: Value) -> (u16, Value) {
    s.raw(Method::PATCH, &format!("{V1}/virtual_machines/{id}"), Some(t), Some(json!({"object": {"spec": spec}}))).await
}

/// Waits until `k` holds no KubeVirt VM of `id`.
async fn none_left(k: &KubeApi, id: &str, s: &Server) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !objects_of(k, VMS, id).await.is_empty() {
        assert!(Instant::now() < deadline, "the VM stayed on the cluster it left\n{}", s.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_vm_moves_to_another_cluster_with_its_boot_disk() {
    let east = Cluster::start().await;
    let exported = VirtExport::start(east.api()).await;
    let _east_kv = furnish(&east).await;
    let mut west = Cluster::start_aggregated().await;
    let uploads = vmaas_tests::cdi_upload::serve(&mut west).await;
    let _west_kv = furnish(&west).await;
    let (ek, wk) = (server_kubeconfig(&east).await, server_kubeconfig(&west).await);
    let (ea, wa) = (format!("east={}", ek.display()), format!("west={}", wk.display()));
    let (export_proxy, upload_proxy) = (format!("east={}", exported.url), format!("west={}", uploads.url));
    // First with a CA that did not sign west's upload proxy: moves to west fail halfway.
    let (wrong, _) = vmaas_tests::aggregated::certificate(west.dir(), "not-the-upload-proxy");
    let args = |ca: &std::path::Path| {
        let each = ["--backend", "kubevirt", "--cluster", &ea, "--cluster", &wa, "--default-image", "test-guest"];
        let mut args: Vec<String> = each.iter().map(|a| a.to_string()).collect();
        args.extend(["--cluster-kubevirt-export-proxy".into(), export_proxy.clone(), "--cluster-cdi-upload-proxy".into()]);
        args.extend([upload_proxy.clone(), "--cluster-cdi-upload-proxy-ca".into(), format!("west={}", ca.display())]);
        args
    };
    let first = args(&wrong);
    let first: Vec<&str> = first.iter().map(String::as_str).collect();
    let mut s = Server::start_with(Db::Sqlite, &first).await.expect("sqlite");
    vms::publish(&s, TINY);
    let t = s.token("acme", false);
    let (e, w) = (east.api(), west.api());

    let body = json!({"object": {"metadata": {"name": "mover"}, "spec": {"template": "tiny", "placement": {"cluster": "east"}}}});
    let (st, vm) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(body)).await;
    assert_eq!(st, 201, "{vm}");
    let id = vm["object"]["id"].as_str().unwrap().to_owned();
    assert_eq!(vms::wait_ready(&s, &t, &id).await["status"]["cluster"], "east");
    let on_east = objects_of(&e, VMS, &id).await.remove(0);
    let claim = on_east["spec"]["template"]["spec"]["volumes"][0]["dataVolume"]["name"].as_str().unwrap().to_owned();

    // A VM to run is not moved: refused, naming the field; nothing changes.
    let (st, b) = patch(&s, &t, &id, json!({"placement": {"cluster": "west"}})).await;
    assert_eq!((st, b["details"][0]["field"].as_str()), (400, Some("object.spec.placement")), "{b}");
    assert!(b.to_string().contains("stopped"), "{b}");

    // Stopped with the new placement, west's upload proxy not trusted: the
    // move fails halfway, the VM stays whole on east, nothing on west.
    let (st, b) = patch(&s, &t, &id, json!({"state": "stopped", "placement": {"cluster": "west"}})).await;
    assert_eq!(st, 200, "{b}");
    let failed = vms::wait_until(&s, &t, &id, "the move failing", 60, |v| v.to_string().contains("taking the moved disk")).await;
    assert_eq!((failed["status"]["cluster"].as_str(), vms::state(&failed)), (Some("east"), "VIRTUAL_MACHINE_STATE_STOPPED"), "{failed:#}");
    assert_eq!((objects_of(&e, VMS, &id).await.len(), objects_of(&w, VMS, &id).await.len()), (1, 0));
    assert!(uploads.received.lock().unwrap().is_empty(), "nothing reached west");

    // Trusted after a restart: moved, its boot disk with it; what the
    // failed tries left on west (a DataVolume, if the stop caught one) is
    // replaced.
    s.stop().await;
    let fetched = exported.served();
    s.set_extra(&args(&uploads.ca));
    s.launch_again().await;
    let moved = vms::wait_until(&s, &t, &id, "STOPPED on west", 60, |v| {
        v["status"]["cluster"] == "west" && vms::state(v) == "VIRTUAL_MACHINE_STATE_STOPPED"
    })
    .await;
    assert_eq!(moved["spec"]["placement"], json!({"cluster": "west"}), "{moved:#}");
    none_left(&e, &id, &s).await;
    assert_eq!(exported.served(), fetched + 1, "the disk was fetched once more through east's export proxy");
    let dvs = objects_of(&w, DVS, &id).await;
    assert_eq!((dvs.len(), &dvs[0]["spec"]["source"]), (1, &json!({"upload": {}})), "{dvs:#?}");
    let (ns, dv) = (dvs[0]["metadata"]["namespace"].as_str().unwrap(), dvs[0]["metadata"]["name"].as_str().unwrap());
    let received = uploads.received.lock().unwrap().get(&format!("{ns}/{dv}")).cloned().expect("west's upload proxy took the disk");
    assert!(raw_of(&received) == disk_of(&claim), "west holds east's boot disk {claim}, as exported");
    let on_west = objects_of(&w, VMS, &id).await.remove(0);
    assert_eq!(on_west["spec"]["template"]["spec"]["volumes"][0]["dataVolume"]["name"], dv, "{on_west:#}");
    assert!(on_west["spec"]["dataVolumeTemplates"].as_array().is_none_or(Vec::is_empty), "nothing is cloned from the image: {on_west:#}");

    // It runs on west.
    assert_eq!(patch(&s, &t, &id, json!({"state": "started"})).await.0, 200);
    assert_eq!(vms::wait_ready(&s, &t, &id).await["status"]["cluster"], "west");
    assert!(objects_of(&e, VMS, &id).await.is_empty(), "nothing was made on east again");

    // Back to east: west exports no disks, so the VM stays whole on west, saying why.
    // From the CLI, whose --wait fails saying so.
    let out = s.cli(&t, &["vm", "move", "mover", "--cluster", "east", "--wait", "--timeout", "60s"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("NotMoved") && err.contains("does not export disks"), "{err}");
    let stays = vms::wait_until(&s, &t, &id, "NotMoved", 60, |v| v.to_string().contains("NotMoved")).await;
    assert_eq!(stays["spec"]["placement"], json!({"cluster": "east"}), "{stays:#}");
    assert_eq!(stays["status"]["cluster"], "west", "{stays:#}");
    assert!(stays.to_string().contains("cluster west does not export disks"), "{stays:#}");
    assert_eq!((objects_of(&e, VMS, &id).await.len(), objects_of(&w, VMS, &id).await.len()), (0, 1));
    assert_eq!(objects_of(&w, DVS, &id).await.len(), 1, "its disk is kept");

    // Deleted: nothing of it is left on west, its moved disk included.
    let (st, _) = s.raw(Method::DELETE, &format!("{V1}/virtual_machines/{id}"), Some(&t), None).await;
    assert!(st == 200 || st == 202, "{st}");
    none_left(&w, &id, &s).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !objects_of(&w, DVS, &id).await.is_empty() {
        assert!(Instant::now() < deadline, "the moved disk outlived its VM\n{}", s.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
