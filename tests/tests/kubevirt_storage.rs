//! The kubevirt backend's storage against a real kube-apiserver with a
//! task playing KubeVirt and CDI (`vmaas_tests::kubevirt`): volumes as
//! hotplugged DataVolumes, and images imported by CDI.

use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::kubevirt::{IMAGES, PICK, api_until, env, objects_of, the_vm};
use vmaas_tests::vms::{self, V1};

/// A volume is a DataVolume in its VM's namespace, hotplugged as a SCSI
/// disk with its serial and taken off again; one in another namespace
/// cannot be attached, and says why; deleting it deletes the DataVolume.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volumes_are_data_volumes_hotplugged_into_kubevirt_vms() {
    let (k, _kubevirt, s) = env().await;
    let t = s.token("acme", false);
    let post = |path: &'static str, body: Value| {
        let (s, t) = (&s, t.clone());
        async move {
            let (st, b) = s.raw(Method::POST, &format!("{V1}/{path}"), Some(&t), Some(json!({ "object": body }))).await;
            assert_eq!(st, 201, "{path}: {b}");
            b["object"].clone()
        }
    };
    let state = |v: Option<&Value>| v.and_then(|v| v["status"]["state"].as_str()).unwrap_or("").to_owned();
    let vm = vms::create(&s, &t, "db", "tiny").await;
    vms::wait_ready(&s, &t, &vm).await;
    let vol = post("volumes", json!({"metadata": {"name": "data"}, "spec": {"size": "1Gi", "source_image": "test-guest"}})).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    api_until(&s, &t, &format!("volumes/{vol}"), "READY", |v| state(v) == "VOLUME_STATE_READY").await;
    let dv = objects_of(&k, "/apis/cdi.kubevirt.io/v1beta1/datavolumes", &vol).await;
    assert_eq!(dv.len(), 1);
    assert_eq!(dv[0]["metadata"]["namespace"], the_vm(&k, &vm).await["metadata"]["namespace"], "unattached: the tenant's namespace");
    assert_eq!(dv[0]["spec"]["sourceRef"], json!({"kind": "DataSource", "name": "test-guest", "namespace": IMAGES}));
    assert_eq!(dv[0]["spec"]["storage"]["resources"]["requests"]["storage"], "1Gi");

    let att =
        post("volume_attachments", json!({"metadata": {"name": "data-on-db"}, "spec": {"volume": "data", "compute_instance": "db"}})).await;
    let (att_id, serial) = (att["id"].as_str().unwrap().to_owned(), att["status"]["serial"].as_str().unwrap().to_owned());
    api_until(&s, &t, &format!("volume_attachments/{att_id}"), "attached", |v| state(v) == "VOLUME_ATTACHMENT_STATE_READY").await;
    let spec = the_vm(&k, &vm).await["spec"]["template"]["spec"].clone();
    let disk = spec["domain"]["devices"]["disks"].as_array().unwrap().iter().find(|d| d["serial"] == serial.as_str()).cloned();
    assert_eq!(disk.as_ref().map(|d| d["disk"].clone()), Some(json!({"bus": "scsi"})), "a hotpluggable SCSI disk: {spec:#}");
    let name = disk.unwrap()["name"].clone();
    let volume = spec["volumes"].as_array().unwrap().iter().find(|v| v["name"] == name).cloned().unwrap();
    assert_eq!(volume["dataVolume"], json!({"name": dv[0]["metadata"]["name"], "hotpluggable": true}));
    assert_eq!(vms::state(&vms::get(&s, &t, &vm).await.1["object"]), "VIRTUAL_MACHINE_STATE_READY", "hotplugged, not restarted");

    // Detached: the disk leaves the VM, the DataVolume stays.
    assert!(s.raw(Method::DELETE, &format!("{V1}/volume_attachments/{att_id}"), Some(&t), None).await.0 < 300);
    api_until(&s, &t, &format!("volumes/{vol}"), "READY again", |v| state(v) == "VOLUME_STATE_READY").await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while the_vm(&k, &vm).await["spec"]["template"]["spec"]["volumes"].as_array().unwrap().iter().any(|v| v["name"] == name) {
        assert!(std::time::Instant::now() < deadline, "the disk stayed on the VM\n{}", s.log());
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }

    // A VM on a subnet runs in another namespace: the volume cannot follow it there.
    post("virtual_networks", json!({"metadata": {"name": "app"}, "spec": {"ipv4_cidr": "10.70.0.0/16"}})).await;
    post("subnets", json!({"metadata": {"name": "back"}, "spec": {"virtual_network": "app", "ipv4_cidr": "10.70.1.0/24"}})).await;
    let other = post(
        "virtual_machines",
        json!({"metadata": {"name": "far"}, "spec": {"template": "tiny", "network_attachments": [{"subnet": "back"}]}}),
    )
    .await;
    let other = other["id"].as_str().unwrap().to_owned();
    vms::wait_ready(&s, &t, &other).await;
    let far =
        post("volume_attachments", json!({"metadata": {"name": "data-on-far"}, "spec": {"volume": "data", "compute_instance": "far"}}))
            .await;
    let failed = api_until(&s, &t, &format!("volume_attachments/{}", far["id"].as_str().unwrap()), "FAILED", |v| {
        state(v) == "VOLUME_ATTACHMENT_STATE_FAILED"
    })
    .await;
    assert!(failed["status"]["message"].as_str().unwrap_or_default().contains("cannot be used across namespaces"), "{failed:#}");

    // Deleting the volume (once detached) deletes its DataVolume.
    assert!(s.raw(Method::DELETE, &format!("{V1}/volume_attachments/{}", far["id"].as_str().unwrap()), Some(&t), None).await.0 < 300);
    api_until(&s, &t, &format!("volumes/{vol}"), "detached", |v| state(v) == "VOLUME_STATE_READY").await;
    assert!(s.raw(Method::DELETE, &format!("{V1}/volumes/{vol}"), Some(&t), None).await.0 < 300);
    api_until(&s, &t, &format!("volumes/{vol}"), "gone", |v| v.is_none()).await;
    assert_eq!(objects_of(&k, "/apis/cdi.kubevirt.io/v1beta1/datavolumes", &vol).await, Vec::<Value>::new());
}

/// An image imported from a URL is a CDI import into the images namespace
/// plus a DataSource of it; a VM boots from it by cloning that DataSource;
/// it is not listed twice; a SHA-256 CDI cannot check is refused; deleting
/// it deletes both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_imported_image_is_a_cdi_import_and_a_data_source() {
    let (k, kubevirt, s) = env().await;
    vms::publish(&s, PICK);
    let t = s.token("acme", false);
    let state = |v: Option<&Value>| v.and_then(|v| v["status"]["state"].as_str()).unwrap_or("").to_owned();
    // Data for CDI: nothing in the test fetches it.
    let url = "http://127.0.0.1:9/images/alpine.qcow2";
    let (st, img) = s
        .raw(
            Method::POST,
            &format!("{V1}/images"),
            Some(&t),
            Some(json!({"object": {"metadata": {"name": "alpine"}, "spec": {"source": url}}})),
        )
        .await;
    assert_eq!(st, 201, "{img}");
    let id = img["object"]["id"].as_str().unwrap().to_owned();
    let ready = api_until(&s, &t, &format!("images/{id}"), "READY", |v| state(v) == "IMAGE_STATE_READY").await;
    assert_eq!(ready["status"]["format"], "raw", "{ready:#}");
    let dv = objects_of(&k, "/apis/cdi.kubevirt.io/v1beta1/datavolumes", &id).await;
    assert_eq!((dv.len(), &dv[0]["metadata"]["namespace"]), (1, &json!(IMAGES)));
    assert_eq!(dv[0]["spec"]["source"], json!({"http": {"url": url}}));
    assert_eq!(dv[0]["spec"]["storage"]["resources"]["requests"]["storage"], "10Gi");
    let ds = objects_of(&k, "/apis/cdi.kubevirt.io/v1beta1/datasources", &id).await;
    assert_eq!(ds[0]["spec"]["source"]["pvc"], json!({"name": dv[0]["metadata"]["name"], "namespace": IMAGES}));
    let (_, list) = s.raw(Method::GET, &format!("{V1}/images"), Some(&t), None).await;
    let names: Vec<&str> = list["items"].as_array().unwrap().iter().filter_map(|i| i["metadata"]["name"].as_str()).collect();
    assert_eq!(names.iter().filter(|n| n.starts_with("image-") || **n == "alpine").count(), 1, "listed once: {names:?}");

    let body = json!({"object": {"metadata": {"name": "a1"}, "spec": {"template": "pick", "template_parameters": {"vm_image": {"value": "alpine"}}}}});
    let (st, vm) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(body)).await;
    assert_eq!(st, 201, "{vm}");
    let vm = vm["object"]["id"].as_str().unwrap().to_owned();
    vms::wait_ready(&s, &t, &vm).await;
    let root = the_vm(&k, &vm).await["spec"]["dataVolumeTemplates"][0]["spec"]["sourceRef"].clone();
    assert_eq!(root, json!({"kind": "DataSource", "name": ds[0]["metadata"]["name"], "namespace": IMAGES}), "cloned from the import");

    // A containerDisk in an OCI registry: CDI's registry source, accepted Strict.
    let reference = "docker://127.0.0.1:9/disks/alpine:3";
    let body = json!({"object": {"metadata": {"name": "alpine-oci"}, "spec": {"source": reference}}});
    let (st, img) = s.raw(Method::POST, &format!("{V1}/images"), Some(&t), Some(body)).await;
    assert_eq!(st, 201, "{img}");
    let oci = img["object"]["id"].as_str().unwrap().to_owned();
    api_until(&s, &t, &format!("images/{oci}"), "READY", |v| state(v) == "IMAGE_STATE_READY").await;
    let dv = objects_of(&k, "/apis/cdi.kubevirt.io/v1beta1/datavolumes", &oci).await;
    assert_eq!(dv[0]["spec"]["source"], json!({"registry": {"url": reference}}));

    // A registry asking for credentials: CDI reads them from a Secret made
    // for the pull, which is gone once the DataVolume is filled.
    kubevirt.pause(true);
    let creds = json!({"username": "puller", "password": "s3cret-pw"});
    let body = json!({"object": {"metadata": {"name": "private"}, "spec": {"source": reference, "registry_credentials": creds}}});
    let (st, img) = s.raw(Method::POST, &format!("{V1}/images"), Some(&t), Some(body)).await;
    assert_eq!(st, 201, "{img}");
    assert!(!img.to_string().contains("s3cret-pw"), "the password is never answered: {img}");
    let private = img["object"]["id"].as_str().unwrap().to_owned();
    let secrets = format!("/api/v1/namespaces/{IMAGES}/secrets");
    let secret = labelled(&k, &secrets, &private, true).await.expect("a pull Secret");
    let data = |key: &str| secret["data"][key].as_str().and_then(|v| STANDARD.decode(v).ok()).and_then(|v| String::from_utf8(v).ok());
    assert_eq!((data("accessKeyId").as_deref(), data("secretKey").as_deref()), (Some("puller"), Some("s3cret-pw")));
    // The Secret is made first, then the DataVolume naming it.
    let dv = labelled(&k, "/apis/cdi.kubevirt.io/v1beta1/datavolumes", &private, true).await.expect("a DataVolume");
    assert_eq!(dv["spec"]["source"], json!({"registry": {"url": reference, "secretRef": secret["metadata"]["name"]}}));
    kubevirt.pause(false);
    api_until(&s, &t, &format!("images/{private}"), "READY", |v| state(v) == "IMAGE_STATE_READY").await;
    assert_eq!(labelled(&k, &secrets, &private, false).await, None, "the Secret is deleted once CDI pulled");

    let checked = json!({"object": {"metadata": {"name": "checked"}, "spec": {"source": url, "sha256": "0".repeat(64)}}});
    let (st, img) = s.raw(Method::POST, &format!("{V1}/images"), Some(&t), Some(checked)).await;
    assert_eq!(st, 201, "{img}");
    let failed =
        api_until(&s, &t, &format!("images/{}", img["object"]["id"].as_str().unwrap()), "FAILED", |v| state(v) == "IMAGE_STATE_FAILED")
            .await;
    assert!(failed["status"]["message"].as_str().unwrap_or_default().contains("SHA-256"), "{failed:#}");

    assert!(s.raw(Method::DELETE, &format!("{V1}/virtual_machines/{vm}"), Some(&t), None).await.0 < 300);
    api_until(&s, &t, &format!("virtual_machines/{vm}"), "the VM gone", |v| v.is_none()).await;
    assert!(s.raw(Method::DELETE, &format!("{V1}/images/{id}"), Some(&t), None).await.0 < 300);
    api_until(&s, &t, &format!("images/{id}"), "the image gone", |v| v.is_none()).await;
    for path in ["/apis/cdi.kubevirt.io/v1beta1/datavolumes", "/apis/cdi.kubevirt.io/v1beta1/datasources"] {
        assert_eq!(objects_of(&k, path, &id).await, Vec::<Value>::new(), "{path} left behind");
    }
}

/// Image `id`'s object at `path` (its pull Secret, its DataVolume) once it
/// is there (`present`), or `None` once it is gone; the test fails after a
/// minute.
async fn labelled(k: &vmaas_tests::k8s::KubeApi, path: &str, id: &str, present: bool) -> Option<Value> {
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        let found = objects_of(k, path, id).await.into_iter().next();
        if found.is_some() == present {
            return found;
        }
        assert!(Instant::now() < end, "image {id}'s object at {path} still {}", if present { "missing" } else { "there" });
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
