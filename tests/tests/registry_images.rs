//! Images from OCI registries on qemu, against a real registry on loopback
//! (Debian's `docker-registry`) holding containerDisks that umoci built and
//! skopeo pushed: imported by tag and by digest and checked against the
//! disk that went in; an unknown tag, a wrong digest and an image without
//! a disk fail by name; a registry at an address the source policy does not
//! allow, or the server's own socket, is never dialled; and a VM naming a
//! `docker://` image gets it pulled on demand and boots from it.

use std::path::Path;

use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::Server;
use vmaas_tests::files::sha256_of;
use vmaas_tests::images::{FETCH_FAILED, import, settled};
use vmaas_tests::objects::post;
use vmaas_tests::registry::{PrivateDisk, Registry, private_disk, push_container_disk};
use vmaas_tests::vms::{V1, publish, wait_ready};

const PICK: &str = "id: pick\nparameters:\n  - {name: vm_image, type: string, default: {value: test-guest}}\nspec_defaults:\n  memory: 256Mi\n  exposed_ports:\n    - { port: 80, protocol: tcp }\n  readiness_probe:\n    http: { port: 80, path: / }\n    timeout_seconds: 180\n";

#[tokio::test(flavor = "multi_thread")]
async fn container_disks_are_pulled_checked_and_booted() {
    let allowed = Registry::start().await;
    // Loopback too, but not among the addresses the server may fetch from.
    let refused = Registry::start_on("127.0.0.2").await;
    let plain = format!("{},{}", allowed.host, refused.host);
    let s = Server::start_qemu_with(&["--image-source-allow", "127.0.0.1", "--image-registry-plain-http", &plain]).await;
    publish(&s, PICK);
    let t = s.token("acme", false);
    let disk = vmaas_tests::images_dir().join("test-guest/bios.qcow2");
    assert!(disk.exists(), "scripts/guest-image.sh builds {}", disk.display());
    let at = |r: &Registry, name: &str| format!("docker://{}/disks/{name}", r.host);
    let digest = push_container_disk(Some(&disk), &at(&allowed, "guest:1"));
    push_container_disk(Some(&disk), &at(&refused, "guest:1"));
    push_container_disk(None, &at(&allowed, "empty:1"));
    let pushed = refused.log().len();

    // By tag and by digest: the disk that went in, byte for byte.
    for (name, source) in [("by-tag", at(&allowed, "guest:1")), ("by-digest", at(&allowed, &format!("guest@{digest}")))] {
        let id = import(&s, &t, name, json!({"source": source, "sha256": sha256_of(&disk)})).await;
        let img = settled(&s, &t, &id).await;
        assert_eq!(img["status"]["state"], "IMAGE_STATE_READY", "{name}: {img}\n{}", s.log());
        assert_eq!((img["status"]["format"].as_str(), img["status"]["sha256"].as_str()), (Some("qcow2"), Some(sha256_of(&disk).as_str())));
        assert_eq!(sha256_of(&s.data_dir.join("images").join(&id).join("disk.qcow2")), sha256_of(&disk));
        assert!(!s.data_dir.join("images").join(&id).join("layer.part").exists(), "the layer is not kept");
    }

    // The CLI imports from a registry as from a URL, following the import.
    let out = s.cli(&t, &["image", "import", "cli-oci", &at(&allowed, "guest:1"), "-o", "json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_eq!(
        (got["status"]["state"].as_str(), got["status"]["sha256"].as_str()),
        (Some("IMAGE_STATE_READY"), Some(sha256_of(&disk).as_str()))
    );

    // What fails, fails with its reason, and leaves no disk behind.
    let wrong = format!("sha256:{}", "0".repeat(64));
    let own = format!("docker://{}/disks/guest:1", s.endpoint.trim_start_matches("http://").trim_start_matches("https://"));
    for (name, source, why) in [
        ("unknown-tag", at(&allowed, "guest:2"), "the registry has no image"),
        ("wrong-digest", at(&allowed, &format!("guest@{wrong}")), "the registry has no image"),
        ("no-disk", at(&allowed, "empty:1"), "holds no disk"),
        ("not-allowed", at(&refused, "guest:1"), FETCH_FAILED),
        ("own-socket", own, FETCH_FAILED),
    ] {
        let id = import(&s, &t, name, json!({"source": source})).await;
        let img = settled(&s, &t, &id).await;
        assert_eq!(img["status"]["state"], "IMAGE_STATE_FAILED", "{name}: {img}");
        assert!(img["status"]["message"].as_str().unwrap_or_default().contains(why), "{name}: {img}");
        let left: Vec<String> = std::fs::read_dir(s.data_dir.join("images").join(&id))
            .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        assert!(left.iter().all(|n| n == "failed.txt"), "{name}: {left:?}");
    }
    // The refused registry was never asked: the policy refused its address first.
    let log = s.log();
    assert!(log.contains(&format!("{}: 127.0.0.2 is a loopback address", refused.host)), "{log}");
    assert!(log.contains("is this server's own listening socket"), "{log}");
    let asked = refused.log().get(pushed..).unwrap_or_default().to_owned();
    assert!(!asked.contains("/v2/"), "{asked}");

    // A reference that is none is a 400 naming the field, and nothing is made.
    let (st, e) = post(&s, &t, "images", json!({"metadata": {"name": "bad"}, "spec": {"source": "docker://Not/A:Ref:1"}})).await;
    assert_eq!((st, e["details"][0]["field"].as_str()), (400, Some("object.spec.source")), "{e}");
    assert!(e["details"][0]["reason"].as_str().unwrap_or_default().contains("OCI image reference"), "{e}");

    // A VM naming a docker:// image: pulled on demand, booted from it.
    let source = at(&allowed, "guest:1");
    let body = json!({"object": {"metadata": {"name": "from-registry"}, "spec": {"template": "pick", "template_parameters": {"vm_image": {"value": source}}}}});
    let (st, vm) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(body)).await;
    assert_eq!(st, 201, "{vm}");
    let vm = vm["object"]["id"].as_str().unwrap_or_default().to_owned();
    wait_ready(&s, &t, &vm).await;
    let (_, list) = s.raw(Method::GET, &format!("{V1}/images"), Some(&t), None).await;
    let made = list["items"].as_array().into_iter().flatten().find(|i| i["spec"]["source"] == source.as_str()).cloned();
    let made = made.expect("an image made on demand");
    assert_eq!((made["status"]["state"].as_str(), made["status"]["references"].as_u64()), (Some("IMAGE_STATE_READY"), Some(1)), "{made}");
    let info = vmaas_tests::disk_info(&s.data_dir.join("vms").join(&vm).join("disk.qcow2"));
    let id = made["id"].as_str().unwrap_or_default();
    assert!(info["backing-filename"].as_str().unwrap_or_default().ends_with(&format!("images/{id}/disk.qcow2")), "{info}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_image_past_the_size_limit_is_refused_before_its_layers_are_pulled() {
    let registry = Registry::start().await;
    let disk = vmaas_tests::images_dir().join("test-guest/bios.qcow2");
    let source = format!("docker://{}/disks/guest:1", registry.host);
    push_container_disk(Some(&disk), &source);
    let flags = ["--image-source-allow", "127.0.0.1", "--image-registry-plain-http", &registry.host, "--image-max-size", "1Mi"];
    let s = Server::start_qemu_with(&flags).await;
    let t = s.token("acme", false);
    let pulled = registry.log().len();
    let id = import(&s, &t, "too-big", json!({"source": source})).await;
    let img = settled(&s, &t, &id).await;
    assert_eq!(img["status"]["state"], "IMAGE_STATE_FAILED", "{img}");
    let why = img["status"]["message"].as_str().unwrap_or_default();
    assert!(why.contains("more than the 1048576 bytes this server accepts"), "{img}");
    let asked = registry.log().get(pulled..).unwrap_or_default().to_owned();
    assert!(asked.contains("/manifests/1") && !asked.contains("/blobs/"), "only the manifest was read: {asked}");
}

/// Files under `dir` whose bytes hold `needle`.
fn files_holding(dir: &Path, needle: &[u8]) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for e in vmaas_tests::registry::files_under(dir).into_iter().map(|f| dir.join(f)) {
        if std::fs::read(&e).is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle)) {
            found.push(e);
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread")]
async fn a_registry_asking_for_credentials_gets_them_and_they_are_never_answered() {
    const PASSWORD: &str = "pull-s3cret-7c1e";
    let PrivateDisk { registry: _registry, source, server: s } = private_disk(PASSWORD).await;
    let t = s.token("acme", false);

    for (name, creds, why) in [
        ("anonymous", None, "asks for credentials"),
        ("wrong", Some(json!({"username": "puller", "password": "not-it"})), "refused the credentials given"),
    ] {
        let mut spec = json!({"source": source});
        if let Some(c) = creds {
            spec["registry_credentials"] = c;
        }
        let id = import(&s, &t, name, spec).await;
        let img = settled(&s, &t, &id).await;
        assert_eq!(img["status"]["state"], "IMAGE_STATE_FAILED", "{name}: {img}");
        assert!(img["status"]["message"].as_str().unwrap_or_default().contains(why), "{name}: {img}");
    }
    let creds = json!({"username": "puller", "password": PASSWORD});
    let (st, made) =
        post(&s, &t, "images", json!({"metadata": {"name": "private"}, "spec": {"source": source, "registry_credentials": creds}})).await;
    assert_eq!(st, 201, "{made}");
    assert_eq!(made["object"]["spec"]["registry_credentials"], json!({"username": "puller"}), "the password is never answered: {made}");
    let id = made["object"]["id"].as_str().unwrap_or_default().to_owned();
    let img = settled(&s, &t, &id).await;
    assert_eq!(img["status"]["state"], "IMAGE_STATE_READY", "{img}\n{}", s.log());
    let disk = vmaas_tests::images_dir().join("test-guest/bios.qcow2");
    assert_eq!(sha256_of(&s.data_dir.join("images").join(&id).join("disk.qcow2")), sha256_of(&disk));

    // Nowhere to be read back: not the image, the list, the events or the
    // CLI; not in the clear in any file of the server's, nor its log.
    let (_, list) = s.raw(Method::GET, &format!("{V1}/images"), Some(&t), None).await;
    let (_, events) = s.raw(Method::GET, "/api/events/v1/events?after=0", Some(&t), None).await;
    let cli = s.cli(&t, &["image", "get", "private", "-o", "json"]);
    for (what, text) in [
        ("the image", img.to_string()),
        ("the list", list.to_string()),
        ("the events", events.to_string()),
        ("the CLI", String::from_utf8_lossy(&cli.stdout).into_owned()),
    ] {
        assert!(!text.contains(PASSWORD), "{what} holds the password: {text}");
    }
    assert!(events.to_string().contains(&id), "the events were read: {events}");
    assert_eq!(files_holding(&s.data_dir, PASSWORD.as_bytes()), Vec::<std::path::PathBuf>::new());
    assert!(!s.log().contains(PASSWORD), "the server's log holds the password");

    // The CLI reads the password from standard input (never an argument),
    // and follows the pull until the image is READY.
    let args = ["image", "import", "cli-private", &source, "--registry-username", "puller", "--registry-password-stdin", "-o", "json"];
    let out = s.cli_with_stdin(&t, &args, format!("{PASSWORD}\n").as_bytes());
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stderr), s.log());
    let by_cli: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_eq!(
        (&by_cli["status"]["state"], &by_cli["spec"]["registry_credentials"]),
        (&json!("IMAGE_STATE_READY"), &json!({"username": "puller"}))
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains(PASSWORD));
    let no_password = s.cli(&t, &["image", "import", "cli-none", &source, "--registry-username", "puller"]);
    assert!(!no_password.status.success() && String::from_utf8_lossy(&no_password.stderr).contains("VMAAS_REGISTRY_PASSWORD"));

    // Credentials are for registries only, and named when wrong.
    let (st, e) = post(
        &s,
        &t,
        "images",
        json!({"metadata": {"name": "bad"}, "spec": {"source": "http://127.0.0.1:9/a.qcow2",
        "registry_credentials": {"username": "", "password": PASSWORD}}}),
    )
    .await;
    let fields: Vec<&str> = e["details"].as_array().into_iter().flatten().filter_map(|d| d["field"].as_str()).collect();
    assert_eq!((st, fields), (400, vec!["object.spec.registry_credentials", "object.spec.registry_credentials.username"]), "{e}");
}
