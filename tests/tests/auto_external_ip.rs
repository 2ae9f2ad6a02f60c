//! OSAC's `auto_external_ip_attachment` through the real `vmaas-server`
//! (`--backend none`): a compute instance created with it gets an external
//! IP from the default pool and an attachment of it, both named as the VM
//! and labelled with its id; the flag is fixed; a name already taken and
//! an exhausted quota are refused naming the field, and nothing is made;
//! deleting the VM deletes both. Then as `auto_external_ip_attachment` on
//! `vmaas_virtual_machine`, on every Terraform.

use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::objects::wait_for;
use vmaas_tests::tf::{Tf, Workspace};
use vmaas_tests::vms::{TINY, V1, publish};
use vmaas_tests::{Db, Server};

const LABEL: &str = "vmaas.io/auto-external-ip-of";

async fn total(s: &Server, t: &str, path: &str) -> u64 {
    let (_, list) = s.raw(Method::GET, &format!("{V1}/{path}"), Some(t), None).await;
    list["total"].as_u64().unwrap_or(u64::MAX)
}

fn instance(name: &str) -> Value {
    json!({"object": {"metadata": {"name": name}, "spec": {"template": {"name": "tiny"}, "auto_external_ip_attachment": true}}})
}

#[tokio::test(flavor = "multi_thread")]
async fn an_automatic_external_ip_is_made_with_its_vm_and_goes_with_it() {
    let s = Server::start(Db::Sqlite).await.expect("sqlite");
    publish(&s, TINY);
    let (acme, admin) = (s.token("acme", false), s.token("ops", true));
    let (st, ci) = s.raw(Method::POST, &format!("{V1}/compute_instances"), Some(&acme), Some(instance("web"))).await;
    assert_eq!((st, &ci["object"]["spec"]["auto_external_ip_attachment"]), (201, &json!(true)), "{ci}");
    let vm = ci["object"]["id"].as_str().unwrap().to_owned();

    let (_, ips) = s.raw(Method::GET, &format!("{V1}/external_ips"), Some(&acme), None).await;
    let ip = &ips["items"][0];
    assert_eq!((ips["total"].as_u64(), &ip["metadata"]["name"], &ip["metadata"]["labels"][LABEL]), (Some(1), &json!("web"), &json!(vm)));
    assert_eq!(ip["status"]["state"], "EXTERNAL_IP_STATE_ALLOCATED", "{ip}");
    let address = ip["status"]["address"].as_str().unwrap().to_owned();
    let (_, atts) = s.raw(Method::GET, &format!("{V1}/external_ip_attachments"), Some(&acme), None).await;
    let att_id = atts["items"][0]["id"].as_str().unwrap().to_owned();
    let ready = wait_for(&s, &acme, &format!("external_ip_attachments/{att_id}"), "the attachment READY", |a| {
        a.is_some_and(|a| a["status"]["state"] == "EXTERNAL_IP_ATTACHMENT_STATE_READY")
    })
    .await;
    assert_eq!((&ready["spec"]["compute_instance"]["id"], &ready["status"]["external_ip_address"]), (&json!(vm), &json!(address)));

    // Fixed at create.
    let off = json!({"object": {"spec": {"auto_external_ip_attachment": false}}});
    let (st, e) = s.raw(Method::PATCH, &format!("{V1}/virtual_machines/{vm}"), Some(&acme), Some(off)).await;
    assert_eq!((st, &e["details"][0]["field"]), (400, &json!("object.spec.auto_external_ip_attachment")), "{e}");

    // A name taken, then an exhausted quota: refused by field; nothing is made.
    let mine = json!({"object": {"metadata": {"name": "api"}, "spec": {}}});
    assert_eq!(s.raw(Method::POST, &format!("{V1}/external_ips"), Some(&acme), Some(mine)).await.0, 201);
    let out = s.cli(&acme, &["vm", "create", "api", "--template", "tiny", "--auto-external-ip"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("auto_external_ip_attachment") && err.contains("named \"api\""), "{err}");
    let limit = json!({"object": {"spec": {"external_ips": 2}}});
    assert_eq!(s.raw(Method::PUT, &format!("{V1}/tenants/acme/quota"), Some(&admin), Some(limit)).await.0, 200);
    let (st, e) = s.raw(Method::POST, &format!("{V1}/compute_instances"), Some(&acme), Some(instance("db"))).await;
    assert_eq!((st, &e["details"][0]["field"]), (429, &json!("quota.external_ips")), "{e}");
    let counts = (total(&s, &acme, "virtual_machines").await, total(&s, &acme, "external_ips").await);
    assert_eq!(counts, (1, 2), "nothing half-made");

    // The VM goes, and its automatic address with it; the tenant's own stays.
    assert_eq!(s.raw(Method::DELETE, &format!("{V1}/virtual_machines/{vm}"), Some(&acme), None).await.0, 202);
    wait_for(&s, &acme, &format!("external_ip_attachments/{att_id}"), "the attachment gone", |a| a.is_none()).await;
    let ip_id = ip["id"].as_str().unwrap();
    wait_for(&s, &acme, &format!("external_ips/{ip_id}"), "the automatic external IP gone", |i| i.is_none()).await;
    assert_eq!(total(&s, &acme, "external_ips").await, 1, "the tenant's own external IP stays");
}

const VM_TF: &str = r#"
terraform {
  required_providers {
    vmaas = { source = "vmaas/vmaas" }
  }
}
provider "vmaas" {}

resource "vmaas_virtual_machine" "web" {
  name                        = "web"
  template                    = "tiny"
  auto_external_ip_attachment = true
}

output "id" {
  value = vmaas_virtual_machine.web.id
}

output "external_ip" {
  value = vmaas_virtual_machine.web.external_ip
}
"#;

/// `auto_external_ip_attachment` on `vmaas_virtual_machine` (a real guest:
/// the provider waits for READY): applied, its address the VM's external
/// IP, no drift, and destroyed with the VM.
async fn terraform_scenario(tf: Tf) {
    let s = Server::start_qemu().await;
    publish(&s, TINY);
    let acme = s.token("acme", false);
    let w = Workspace::new(tf, &s, &acme, VM_TF);
    w.apply(&[]);
    let id = w.output("id");
    let (_, ips) = s.raw(Method::GET, &format!("{V1}/external_ips"), Some(&acme), None).await;
    assert_eq!((ips["total"].as_u64(), &ips["items"][0]["metadata"]["labels"][LABEL]), (Some(1), &json!(id)), "{ips}");
    assert_eq!(json!(w.output("external_ip")), ips["items"][0]["status"]["address"], "the VM answers on it");
    assert_eq!(w.plan_code(&[]).0, 0, "no drift");
    w.ok(&["destroy", "-auto-approve", "-no-color"]);
    wait_for(&s, &acme, &format!("external_ips/{}", ips["items"][0]["id"].as_str().unwrap()), "the IP gone", |i| i.is_none()).await;
}

vmaas_tests::on_every_terraform!(terraform_scenario: auto_ip_tofu, auto_ip_terraform_1_0_3, auto_ip_terraform_1_15_5);
