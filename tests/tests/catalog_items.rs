//! Catalog items through the real `vmaas-server` (`--backend none`): an
//! administrator makes one over `tiny` in OSAC's flat JSON; a tenant makes
//! VMs from it with the CLI and over REST, which get its template and
//! defaults and keep what it fixes; a value its schema refuses is a 400
//! naming the field, and nothing is made; withdrawn, tenants no longer see
//! or use it, while its VMs keep it; it cannot be deleted while they use
//! it. Then as `vmaas_catalog_item` on every Terraform.

use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::tf::{Tf, Workspace};
use vmaas_tests::vms::{TINY, publish};
use vmaas_tests::{Db, Server};

const ITEMS: &str = "/api/fulfillment/v1/compute_instance_catalog_items";
const VMS: &str = "/api/fulfillment/v1/virtual_machines";

/// The fields a 400 names.
fn fields(e: &Value) -> Vec<&str> {
    e["details"].as_array().into_iter().flatten().filter_map(|d| d["field"].as_str()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn tenants_make_vms_from_a_published_item_and_keep_what_it_fixes() {
    let s = Server::start(Db::Sqlite).await.expect("sqlite");
    publish(&s, TINY);
    let (admin, acme) = (s.token("ops", true), s.token("acme", false));
    let item = json!({"object": {"metadata": {"name": "tiny-ci"}, "title": "CI runner", "template": "tiny", "published": true,
        "field_definitions": [
            {"path": "template_parameters.vm_cpu_cores", "editable": true, "default": 1,
             "validation_schema": "{\"type\": \"integer\", \"maximum\": 2}"},
            {"path": "run_strategy", "default": "Halted"}]}});
    let (st, made) = s.raw(Method::POST, ITEMS, Some(&admin), Some(item)).await;
    assert_eq!((st, &made["object"]["template"]["name"]), (201, &json!("tiny")), "{made}");
    let item_id = made["object"]["id"].as_str().unwrap().to_owned();

    // The CLI: the item's template types the parameter; its fixed run strategy stops the VM.
    let out = s.cli(&acme, &["vm", "create", "box", "--catalog-item", "tiny-ci", "-p", "vm_cpu_cores=2", "-o", "json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let vm: Value = serde_json::from_slice(&out.stdout).expect("the VM as JSON");
    let spec = &vm["spec"];
    assert_eq!((&spec["template"], &spec["catalog_item"]["id"], &spec["state"]), (&json!("tiny"), &json!(item_id), &json!("stopped")));
    assert_eq!(spec["template_parameters"]["vm_cpu_cores"]["value"], 2, "{vm}");
    let listed = s.cli(&acme, &["catalog-item", "list"]);
    assert!(String::from_utf8_lossy(&listed.stdout).contains("tiny-ci"), "{}", String::from_utf8_lossy(&listed.stderr));
    assert!(!s.cli(&acme, &["catalog-item", "unpublish", "tiny-ci"]).status.success(), "a tenant withdraws nothing");

    // REST: a value the schema refuses, and a value the item fixes, each by field; nothing is made.
    let body = |name: &str, spec: Value| json!({"object": {"metadata": {"name": name}, "spec": spec}});
    let refused = json!({"catalog_item": "tiny-ci", "template_parameters": {"vm_cpu_cores": {"value": 3}}});
    let (st, e) = s.raw(Method::POST, VMS, Some(&acme), Some(body("too-big", refused))).await;
    assert_eq!((st, fields(&e)), (400, vec!["object.spec.template_parameters.vm_cpu_cores"]), "{e}");
    let (_, list) = s.raw(Method::GET, VMS, Some(&acme), None).await;
    assert_eq!(list["total"], 1, "nothing half-made: {list}");
    let id = vm["id"].as_str().unwrap();
    let start = json!({"object": {"spec": {"state": "started"}}});
    let (st, e) = s.raw(Method::PATCH, &format!("{VMS}/{id}"), Some(&acme), Some(start)).await;
    assert_eq!((st, fields(&e)), (400, vec!["object.spec.state"]), "{e}");

    // Withdrawn: tenants neither see it nor use it; the VM keeps it.
    assert!(s.cli(&admin, &["catalog-item", "unpublish", "tiny-ci"]).status.success());
    let (_, seen) = s.raw(Method::GET, ITEMS, Some(&acme), None).await;
    assert_eq!(seen["total"], 0, "{seen}");
    let (st, e) = s.raw(Method::POST, VMS, Some(&acme), Some(body("late", json!({"catalog_item": "tiny-ci"})))).await;
    assert_eq!((st, fields(&e)), (400, vec!["object.spec.catalog_item"]), "{e}");
    let (_, kept) = s.raw(Method::GET, &format!("{VMS}/{id}"), Some(&acme), None).await;
    assert_eq!(kept["object"]["spec"]["catalog_item"]["id"], json!(item_id), "{kept}");

    // In use, it stays.
    let (st, e) = s.raw(Method::DELETE, &format!("{ITEMS}/{item_id}"), Some(&admin), None).await;
    assert!(st == 409 && e["message"].as_str().unwrap_or("").contains("\"box\""), "{st} {e}");
}

const ITEM_TF: &str = r#"
terraform {
  required_providers {
    vmaas = { source = "vmaas/vmaas" }
  }
}
provider "vmaas" {}

variable "title" {
  type    = string
  default = "CI runner"
}

resource "vmaas_catalog_item" "ci" {
  name      = "tiny-ci"
  template  = "tiny"
  title     = var.title
  published = true
  field_definition {
    path              = "template_parameters.vm_cpu_cores"
    editable          = true
    default           = 1
    validation_schema = jsonencode({ type = "integer", maximum = 2 })
  }
  field_definition {
    path     = "run_strategy"
    editable = false
    default  = "Halted"
  }
}

output "id" {
  value = vmaas_catalog_item.ci.id
}
"#;

const VMS_TF: &str = r#"
terraform {
  required_providers {
    vmaas = { source = "vmaas/vmaas" }
  }
}
provider "vmaas" {}

resource "vmaas_virtual_machine" "a" {
  name                = "a-box"
  catalog_item        = "tiny-ci"
  state               = "stopped"
  template_parameters = { vm_cpu_cores = "2" }
}

resource "vmaas_virtual_machine" "b" {
  name         = "b-box"
  catalog_item = "tiny-ci"
  state        = "stopped"
}

output "template" {
  value = vmaas_virtual_machine.b.template
}
"#;

async fn terraform_scenario(tf: Tf) {
    let s = Server::start(Db::Sqlite).await.unwrap();
    publish(&s, TINY);
    let admin = s.token("ops", true);
    let w = Workspace::new(tf, &s, &admin, ITEM_TF);
    w.apply(&[]);
    let id = w.output("id");
    let (_, o) = s.raw(Method::GET, &format!("{ITEMS}/{id}"), Some(&admin), None).await;
    let defs = &o["object"]["field_definitions"];
    assert_eq!((&defs[0]["default"], &defs[1]["default"], &defs[1]["editable"]), (&json!(1), &json!("Halted"), &json!(false)), "{o}");
    assert_eq!(o["object"]["published"], true, "{o}");
    assert_eq!(w.plan_code(&[]).0, 0, "no drift");
    // A tenant's VMs from the item: its template (typing the parameters),
    // its defaults for what they leave out, no drift from either.
    let acme = s.token("acme", false);
    let vms = Workspace::new(tf, &s, &acme, VMS_TF);
    vms.apply(&[]);
    let (_, list) = s.raw(Method::GET, VMS, Some(&acme), None).await;
    let mut by_name: Vec<&Value> = list["items"].as_array().into_iter().flatten().collect();
    by_name.sort_by_key(|v| v["metadata"]["name"].as_str().unwrap_or_default().to_owned());
    let made: Vec<(&Value, &Value, &Value, &Value)> = by_name
        .iter()
        .map(|v| {
            (
                &v["spec"]["catalog_item"]["id"],
                &v["spec"]["template"],
                &v["spec"]["state"],
                &v["spec"]["template_parameters"]["vm_cpu_cores"]["value"],
            )
        })
        .collect();
    let item = json!(id);
    assert_eq!(
        made,
        vec![(&item, &json!("tiny"), &json!("stopped"), &json!(2)), (&item, &json!("tiny"), &json!("stopped"), &json!(1))],
        "{list}"
    );
    assert_eq!(vms.output("template"), "tiny", "the item's template, computed");
    assert_eq!(vms.plan_code(&[]).0, 0, "no drift from the item's defaults");
    vms.ok(&["destroy", "-auto-approve", "-no-color"]);

    let text = w.apply(&["-var", "title=Runner"]);
    assert!(text.contains("0 added, 1 changed, 0 destroyed"), "{text}");
    let (_, o) = s.raw(Method::GET, &format!("{ITEMS}/{id}"), Some(&admin), None).await;
    assert_eq!((&o["object"]["title"], o["object"]["field_definitions"].as_array().map(Vec::len)), (&json!("Runner"), Some(2)), "{o}");
    w.ok(&["destroy", "-auto-approve", "-no-color"]);
    let (_, list) = s.raw(Method::GET, ITEMS, Some(&admin), None).await;
    assert_eq!(list["total"], 0, "{list}");
}

vmaas_tests::on_every_terraform!(terraform_scenario: catalog_item_tofu, catalog_item_terraform_1_0_3, catalog_item_terraform_1_15_5);
