//! `images`: the administrators' public images, as the qemu backend's
//! catalog holds them, with the VMs booting from each counted per tenant;
//! a VM naming an image the server lacks is refused at create; OSAC's
//! `spec.image` chooses an image in place of the template's.

use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::vms::{V1, create, publish};
use vmaas_tests::{Server, images_dir};

const PICK: &str =
    "id: pick\nparameters:\n  - {name: vm_image, type: string, default: {value: test-guest}}\nspec_defaults:\n  memory: 256Mi\n";
const FIXED: &str = "id: fixed\nspec_defaults: {image: no-such-image}\n";

fn image<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["items"].as_array().unwrap().iter().find(|i| i["id"] == name).unwrap_or_else(|| panic!("no {name} in {list:#}"))
}

fn virtual_size(disk: &std::path::Path) -> u64 {
    vmaas_tests::disk_info(disk)["virtual-size"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn public_images_are_listed_counted_and_checked() {
    let s = Server::start_qemu().await;
    publish(&s, &format!("{}\n---\n{PICK}---\n{FIXED}", include_str!("../../examples/templates/tiny.yaml")));
    let (acme, globex, admin) = (s.token("acme", false), s.token("globex", false), s.token("ops", true));

    let (st, list) = s.raw(Method::GET, &format!("{V1}/images"), Some(&acme), None).await;
    assert_eq!(st, 200, "{list}");
    let guest = image(&list, "test-guest");
    assert_eq!(guest["status"]["state"], "IMAGE_STATE_READY");
    assert_eq!(guest["status"]["format"], "qcow2");
    assert_eq!(guest["status"]["virtual_size"], virtual_size(&images_dir().join("test-guest/disk.qcow2")), "the disk's own size");
    assert_eq!(guest["metadata"]["public"], true);
    assert_eq!(guest["status"]["references"], 0);
    assert!(image(&list, "debian-12")["spec"]["description"].as_str().unwrap().contains("cloud-init"));

    // A VM booting it counts for its tenant (and the administrators), not for another tenant.
    create(&s, &acme, "web", "tiny").await;
    for (token, n) in [(&acme, 1), (&globex, 0), (&admin, 1)] {
        let (_, one) = s.raw(Method::GET, &format!("{V1}/images/test-guest"), Some(token), None).await;
        assert_eq!(one["object"]["status"]["references"], n, "{one}");
    }
    let (st, _) = s.raw(Method::GET, &format!("{V1}/images/nope"), Some(&acme), None).await;
    assert_eq!(st, 404);

    // An image the server lacks: 400 naming what chose it, nothing stored.
    for (template, params, field) in [
        ("pick", json!({"vm_image": {"value": "nope"}}), "object.spec.template_parameters.vm_image"),
        ("fixed", json!({}), "object.spec.template"),
    ] {
        let body = json!({"object": {"metadata": {"name": "bad"}, "spec": {"template": template, "template_parameters": params}}});
        let (st, err) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&acme), Some(body)).await;
        assert_eq!(st, 400, "{err}");
        assert_eq!(err["details"][0]["field"], field, "{err}");
        assert!(err["details"][0]["reason"].as_str().unwrap().contains("test-guest"), "the images there are: {err}");
    }
    // A URL of another scheme (which would read the server's own files) is refused as such.
    let body = json!({"object": {"metadata": {"name": "bad"}, "spec": {"template": "pick", "template_parameters": {"vm_image": {"value": "file:///etc/shadow"}}}}});
    let (st, err) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&acme), Some(body)).await;
    assert_eq!(st, 400, "{err}");
    assert_eq!(err["details"][0]["field"], "object.spec.template_parameters.vm_image.value", "{err}");
    assert_eq!(
        err["details"][0]["reason"], "an image URL must be http or https, got \"file\" (docker:// names an image in an OCI registry)",
        "{err}"
    );
    let (_, vms) = s.raw(Method::GET, &format!("{V1}/virtual_machines"), Some(&acme), None).await;
    assert_eq!(vms["total"], 1, "{vms}");

    // An http(s) URL makes an image on demand (seed 004); one that cannot be
    // fetched fails the import, and the VM with its reason.
    let url = "http://127.0.0.1:1/disk.qcow2";
    let body = json!({"object": {"metadata": {"name": "from-url"}, "spec": {"template": "pick", "template_parameters": {"vm_image": {"value": url}}}}});
    let (st, vm) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&acme), Some(body)).await;
    assert_eq!(st, 201, "{vm}");
    let failed = vmaas_tests::vms::wait_until(&s, &acme, vm["object"]["id"].as_str().unwrap(), "FAILED", 60, |v| {
        v["status"]["state"] == "VIRTUAL_MACHINE_STATE_FAILED"
    })
    .await;
    assert!(failed.to_string().contains("ImageImportFailed") && failed.to_string().contains("127.0.0.1:1"), "{failed:#}");
    let (_, list) = s.raw(Method::GET, &format!("{V1}/images"), Some(&acme), None).await;
    let made = list["items"].as_array().unwrap().iter().find(|i| i["spec"]["source"] == url).cloned().expect("an image made on demand");
    assert_eq!((made["status"]["state"].as_str(), made["status"]["references"].as_u64()), (Some("IMAGE_STATE_FAILED"), Some(1)), "{made}");
    // A VM that cannot be made (its name is taken) makes no image either.
    let other = "http://127.0.0.1:1/other.qcow2";
    let body = json!({"object": {"metadata": {"name": "from-url"}, "spec": {"template": "pick", "image": {"source_type": "url", "source_ref": other}}}});
    let (st, err) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&acme), Some(body)).await;
    assert_eq!(st, 409, "{err}");
    let (_, list) = s.raw(Method::GET, &format!("{V1}/images"), Some(&acme), None).await;
    assert!(!list.to_string().contains(other), "no image made for it: {list}");

    // OSAC's `spec.image` boots an image in place of the template's (and counts).
    let out = s.cli(&acme, &["vm", "create", "own", "-t", "fixed", "--image", "test-guest", "--stopped", "-o", "json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let own: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(own["spec"]["image"], json!({"source_ref": "test-guest"}), "{own}");
    let (_, one) = s.raw(Method::GET, &format!("{V1}/images/test-guest"), Some(&acme), None).await;
    assert_eq!(one["object"]["status"]["references"], 2, "{one}");
    for (params, image, field) in [
        (json!({}), json!({"source_type": "registry", "source_ref": "quay.io/x/y:1"}), "object.spec.image.source_type"),
        (json!({}), json!({"source_ref": "nope"}), "object.spec.image.source_ref"),
        (json!({}), json!({"source_type": "url", "source_ref": "test-guest"}), "object.spec.image.source_ref"),
        (json!({"vm_image": {"value": "test-guest"}}), json!({"source_ref": "test-guest"}), "object.spec.image"),
    ] {
        let template = if params == json!({}) { "fixed" } else { "pick" };
        let body =
            json!({"object": {"metadata": {"name": "bad"}, "spec": {"template": template, "template_parameters": params, "image": image}}});
        let (st, err) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&acme), Some(body)).await;
        assert_eq!((st, err["details"][0]["field"].as_str()), (400, Some(field)), "{image}: {err}");
    }
    let id = own["id"].as_str().unwrap();
    let body = json!({"object": {"spec": {"image": {"source_ref": "debian-12"}}}});
    let (st, err) = s.raw(Method::PATCH, &format!("{V1}/virtual_machines/{id}"), Some(&acme), Some(body)).await;
    assert_eq!((st, err["details"][0]["field"].as_str()), (400, Some("object.spec.image")), "{err}");
    let (_, vms) = s.raw(Method::GET, &format!("{V1}/virtual_machines?name=bad"), Some(&acme), None).await;
    assert_eq!(vms["total"], 0, "nothing half-made: {vms}");

    // The CLI lists them.
    let out = s.cli(&acme, &["image", "list"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("test-guest") && text.contains("READY") && text.contains("qcow2"), "{text}");
    let one = s.cli_json(&acme, &["image", "get", "debian-12"]);
    assert_eq!(one["status"]["state"], "IMAGE_STATE_READY", "{one}");
}
