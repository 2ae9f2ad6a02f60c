//! Instance types through the real `vmaas-server`, on SQLite and on
//! PostgreSQL: published by administrators, read by every tenant, their
//! shape fixed, their lifecycle (deprecate with a replacement, obsolete,
//! active again) with the times the server sets; a template's default and
//! allowed types; through the CLI; and as
//! `vmaas_instance_type` on both Terraform versions.

use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::tf::{Tf, Workspace};
use vmaas_tests::{Db, Server, on_both_databases};

const TYPES: &str = "/api/fulfillment/v1/instance_types";

fn shape(name: &str, cores: u32, memory_gib: u32) -> Value {
    json!({"object": {"metadata": {"name": name}, "spec": {"cores": cores, "memory_gib": memory_gib}}})
}

/// A 400 whose details name exactly `fields`, in order.
fn assert_refused(st: u16, e: &Value, fields: &[&str]) {
    assert_eq!(st, 400, "{e}");
    let named: Vec<&str> = e["details"].as_array().unwrap().iter().map(|d| d["field"].as_str().unwrap_or("")).collect();
    assert_eq!(named, fields, "{e}");
}

async fn patch(s: &Server, token: &str, id: &str, spec: Value) -> (u16, Value) {
    s.raw(Method::PATCH, &format!("{TYPES}/{id}"), Some(token), Some(json!({"object": {"spec": spec}}))).await
}

on_both_databases! {
    async fn a_template_names_a_default_instance_type_and_those_it_allows(db: Db) {
        let Some(s) = Server::start(db).await else { return };
        let (admin, acme) = (s.token("ops", true), s.token("acme", false));
        for (name, cores, gib) in [("t.small", 1, 1), ("t.large", 4, 8), ("t.other", 2, 2)] {
            assert_eq!(s.raw(Method::POST, TYPES, Some(&admin), Some(shape(name, cores, gib))).await.0, 201);
        }
        let template = "id: shaped\nspec_defaults: {image: test-guest, instance_type: t.small, instance_types: [t.small, t.large]}\n";
        vmaas_tests::vms::publish(&s, template);
        let vms = "/api/fulfillment/v1/virtual_machines";
        let vm = |name: &str, ty: Option<&str>| {
            let mut spec = json!({"template": "shaped"});
            if let Some(t) = ty {
                spec["instance_type"] = json!(t);
            }
            json!({"object": {"metadata": {"name": name}, "spec": spec}})
        };
        let (st, o) = s.raw(Method::POST, vms, Some(&acme), Some(vm("plain", None))).await;
        assert_eq!(st, 201, "{o}");
        assert_eq!(o["object"]["spec"]["instance_type"]["name"], "t.small", "the template's default: {o}");
        let (st, o) = s.raw(Method::POST, vms, Some(&acme), Some(vm("large", Some("t.large")))).await;
        assert_eq!(st, 201, "{o}");
        assert_eq!(o["object"]["spec"]["instance_type"]["name"], "t.large");
        let (st, e) = s.raw(Method::POST, vms, Some(&acme), Some(vm("other", Some("t.other")))).await;
        assert_refused(st, &e, &["object.spec.instance_type"]);
        assert!(e.to_string().contains("allows the instance types"), "{e}");
    }
}

on_both_databases! {
    async fn administrators_publish_instance_types_and_every_tenant_reads_them(db: Db) {
        let Some(s) = Server::start(db).await else { return };
        let (admin, acme) = (s.token("ops", true), s.token("acme", false));
        let (st, o) = s.raw(Method::POST, TYPES, Some(&admin), Some(shape("general.small", 2, 4))).await;
        assert_eq!(st, 201, "{o}");
        let small = o["object"]["id"].as_str().unwrap().to_owned();
        assert_eq!(o["object"]["@type"], "type.googleapis.com/osac.public.v1.InstanceType");
        assert_eq!(o["object"]["spec"], json!({"cores": 2, "memory_gib": 4, "state": "INSTANCE_TYPE_STATE_ACTIVE"}));
        assert_eq!((o["object"]["metadata"]["tenant"].as_str(), &o["object"]["status"]), (Some(""), &json!({})));

        // A tenant reads, never writes.
        let (st, e) = s.raw(Method::POST, TYPES, Some(&acme), Some(shape("mine", 1, 1))).await;
        assert!(st == 403 && e["message"].as_str().unwrap().contains("only administrators"), "{st} {e}");
        assert_eq!(patch(&s, &acme, &small, json!({"description": "x"})).await.0, 403);
        assert_eq!(s.raw(Method::DELETE, &format!("{TYPES}/{small}"), Some(&acme), None).await.0, 403);
        let (st, got) = s.raw(Method::GET, &format!("{TYPES}/{small}"), Some(&acme), None).await;
        assert_eq!((st, got["object"]["metadata"]["name"].as_str()), (200, Some("general.small")), "{got}");
        let (_, named) = s.raw(Method::GET, &format!("{TYPES}?name=general.small"), Some(&acme), None).await;
        assert_eq!(named["items"][0]["id"].as_str(), Some(small.as_str()), "{named}");

        // Bad shapes name every field; nothing is made; a name is taken once.
        let bad = json!({"object": {"metadata": {"name": "bad"}, "spec": {"cores": 0, "memory_gib": 0,
            "gpu": {"pci_device_selector": "nvidia", "resource_name": "nvidia.com/A100", "count": 17}}}});
        let (st, e) = s.raw(Method::POST, TYPES, Some(&admin), Some(bad)).await;
        assert_refused(st, &e, &["object.spec.cores", "object.spec.memory_gib", "object.spec.gpu.pci_device_selector", "object.spec.gpu.count"]);
        let (st, e) = s.raw(Method::POST, TYPES, Some(&admin), Some(json!({"object": {"metadata": {"name": "x"}, "spec": {"cores": 1, "memory_gib": 1, "cpus": 2}}}))).await;
        assert!(st == 400 && e["message"].as_str().unwrap().contains("cpus"), "{st} {e}");
        assert_eq!(s.raw(Method::POST, TYPES, Some(&admin), Some(shape("general.small", 4, 8))).await.0, 409);
        let (_, page) = s.raw(Method::GET, TYPES, Some(&acme), None).await;
        assert_eq!(page["total"], 1, "{page}");

        // The shape is fixed; the lifecycle moves, with a replacement the server resolves.
        let (st, e) = patch(&s, &admin, &small, json!({"cores": 4, "memory_gib": 4})).await;
        assert_refused(st, &e, &["object.spec.cores"]);
        let deprecate = |to: &str| json!({"state": "INSTANCE_TYPE_STATE_DEPRECATED", "deprecation": {"replacement": to}});
        let (st, e) = patch(&s, &admin, &small, deprecate("general.medium")).await;
        assert!(st == 400 && e["details"][0]["reason"].as_str().unwrap().contains("no instance type \"general.medium\""), "{st} {e}");
        let (st, e) = patch(&s, &admin, &small, deprecate("general.small")).await;
        assert!(st == 400 && e["details"][0]["reason"].as_str().unwrap().contains("cannot replace itself"), "{st} {e}");
        let (_, m) = s.raw(Method::POST, TYPES, Some(&admin), Some(shape("general.medium", 4, 8))).await;
        let medium = m["object"]["id"].as_str().unwrap().to_owned();
        let (st, o) = patch(&s, &admin, &small, deprecate("general.medium")).await;
        assert_eq!(st, 200, "{o}");
        let d = &o["object"]["spec"]["deprecation"];
        assert_eq!(d["replacement"], json!({"id": medium, "name": "general.medium"}));
        assert_eq!(d["state"], "INSTANCE_TYPE_STATE_DEPRECATED");
        assert!(d["deprecation_timestamp"].is_string() && d["obsolescence_timestamp"].is_null(), "{d}");
        let (_, listed) = s.raw(Method::GET, &format!("{TYPES}?state=deprecated"), Some(&acme), None).await;
        assert_eq!((listed["total"].as_u64(), listed["items"][0]["id"].as_str()), (Some(1), Some(small.as_str())), "{listed}");

        // Obsolete: refused as a replacement; its times kept; ACTIVE again drops the deprecation.
        let (st, o) = patch(&s, &admin, &medium, json!({"state": "INSTANCE_TYPE_STATE_OBSOLETE"})).await;
        assert!(st == 200 && o["object"]["spec"]["deprecation"]["obsolescence_timestamp"].is_string(), "{st} {o}");
        let (st, e) = patch(&s, &admin, &small, deprecate(&medium)).await;
        assert!(st == 400 && e["details"][0]["reason"].as_str().unwrap().contains("OBSOLETE"), "{st} {e}");
        let (st, o) = patch(&s, &admin, &medium, json!({"state": "INSTANCE_TYPE_STATE_ACTIVE"})).await;
        assert!(st == 200 && o["object"]["spec"].get("deprecation").is_none(), "{st} {o}");

        let (st, _) = s.raw(Method::DELETE, &format!("{TYPES}/{small}"), Some(&admin), None).await;
        assert_eq!(st, 202);
        assert_eq!(s.raw(Method::GET, &format!("{TYPES}/{small}"), Some(&acme), None).await.0, 404);
    }
}

on_both_databases! {
    async fn a_vm_takes_its_shape_from_its_instance_type(db: Db) {
        let Some(s) = Server::start(db).await else { return };
        let (admin, acme) = (s.token("ops", true), s.token("acme", false));
        vmaas_tests::seed::publish(&s, &admin).await;
        for (name, cores, gib) in [("general.small", 2, 4), ("general.large", 8, 32), ("old.small", 1, 2), ("older.small", 1, 1)] {
            assert_eq!(s.raw(Method::POST, TYPES, Some(&admin), Some(shape(name, cores, gib))).await.0, 201);
        }
        let deprecate = json!({"state": "INSTANCE_TYPE_STATE_DEPRECATED", "deprecation": {"replacement": "general.small"}});
        assert_eq!(patch(&s, &admin, "old.small", deprecate.clone()).await.0, 404, "a PATCH names the type by id");
        let id = |name: &'static str| {
            let s = &s;
            let admin = admin.clone();
            async move { s.raw(Method::GET, &format!("{TYPES}?name={name}"), Some(&admin), None).await.1["items"][0]["id"].as_str().unwrap().to_owned() }
        };
        assert_eq!(patch(&s, &admin, &id("old.small").await, deprecate.clone()).await.0, 200);
        assert_eq!(patch(&s, &admin, &id("older.small").await, deprecate).await.0, 200);
        assert_eq!(patch(&s, &admin, &id("older.small").await, json!({"state": "INSTANCE_TYPE_STATE_OBSOLETE"})).await.0, 200);

        let vms = "/api/fulfillment/v1/virtual_machines";
        let vm = |name: &str, instance_type: Value, params: Value| {
            json!({"object": {"metadata": {"name": name}, "spec": {"template": "simple_vm", "instance_type": instance_type, "template_parameters": params}}})
        };
        let usage = || async { s.raw(Method::GET, "/api/fulfillment/v1/tenants/acme/quota", Some(&acme), None).await.1["object"]["status"]["usage"].clone() };

        // By name: its cores and memory replace the template's defaults (2 cores, 2Gi).
        let (st, a) = s.raw(Method::POST, vms, Some(&acme), Some(vm("a", json!("general.small"), json!({})))).await;
        assert_eq!(st, 201, "{a}");
        let small = id("general.small").await;
        assert_eq!(a["object"]["spec"]["instance_type"], json!({"id": small, "name": "general.small"}));
        let u = usage().await;
        assert_eq!((&u["cores"], &u["memory"]), (&json!(2), &json!("4Gi")), "{u}");
        // A parameter that agrees is taken; one that disagrees is a 400 naming it; nothing is made.
        let agrees = json!({"vm_cpu_cores": {"value": 8}, "vm_memory": {"value": "32Gi"}});
        assert_eq!(s.raw(Method::POST, vms, Some(&acme), Some(vm("b", json!({"name": "general.large"}), agrees))).await.0, 201);
        let (st, e) = s.raw(Method::POST, vms, Some(&acme), Some(vm("c", json!("general.small"), json!({"vm_cpu_cores": {"value": 4}})))).await;
        assert_refused(st, &e, &["object.spec.template_parameters.vm_cpu_cores.value"]);
        assert!(e["details"][0]["reason"].as_str().unwrap().contains("instance type \"general.small\" has 2"), "{e}");
        // An unknown type and an obsolete one are refused naming the field; a deprecated one is taken.
        let (st, e) = s.raw(Method::POST, vms, Some(&acme), Some(vm("c", json!("huge"), json!({})))).await;
        assert_refused(st, &e, &["object.spec.instance_type"]);
        let (st, e) = s.raw(Method::POST, vms, Some(&acme), Some(vm("c", json!("older.small"), json!({})))).await;
        assert_refused(st, &e, &["object.spec.instance_type"]);
        assert!(e["details"][0]["reason"].as_str().unwrap().contains("OBSOLETE") && e.to_string().contains("general.small"), "{e}");
        assert_eq!(s.raw(Method::POST, vms, Some(&acme), Some(vm("c", json!("old.small"), json!({})))).await.0, 201);
        let u = usage().await;
        assert_eq!((&u["virtual_machines"], &u["cores"], &u["memory"]), (&json!(3), &json!(11), &json!("38Gi")), "{u}");

        // A new instance type on PATCH resizes the VM (at its next start); the quota counts it at once.
        let a_id = a["object"]["id"].as_str().unwrap();
        let resize = json!({"object": {"spec": {"instance_type": "general.large"}}});
        let (st, o) = s.raw(Method::PATCH, &format!("{vms}/{a_id}"), Some(&acme), Some(resize)).await;
        assert_eq!((st, &o["object"]["spec"]["instance_type"]["name"]), (200, &json!("general.large")), "{o}");
        assert_eq!(usage().await["cores"], 17);

        // A VM of a deprecated type: its status names the replacement; deprecating the
        // type of running VMs wakes them to say so; a type in use is not deleted.
        let c = s.raw(Method::GET, &format!("{vms}?name=c"), Some(&acme), None).await.1["items"][0]["id"].as_str().unwrap().to_owned();
        let named = |id: String| {
            let (s, acme) = (&s, acme.clone());
            async move {
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
                loop {
                    let (_, o) = s.raw(Method::GET, &format!("{vms}/{id}"), Some(&acme), None).await;
                    let d = o["object"]["status"]["instance_type_deprecation"].clone();
                    if d["replacement"]["name"].is_string() {
                        return d;
                    }
                    assert!(std::time::Instant::now() < deadline, "no deprecation in the status: {o}");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            }
        };
        let d = named(c).await;
        assert_eq!((d["state"].as_str(), d["replacement"]["name"].as_str()), (Some("INSTANCE_TYPE_STATE_DEPRECATED"), Some("general.small")), "{d}");
        let large = id("general.large").await;
        assert_eq!(patch(&s, &admin, &large, json!({"state": "INSTANCE_TYPE_STATE_DEPRECATED", "deprecation": {"replacement": "general.small"}})).await.0, 200);
        assert_eq!(named(a_id.to_owned()).await["replacement"]["name"], "general.small");
        let (st, e) = s.raw(Method::DELETE, &format!("{TYPES}/{large}"), Some(&admin), None).await;
        assert!(st == 409 && e["message"].as_str().unwrap().contains("\"a\" (acme)") && e["message"].as_str().unwrap().contains("\"b\""), "{st} {e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_publishes_and_deprecates_instance_types() {
    let s = Server::start(Db::Sqlite).await.unwrap();
    let (admin, acme) = (s.token("ops", true), s.token("acme", false));
    for (name, cores) in [("general.small", "2"), ("general.large", "8")] {
        let o = s.cli(&admin, &["instance-type", "create", name, "--cores", cores, "--memory-gib", "16"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let o = s.cli(
        &admin,
        &["instance-type", "create", "gpu.large", "--cores", "8", "--memory-gib", "64", "--gpu", "10DE:20B0,nvidia.com/A100,2"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = s.cli(&acme, &["instance-type", "create", "mine", "--cores", "1", "--memory-gib", "1"]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("only administrators"), "{o:?}");
    let o = s.cli(&admin, &["instance-type", "deprecate", "general.small", "--replacement", "general.large"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let table = String::from_utf8_lossy(&s.cli(&acme, &["instance-type", "list"]).stdout).into_owned();
    let small = table.lines().find(|l| l.contains("general.small")).unwrap_or_default();
    assert!(small.contains("DEPRECATED") && small.contains("general.large"), "{table}");
    assert!(table.lines().any(|l| l.contains("gpu.large") && l.contains("2× nvidia.com/A100")), "{table}");
    let json = s.cli(&acme, &["-o", "json", "instance-type", "get", "general.small"]);
    let got: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(got["spec"]["deprecation"]["replacement"]["name"], "general.large", "{got}");
}

const TYPES_TF: &str = r#"
terraform {
  required_providers {
    vmaas = { source = "vmaas/vmaas" }
  }
}
provider "vmaas" {}

variable "small_state" {
  type    = string
  default = "INSTANCE_TYPE_STATE_ACTIVE"
}

variable "replacement" {
  type    = string
  default = null
}

resource "vmaas_instance_type" "large" {
  name        = "general.large"
  cores       = 8
  memory_gib  = 32
  description = "Large."
}

resource "vmaas_instance_type" "small" {
  name        = "general.small"
  cores       = 2
  memory_gib  = 4
  state       = var.small_state
  replacement = var.replacement
}

data "vmaas_instance_type" "small" {
  name       = "general.small"
  depends_on = [vmaas_instance_type.small]
}

output "small_id" {
  value = vmaas_instance_type.small.id
}

output "seen_state" {
  value = data.vmaas_instance_type.small.state
}
"#;

async fn terraform_scenario(tf: Tf) {
    let s = Server::start(Db::Sqlite).await.unwrap();
    let admin = s.token("ops", true);
    let w = Workspace::new(tf, &s, &admin, TYPES_TF);
    w.apply(&[]);
    let id = w.output("small_id");
    assert_eq!(w.output("seen_state"), "INSTANCE_TYPE_STATE_ACTIVE");
    assert_eq!(w.plan_code(&[]).0, 0, "no drift");
    // Deprecating changes it in place: the same id, a replacement resolved by the server.
    let args = ["-var", "small_state=INSTANCE_TYPE_STATE_DEPRECATED", "-var", "replacement=general.large"];
    let text = w.apply(&args);
    assert!(text.contains("0 added, 1 changed, 0 destroyed"), "{text}");
    assert_eq!(w.output("small_id"), id);
    let (_, o) = s.raw(Method::GET, &format!("{TYPES}/{id}"), Some(&admin), None).await;
    assert_eq!(o["object"]["spec"]["deprecation"]["replacement"]["name"], "general.large", "{o}");
    // A state the server does not know fails the apply with its reason; nothing changes.
    let out = w.run(&["apply", "-auto-approve", "-no-color", "-var", "small_state=RETIRED", "-var", "replacement=general.large"]);
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success() && text.contains("RETIRED"), "{text}");
    let (_, o) = s.raw(Method::GET, &format!("{TYPES}/{id}"), Some(&admin), None).await;
    assert_eq!(o["object"]["spec"]["state"], "INSTANCE_TYPE_STATE_DEPRECATED", "{o}");
    // ACTIVE again, in place: the deprecation is dropped.
    let text = w.apply(&["-var", "small_state=INSTANCE_TYPE_STATE_ACTIVE"]);
    assert!(text.contains("0 added, 1 changed, 0 destroyed"), "{text}");
    let (_, o) = s.raw(Method::GET, &format!("{TYPES}/{id}"), Some(&admin), None).await;
    assert!(o["object"]["spec"].get("deprecation").is_none(), "{o}");
    w.ok(&["destroy", "-auto-approve", "-no-color"]);
    let (_, list) = s.raw(Method::GET, TYPES, Some(&admin), None).await;
    assert_eq!(list["total"], 0, "{list}");
}

vmaas_tests::on_every_terraform!(terraform_scenario: instance_type_tofu, instance_type_terraform_1_0_3, instance_type_terraform_1_15_5);

const RESIZE_TF: &str = r#"
terraform {
  required_providers {
    vmaas = { source = "vmaas/vmaas" }
  }
}
provider "vmaas" {}

variable "bigger" {
  type    = bool
  default = false
}

resource "vmaas_instance_type" "small" {
  name       = "t.small"
  cores      = 1
  memory_gib = 1
}

resource "vmaas_instance_type" "medium" {
  name       = "t.medium"
  cores      = 2
  memory_gib = 1
}

resource "vmaas_virtual_machine" "vm" {
  name          = "shaped"
  template      = "tiny"
  instance_type = var.bigger ? vmaas_instance_type.medium.name : vmaas_instance_type.small.name
}

output "id" {
  value = vmaas_virtual_machine.vm.id
}

output "status" {
  value = vmaas_virtual_machine.vm.status
}
"#;

/// A real VM of an instance type, resized in place by naming another:
/// the same VM, which takes the new shape at its next start.
async fn resize_scenario(tf: Tf) {
    let s = Server::start_qemu().await;
    let admin = s.token("ops", true);
    vmaas_tests::vms::publish(&s, vmaas_tests::vms::TINY);
    let w = Workspace::new(tf, &s, &admin, RESIZE_TF);
    w.apply(&[]);
    assert_eq!(w.output("status"), "READY");
    let id = w.output("id");
    assert_eq!(w.plan_code(&[]).0, 0, "no drift");
    let text = w.apply(&["-var", "bigger=true"]);
    assert!(text.contains("0 added, 1 changed, 0 destroyed"), "an in-place resize: {text}");
    assert_eq!(w.output("id"), id, "the same VM");
    let vm = format!("/api/fulfillment/v1/virtual_machines/{id}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let (_, o) = s.raw(Method::GET, &vm, Some(&admin), None).await;
        assert_eq!(o["object"]["spec"]["instance_type"]["name"], "t.medium", "{o}");
        if vmaas_tests::vms::restart_required(&o["object"]) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no RESTART_REQUIRED after the resize: {o}");
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    assert_eq!(w.plan_code(&["-var", "bigger=true"]).0, 0, "no drift after the resize");
    w.ok(&["destroy", "-auto-approve", "-no-color", "-var", "bigger=true"]);
}

vmaas_tests::on_every_terraform!(resize_scenario: vm_instance_type_tofu, vm_instance_type_terraform_1_0_3, vm_instance_type_terraform_1_15_5);
