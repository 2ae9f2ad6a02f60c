//! Pruning imported images: one no VM or volume uses goes once unused for
//! `--image-retention`, one in use never does; `vmaas image prune
//! --dry-run` lists what would go and removes nothing; and a VM created
//! while a prune pass runs either keeps its image or is refused, never
//! left without it.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::Server;
use vmaas_tests::files::FileServer;
use vmaas_tests::vms::{V1, publish};

/// Imports `name` from `url` as tenant `t` and waits until it is READY; its id.
async fn imported(s: &Server, t: &str, name: &str, url: &str) -> String {
    let body = json!({"object": {"metadata": {"name": name}, "spec": {"source": url}}});
    let (st, v) = s.raw(Method::POST, &format!("{V1}/images"), Some(t), Some(body)).await;
    assert_eq!(st, 201, "{v}");
    let id = v["object"]["id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, v) = s.raw(Method::GET, &format!("{V1}/images/{id}"), Some(t), None).await;
        if v["object"]["status"]["state"] == "IMAGE_STATE_READY" {
            return id;
        }
        assert!(Instant::now() < deadline, "{name} never imported: {v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn status(s: &Server, t: &str, id: &str) -> u16 {
    s.raw(Method::GET, &format!("{V1}/images/{id}"), Some(t), None).await.0
}

async fn files() -> (tempfile::TempDir, FileServer) {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new("qemu-img")
        .args(["create", "-q", "-f", "qcow2"])
        .arg(dir.path().join("small.qcow2"))
        .arg("16M")
        .output()
        .unwrap();
    assert!(out.status.success());
    let web = FileServer::start(dir.path().to_owned()).await;
    (dir, web)
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unused_image_is_pruned_after_the_retention_and_a_used_one_never() {
    let s = Server::start_qemu_with(&["--image-retention", "2s", "--image-source-allow", "127.0.0.1"]).await;
    let t = s.token("acme", false);
    let (_dir, web) = files().await;
    let url = format!("{}/small.qcow2", web.url);
    let keep = imported(&s, &t, "keep", &url).await;
    let body = json!({"object": {"metadata": {"name": "data"}, "spec": {"size": "32Mi", "source_image": "keep"}}});
    assert_eq!(s.raw(Method::POST, &format!("{V1}/volumes"), Some(&t), Some(body)).await.0, 201);
    let drop = imported(&s, &t, "drop", &url).await;
    let (_, img) = s.raw(Method::GET, &format!("{V1}/images/{drop}"), Some(&t), None).await;
    assert!(img["object"]["status"]["unused_since"].is_string(), "an unused image says since when: {img}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while status(&s, &t, &drop).await != 404 {
        assert!(Instant::now() < deadline, "the unused image was never pruned\n{}", s.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(!s.data_dir.join("images").join(&drop).exists(), "its files went with it");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (st, img) = s.raw(Method::GET, &format!("{V1}/images/{keep}"), Some(&t), None).await;
    assert_eq!(st, 200, "an image a volume uses is never pruned");
    assert_eq!(img["object"]["status"]["references"], 1, "{img}");
    assert!(img["object"]["status"].get("unused_since").is_none(), "{img}");
}

const PICK: &str =
    "id: pick\nparameters:\n  - {name: vm_image, type: string, default: {value: test-guest}}\nspec_defaults:\n  memory: 256Mi\n";

#[tokio::test(flavor = "multi_thread")]
async fn a_dry_run_removes_nothing_and_a_vm_created_during_a_prune_keeps_its_image() {
    let s = Server::start_qemu_with(&["--image-source-allow", "127.0.0.1"]).await;
    publish(&s, PICK);
    let (a, b) = (s.token("acme", false), s.token("globex", false));
    let (_dir, web) = files().await;
    let url = format!("{}/small.qcow2", web.url);
    let idle = imported(&s, &a, "idle", &url).await;
    let theirs = imported(&s, &b, "theirs", &url).await;

    let out = s.cli(&a, &["image", "prune", "--dry-run"]);
    let (text, err) = (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
    assert!(out.status.success() && err.contains("would prune 1 image(s)") && text.contains("idle"), "{err}{text}");
    assert!(!text.contains("theirs"), "another tenant's images are not its to prune: {text}");
    assert_eq!(status(&s, &a, &idle).await, 200, "a dry run removes nothing");
    let out = s.cli(&a, &["image", "prune", "-o", "json"]);
    let pruned: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(pruned.to_string().contains("\"idle\""), "{pruned}");
    assert_eq!(status(&s, &a, &idle).await, 404);
    assert_eq!(status(&s, &b, &theirs).await, 200, "another tenant's image is untouched");

    // VMs created while prune passes run: each either has its image, or was refused.
    let (mut kept, mut refused) = (0, 0);
    for i in 0..8 {
        let name = format!("race-{i}");
        let id = imported(&s, &a, &name, &url).await;
        let vm = json!({"object": {"metadata": {"name": format!("vm-{i}")},
            "spec": {"template": "pick", "state": "stopped", "template_parameters": {"vm_image": {"value": name}}}}});
        let (vms_path, prune_path) = (format!("{V1}/virtual_machines"), format!("{V1}/images:prune"));
        let create = s.raw(Method::POST, &vms_path, Some(&a), Some(vm));
        let prune = s.raw(Method::POST, &prune_path, Some(&a), None);
        let ((st, v), (pst, pruned)) = tokio::join!(create, prune);
        assert_eq!(pst, 200, "{pruned}");
        let image_there = status(&s, &a, &id).await == 200;
        match st {
            201 => {
                assert!(image_there, "round {i}: a VM was created and its image pruned: {pruned}");
                kept += 1;
            }
            400 | 409 => {
                assert!(!image_there, "round {i}: refused although the image is there: {v}");
                refused += 1;
            }
            other => panic!("round {i}: {other} {v}"),
        }
    }
    assert_eq!(kept + refused, 8);
    eprintln!("VMs created during a prune: {kept} kept their image, {refused} were refused");
}
