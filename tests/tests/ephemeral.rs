//! Ephemeral VMs on the real server and real guests: a VM created with a
//! TTL boots, and the server deletes it when it expires, with its
//! auto-delete volume, writing the deletion to the event log and the audit
//! log; a PATCH extends a VM's life; a tenant's maximum TTL (its quota's
//! `max_vm_ttl`) gives every new VM an end and refuses a longer one; bad
//! TTLs are refused naming the field.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::Server;
use vmaas_tests::objects::{created, post, ready_volume, wait_for};
use vmaas_tests::vms::{TINY, V1, publish, wait_ready};

fn end_of(v: &Value) -> DateTime<Utc> {
    v["spec"]["expires_at"].as_str().unwrap_or_else(|| panic!("no expires_at: {v}")).parse().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_expired_vm_is_deleted_with_its_auto_delete_volume() {
    let s = Server::start_qemu().await;
    publish(&s, TINY);
    let t = s.token("ci", false);
    let (_, after) = s.raw(Method::GET, "/api/events/v1/events", Some(&t), None).await;
    let after = after["items"].as_array().and_then(|i| i.last()).and_then(|e| e["id"].as_str()).unwrap_or("0").to_owned();

    let (vol, file) = ready_volume(&s, &t, "scratch", "64Mi").await;
    let asked = Utc::now();
    let (st, vm) = post(&s, &t, "virtual_machines", json!({"metadata": {"name": "job"}, "spec": {"template": "tiny", "ttl": "20s"}})).await;
    assert_eq!(st, 201, "{vm}");
    let (id, end) = (vm["object"]["id"].as_str().unwrap().to_owned(), end_of(&vm["object"]));
    assert_eq!(vm["object"]["spec"]["ttl"], "20s", "the TTL is kept as written");
    let from_now = (end - asked).num_milliseconds();
    assert!((19_000..=22_000).contains(&from_now), "the end is 20 s after the create: {from_now} ms");
    post(
        &s,
        &t,
        "volume_attachments",
        json!({"metadata": {"name": "scratch-on-job"}, "spec": {"volume": vol, "compute_instance": id, "auto_delete": true}}),
    )
    .await;
    wait_ready(&s, &t, &id).await;
    assert!(Utc::now() < end, "the test guest booted before its end");

    // A 5 s TTL (the template's snapshot made now, so it boots at once): gone within 2 s of its end.
    let (st, short) =
        post(&s, &t, "virtual_machines", json!({"metadata": {"name": "short"}, "spec": {"template": "tiny", "ttl": "5s"}})).await;
    assert_eq!(st, 201, "{short}");
    let (short, short_end) = (short["object"]["id"].as_str().unwrap().to_owned(), end_of(&short["object"]));
    wait_for(&s, &t, &format!("virtual_machines/{short}"), "the 5 s VM gone", |v| v.is_none()).await;
    let late = (Utc::now() - short_end).num_milliseconds();
    println!("the 5 s VM was gone {late} ms after its end");
    assert!((0..=2_000).contains(&late), "gone {late} ms after its end (goal: not before it, and within 2 s)");

    // It goes at its end, not before, with the volume it took along.
    let gone = wait_for(&s, &t, &format!("virtual_machines/{id}"), "the expired VM gone", |v| v.is_none()).await;
    assert!(gone.is_null());
    let took = Utc::now() - end;
    assert!(took.num_seconds() < 30, "deleted {took} after its end");
    wait_for(&s, &t, &format!("volumes/{vol}"), "its auto-delete volume gone", |v| v.is_none()).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while file.exists() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(!file.exists(), "the volume's file went with it: {}", file.display());

    // The event log and the audit log say so.
    let (_, events) = s.raw(Method::GET, &format!("/api/events/v1/events?after={after}"), Some(&t), None).await;
    let deleted = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["type"] == "EVENT_TYPE_OBJECT_DELETED" && e["virtual_machine"]["id"] == id.as_str());
    assert!(deleted, "a deletion event for the VM: {events}");
    let audit = std::fs::read_to_string(s.data_dir.join("audit.log")).unwrap_or_default();
    let line = audit.lines().find(|l| l.contains(&id) && l.contains("\"DELETE\"")).unwrap_or_else(|| panic!("no audit line:\n{audit}"));
    let line: Value = serde_json::from_str(line).unwrap();
    assert_eq!((line["subject"].as_str(), line["tenant"].as_str()), (Some("vmaas-server (expired)"), Some("ci")), "{line}");
    assert!(s.log().contains("virtual machine expired"), "the server's log says why");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_life_is_extended_limited_by_the_tenants_maximum_and_checked() {
    let Some(s) = Server::start_with(vmaas_tests::Db::Sqlite, &["--backend", "none"]).await else { return };
    publish(&s, TINY);
    let (admin, t) = (s.token("ops", true), s.token("ci", false));
    let vm = |name: &str, extra: Value| {
        let mut spec = json!({"template": "tiny"});
        spec.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        json!({"metadata": {"name": name}, "spec": spec})
    };

    // Bad asks name their field; nothing is made.
    for (extra, field, says) in [
        (json!({"ttl": "soon"}), "object.spec.ttl", "is not a duration"),
        (json!({"ttl": "0s"}), "object.spec.ttl", "longer than 0"),
        (json!({"ttl": "1h", "expires_at": "2099-01-01T00:00:00Z"}), "object.spec.ttl", "not both"),
        (json!({"expires_at": "2001-01-01T00:00:00Z"}), "object.spec.expires_at", "not in the future"),
    ] {
        let (st, e) = post(&s, &t, "virtual_machines", vm("bad", extra.clone())).await;
        assert_eq!(st, 400, "{extra}: {e}");
        let details = e["details"].to_string();
        assert!(details.contains(field) && details.contains(says), "{extra}: {e}");
    }
    let (_, none) = s.raw(Method::GET, &format!("{V1}/virtual_machines"), Some(&t), None).await;
    assert_eq!(none["total"], 0, "{none}");

    // No end asked and no maximum: it lives on. A PATCH gives it one, then moves it.
    let id = created(&s, &t, "virtual_machines", vm("long", json!({}))).await;
    let path = format!("{V1}/virtual_machines/{id}");
    let (_, v) = s.raw(Method::GET, &path, Some(&t), None).await;
    assert!(v["object"]["spec"].get("expires_at").is_none(), "{v}");
    let (st, v) = s.raw(Method::PATCH, &path, Some(&t), Some(json!({"object": {"spec": {"ttl": "1h"}}}))).await;
    assert_eq!(st, 200, "{v}");
    let first = end_of(&v["object"]);
    assert!((first - Utc::now()).num_minutes() >= 59, "{first}");
    let shown = s.cli(&t, &["vm", "get", "long"]);
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.lines().any(|l| l.starts_with("Expires") && l.contains("(in 59m")), "the CLI shows the end: {shown}");
    let made = s.cli_json(&t, &["vm", "create", "cli-job", "-t", "tiny", "--ttl", "2h"]);
    assert_eq!(made["spec"]["ttl"], "2h", "{made}");
    assert!((end_of(&made) - Utc::now()).num_minutes() >= 119, "{made}");
    let (st, v) = s.raw(Method::PATCH, &path, Some(&t), Some(json!({"object": {"spec": {"ttl": "2h"}}}))).await;
    assert_eq!(st, 200, "{v}");
    assert!(end_of(&v["object"]) - first >= chrono::Duration::minutes(59), "extended by the new TTL from now");
    let (st, v) = s.raw(Method::PATCH, &path, Some(&t), Some(json!({"object": {"spec": {"ttl": ""}}}))).await;
    assert_eq!(st, 200, "{v}");
    assert!(v["object"]["spec"].get("expires_at").is_none(), "the end removed: {v}");

    // A maximum TTL: a new VM gets it, a longer one is refused, an end cannot be removed.
    let quota = format!("{V1}/tenants/ci/quota");
    let (st, e) = s.raw(Method::PUT, &quota, Some(&admin), Some(json!({"object": {"spec": {"max_vm_ttl": "forever"}}}))).await;
    assert_eq!(st, 400, "{e}");
    assert!(e["details"].to_string().contains("max_vm_ttl"), "{e}");
    let (st, e) = s.raw(Method::PUT, &quota, Some(&admin), Some(json!({"object": {"spec": {"max_vm_ttl": "8h"}}}))).await;
    assert!(st == 200 || st == 201, "{e}");
    let before = Utc::now();
    let short = created(&s, &t, "virtual_machines", vm("short", json!({}))).await;
    let (_, v) = s.raw(Method::GET, &format!("{V1}/virtual_machines/{short}"), Some(&t), None).await;
    let given = (end_of(&v["object"]) - before).num_minutes();
    assert!((479..=481).contains(&given), "the tenant's maximum is its TTL: {given} min");
    let (st, e) = post(&s, &t, "virtual_machines", vm("longer", json!({"ttl": "9h"}))).await;
    assert_eq!(st, 400, "{e}");
    assert!(e["details"].to_string().contains("maximum TTL of 8h"), "{e}");
    let (st, e) =
        s.raw(Method::PATCH, &format!("{V1}/virtual_machines/{short}"), Some(&t), Some(json!({"object": {"spec": {"ttl": ""}}}))).await;
    assert_eq!(st, 400, "{e}");
    assert!(e["details"].to_string().contains("cannot be removed"), "{e}");
}

const TTL_TF: &str = r#"
terraform {
  required_providers {
    vmaas = { source = "vmaas/vmaas" }
  }
}
provider "vmaas" {}

variable "ttl" {
  type    = string
  default = "1h"
}

resource "vmaas_virtual_machine" "vm" {
  name     = "job"
  template = "tiny"
  ttl      = var.ttl
}

output "id" {
  value = vmaas_virtual_machine.vm.id
}

output "expires_at" {
  value = vmaas_virtual_machine.vm.expires_at
}
"#;

/// A real VM with a TTL through Terraform: its end in the state, extended
/// in place, then a short TTL that the server acts on, which the next plan
/// sees (the VM to be made again).
async fn terraform_ttl_scenario(tf: vmaas_tests::tf::Tf) {
    let s = Server::start_qemu().await;
    publish(&s, TINY);
    let t = s.token("ci", false);
    let w = vmaas_tests::tf::Workspace::new(tf, &s, &t, TTL_TF);
    w.apply(&[]);
    let (id, first): (String, DateTime<Utc>) = (w.output("id"), w.output("expires_at").parse().unwrap());
    assert!((first - Utc::now()).num_minutes() >= 58, "an hour from the create: {first}");
    assert_eq!(w.plan_code(&[]).0, 0, "no drift");
    let text = w.apply(&["-var", "ttl=2h"]);
    assert!(text.contains("0 added, 1 changed, 0 destroyed"), "a TTL changes in place: {text}");
    assert_eq!(w.output("id"), id, "the same VM");
    let later: DateTime<Utc> = w.output("expires_at").parse().unwrap();
    assert!(later - first >= chrono::Duration::minutes(59), "two hours from the update: {first} → {later}");
    assert_eq!(w.plan_code(&["-var", "ttl=2h"]).0, 0, "no drift after the change");
    let text = w.apply(&["-var", "ttl=8s"]);
    assert!(text.contains("1 changed"), "{text}");
    wait_for(&s, &t, &format!("virtual_machines/{id}"), "the VM expired", |v| v.is_none()).await;
    assert_eq!(w.plan_code(&["-var", "ttl=8s"]).0, 2, "the next plan makes the expired VM again");
    w.ok(&["destroy", "-auto-approve", "-no-color", "-var", "ttl=8s"]);
}

vmaas_tests::on_every_terraform!(terraform_ttl_scenario: ttl_tofu, ttl_terraform_1_0_3, ttl_terraform_1_15_5);
