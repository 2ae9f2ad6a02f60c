//! Images tenants import, end to end: from a URL on a loopback file server
//! (checked against its SHA-256) or uploaded with the CLI (a progress bar),
//! refused when they would read other host files (a qcow2 backing file) or
//! are no disk at all, private to their tenant, counted and kept while used;
//! and a VM that names an image still importing waits for it, then boots
//! from it by BIOS (the imported disk carries its own boot loader).

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::Server;
use vmaas_tests::files::FileServer;
use vmaas_tests::files::sha256_of;
use vmaas_tests::images::{FETCH_FAILED, import, settled};
use vmaas_tests::objects::post;
use vmaas_tests::vms::{V1, publish, wait_ready, wait_until};

/// The tests' file servers listen on loopback, which images are fetched
/// from only when an administrator allows it.
const LOOPBACK_FILES: [&str; 2] = ["--image-source-allow", "127.0.0.1"];

fn qemu_img(args: &[&str]) {
    let out = std::process::Command::new("qemu-img").args(args).output().expect("qemu-img");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[tokio::test(flavor = "multi_thread")]
async fn imports_are_checked_private_and_kept_while_used() {
    let s = Server::start_qemu_with(&LOOPBACK_FILES).await;
    let (a, b) = (s.token("acme", false), s.token("globex", false));
    let files = tempfile::tempdir().unwrap();
    let f = |n: &str| files.path().join(n);
    let p = |n: &str| f(n).to_string_lossy().into_owned();
    qemu_img(&["create", "-q", "-f", "qcow2", &p("good.qcow2"), "64M"]);
    qemu_img(&["create", "-q", "-u", "-f", "qcow2", "-F", "raw", "-b", "/etc/hostname", &p("backing.qcow2"), "64M"]);
    std::fs::write(f("page.html"), "<!DOCTYPE html><html><body>moved</body></html>").unwrap();
    std::fs::write(f("disk.raw"), vec![7u8; 2 << 20]).unwrap();
    let web = FileServer::start(files.path().to_owned()).await;
    let url = |n: &str| format!("{}/{n}", web.url);

    // A qcow2 from a URL, its SHA-256 checked: READY, stored as fetched.
    let good = import(&s, &a, "good", json!({"source": url("good.qcow2"), "sha256": sha256_of(&f("good.qcow2"))})).await;
    let img = settled(&s, &a, &good).await;
    assert_eq!(img["status"]["state"], "IMAGE_STATE_READY", "{img}");
    assert_eq!((img["status"]["format"].as_str(), img["status"]["virtual_size"].as_u64()), (Some("qcow2"), Some(64 << 20)));
    let stored = s.data_dir.join("images").join(&good).join("disk.qcow2");
    assert_eq!(sha256_of(&stored), sha256_of(&f("good.qcow2")));
    assert_eq!(img["status"]["sha256"], sha256_of(&f("good.qcow2")));

    // What fails, fails with its reason, and leaves no disk behind.
    for (name, spec, why) in [
        ("bad-sum", json!({"source": url("good.qcow2"), "sha256": "0".repeat(64)}), "checksum mismatch"),
        ("backing", json!({"source": url("backing.qcow2")}), "backing file"),
        ("page", json!({"source": url("page.html")}), "HTML"),
        ("missing", json!({"source": url("nothing.qcow2")}), FETCH_FAILED),
    ] {
        let id = import(&s, &a, name, spec).await;
        let img = settled(&s, &a, &id).await;
        assert_eq!(img["status"]["state"], "IMAGE_STATE_FAILED", "{name}: {img}");
        assert!(img["status"]["message"].as_str().unwrap_or_default().contains(why), "{name}: {img}");
        let dir = s.data_dir.join("images").join(&id);
        let left: Vec<String> = std::fs::read_dir(&dir)
            .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        assert!(left.iter().all(|n| n == "failed.txt"), "{name}: {left:?}");
    }

    // Bad requests name the field, and make nothing.
    for (spec, field) in [
        (json!({"source": "ftp://127.0.0.1/x.qcow2"}), "object.spec.source"),
        (json!({"source": "/etc/passwd"}), "object.spec.source"),
        (json!({"sha256": "xyz"}), "object.spec.sha256"),
    ] {
        let (st, e) = post(&s, &a, "images", json!({"metadata": {"name": "bad"}, "spec": spec})).await;
        assert_eq!((st, e["details"][0]["field"].as_str()), (400, Some(field)), "{e}");
    }
    let (st, e) = post(&s, &a, "images", json!({"metadata": {"name": "test-guest"}, "spec": {"source": url("good.qcow2")}})).await;
    assert_eq!(st, 409, "a catalog name is taken: {e}");
    let (st, _) = post(&s, &a, "images", json!({"metadata": {"name": "pub"}, "spec": {"source": url("good.qcow2"), "public": true}})).await;
    assert_eq!(st, 403, "only administrators publish");

    // Another tenant sees nothing of it.
    assert_eq!(s.raw(Method::GET, &format!("{V1}/images/{good}"), Some(&b), None).await.0, 404);
    assert_eq!(s.raw(Method::DELETE, &format!("{V1}/images/{good}"), Some(&b), None).await.0, 404);
    let (_, list) = s.raw(Method::GET, &format!("{V1}/images"), Some(&b), None).await;
    assert!(!list.to_string().contains(&good), "{list}");

    // Uploaded with the CLI, with a progress bar.
    let out = s.cli(&a, &["image", "import", "up", &p("disk.raw"), "-o", "json"]);
    let progress = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{progress}");
    let up: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((up["status"]["state"].as_str(), up["status"]["format"].as_str()), (Some("IMAGE_STATE_READY"), Some("raw")), "{up}");
    assert!(progress.contains("100% 2.0 MiB of 2.0 MiB"), "{progress}");
    let out = s.cli(&a, &["image", "import", "not-a-disk", &p("page.html")]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success() && err.contains("HTML"), "{err}");

    // Used by a volume: counted, and kept.
    let (st, v) =
        post(&s, &a, "volumes", json!({"metadata": {"name": "from-good"}, "spec": {"size": "128Mi", "source_image": "good"}})).await;
    assert_eq!(st, 201, "{v}");
    let vol = v["object"]["id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(30);
    while s.raw(Method::GET, &format!("{V1}/volumes/{vol}"), Some(&a), None).await.1["object"]["status"]["state"] != "VOLUME_STATE_READY" {
        assert!(Instant::now() < deadline, "the volume from an imported image never got READY\n{}", s.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let info = vmaas_tests::disk_info(&s.data_dir.join("volumes").join(format!("{vol}.qcow2")));
    assert_eq!(info["backing-filename"].as_str(), Some(stored.to_str().unwrap()), "an overlay of the imported file: {info}");
    assert_eq!(settled(&s, &a, &good).await["status"]["references"], 1);
    let (st, e) = s.raw(Method::DELETE, &format!("{V1}/images/{good}"), Some(&a), None).await;
    assert!(st == 409 && e["message"].as_str().unwrap().contains("volume \"from-good\""), "{st} {e}");
    s.raw(Method::DELETE, &format!("{V1}/volumes/{vol}"), Some(&a), None).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (st, _) = s.raw(Method::DELETE, &format!("{V1}/images/{good}"), Some(&a), None).await;
        if st == 202 {
            break;
        }
        assert!(Instant::now() < deadline, "the image stayed in use: {st}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while s.raw(Method::GET, &format!("{V1}/images/{good}"), Some(&a), None).await.0 != 404 {
        assert!(Instant::now() < deadline, "the image was not removed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!stored.exists(), "its file is removed");
}

const PICK: &str = "id: pick\nparameters:\n  - {name: vm_image, type: string, default: {value: test-guest}}\nspec_defaults:\n  memory: 256Mi\n  exposed_ports:\n    - { port: 80, protocol: tcp }\n  readiness_probe:\n    http: { port: 80, path: / }\n    timeout_seconds: 180\n";

#[tokio::test(flavor = "multi_thread")]
async fn a_vm_waits_for_its_image_then_boots_from_it() {
    let s = Server::start_qemu_with(&LOOPBACK_FILES).await;
    publish(&s, PICK);
    let t = s.token("acme", false);
    let bios = vmaas_tests::images_dir().join("test-guest/bios.qcow2");
    assert!(bios.exists(), "scripts/guest-image.sh builds {}", bios.display());
    // An image to be uploaded: PENDING until then, and the VM waits for it.
    let id = import(&s, &t, "bios", json!({"description": "the test guest on a BIOS-bootable disk"})).await;
    let body = json!({"object": {"metadata": {"name": "booted"}, "spec": {"template": "pick", "template_parameters": {"vm_image": {"value": "bios"}}}}});
    let (st, vm) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(body)).await;
    assert_eq!(st, 201, "{vm}");
    let vm = vm["object"]["id"].as_str().unwrap().to_owned();
    let waiting = wait_until(&s, &t, &vm, "waiting for its image", 30, |v| v.to_string().contains("ImageImporting")).await;
    assert_eq!(waiting["status"]["state"], "VIRTUAL_MACHINE_STATE_PROGRESSING", "{waiting:#}");
    assert!(vmaas_tests::qemu_pids(&vm).is_empty(), "no QEMU before its image is there");

    let out = s.cli(&t, &["image", "get", "bios"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("PENDING"), "{}", String::from_utf8_lossy(&out.stdout));
    // The upload, through the API: the VM boots from it by BIOS.
    let data = std::fs::read(&bios).unwrap();
    let rsp =
        reqwest::Client::new().put(format!("{}{V1}/images/{id}/content", s.endpoint)).bearer_auth(&t).body(data).send().await.unwrap();
    assert_eq!(rsp.status(), 200);
    let ready = wait_ready(&s, &t, &vm).await;
    assert_eq!(ready["status"]["state"], "VIRTUAL_MACHINE_STATE_READY");
    let disk = s.data_dir.join("vms").join(&vm).join("disk.qcow2");
    let info = vmaas_tests::disk_info(&disk);
    assert!(info["backing-filename"].as_str().unwrap_or_default().ends_with(&format!("images/{id}/disk.qcow2")), "{info}");
    let (st, e) = s.raw(Method::DELETE, &format!("{V1}/images/{id}"), Some(&t), None).await;
    assert!(st == 409 && e["message"].as_str().unwrap().contains("virtual machine \"booted\""), "{st} {e}");

    // Seed 004: a VM naming an image by URL gets it imported on demand, then boots from it.
    let web = vmaas_tests::files::FileServer::start(bios.parent().unwrap().to_owned()).await;
    let url = format!("{}/slow/bios.qcow2", web.url);
    let body = json!({"object": {"metadata": {"name": "on-demand"}, "spec": {"template": "pick", "template_parameters": {"vm_image": {"value": url}}}}});
    let (st, vm) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(body)).await;
    assert_eq!(st, 201, "{vm}");
    let vm = vm["object"]["id"].as_str().unwrap().to_owned();
    let importing = wait_until(&s, &t, &vm, "waiting for the import", 30, |v| v.to_string().contains("ImageImporting")).await;
    assert_eq!(importing["status"]["state"], "VIRTUAL_MACHINE_STATE_PROGRESSING", "{importing:#}");
    wait_ready(&s, &t, &vm).await;
    let (_, list) = s.raw(Method::GET, &format!("{V1}/images"), Some(&t), None).await;
    let made =
        list["items"].as_array().unwrap().iter().find(|i| i["spec"]["source"] == url.as_str()).cloned().expect("an image made on demand");
    assert_eq!((made["status"]["state"].as_str(), made["status"]["references"].as_u64()), (Some("IMAGE_STATE_READY"), Some(1)), "{made}");
}

/// A qemu server started with `flags`, a tenant's token, and a loopback
/// file server of a directory holding `file` (`size` bytes).
async fn serving(flags: &[&str], file: &str, size: usize) -> (Server, String, tempfile::TempDir, FileServer) {
    let flags: Vec<&str> = LOOPBACK_FILES.iter().chain(flags).copied().collect();
    let s = Server::start_qemu_with(&flags).await;
    let t = s.token("acme", false);
    let files = tempfile::tempdir().unwrap();
    std::fs::write(files.path().join(file), vec![1u8; size]).unwrap();
    let web = FileServer::start(files.path().to_owned()).await;
    (s, t, files, web)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_size_limit_comes_from_the_configuration() {
    let (s, t, files, web) = serving(&["--image-max-size", "1Mi"], "big.raw", 2 << 20).await;

    // From a URL: refused on the announced length, nothing kept.
    let id = import(&s, &t, "big", json!({"source": format!("{}/big.raw", web.url)})).await;
    let img = settled(&s, &t, &id).await;
    assert_eq!(img["status"]["state"], "IMAGE_STATE_FAILED", "{img}");
    assert!(img["status"]["message"].as_str().unwrap_or_default().contains("more than the 1048576"), "{img}");
    // Uploaded: cut off at the limit, 400 naming the content.
    let id = import(&s, &t, "big-upload", json!({})).await;
    let rsp = reqwest::Client::new()
        .put(format!("{}{V1}/images/{id}/content", s.endpoint))
        .bearer_auth(&t)
        .body(vec![1u8; 2 << 20])
        .send()
        .await
        .unwrap();
    assert_eq!(rsp.status(), 400);
    let e: Value = rsp.json().await.unwrap();
    assert_eq!(e["details"][0]["field"], "content", "{e}");
    assert!(e["details"][0]["reason"].as_str().unwrap().contains("larger than the 1048576 bytes"), "{e}");
    let left: Vec<String> = std::fs::read_dir(s.data_dir.join("images").join(&id))
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    assert!(left.iter().all(|n| n == "failed.txt"), "no partial disk is left: {left:?}");
    // Small enough: fine.
    std::fs::write(files.path().join("small.raw"), vec![1u8; 512 << 10]).unwrap();
    let id = import(&s, &t, "small", json!({"source": format!("{}/small.raw", web.url)})).await;
    assert_eq!(settled(&s, &t, &id).await["status"]["state"], "IMAGE_STATE_READY");
}
