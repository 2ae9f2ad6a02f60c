//! `user_data_wo`: user data given write-only (plugin protocol 6.8). On
//! OpenTofu 1.12 and Terraform 1.15 the VM gets it while neither the plan
//! nor the state file ever holds it, a re-plan has nothing to do, and a new
//! `user_data_wo_version` replaces the VM with the new user data. Terraform
//! 1.0.3 cannot keep a value out of its state: the provider refuses the
//! attribute there, naming it, before anything is made.

use reqwest::Method;
use vmaas_tests::Server;
use vmaas_tests::tf::{Tf, Workspace};
use vmaas_tests::vms::{TINY, V1, publish};

const MAIN_TF: &str = r##"
terraform {
  required_providers {
    vmaas = { source = "vmaas/vmaas" }
  }
}

variable "secret" {
  type      = string
  sensitive = true
}

variable "user_data_version" {
  type    = number
  default = 1
}

resource "vmaas_virtual_machine" "vm" {
  name                 = "wo"
  template             = "tiny"
  user_data_wo         = "#cloud-config\nchpasswd:\n  list: |\n    debian:${var.secret}\n"
  user_data_wo_version = var.user_data_version
}
"##;

async fn user_data_of(s: &Server, t: &str) -> Vec<String> {
    let (_, list) = s.raw(Method::GET, &format!("{V1}/virtual_machines"), Some(t), None).await;
    list["items"].as_array().into_iter().flatten().map(|v| v["spec"]["user_data"].as_str().unwrap_or_default().to_owned()).collect()
}

/// Every file the workspace wrote (state, plans, backups), as text.
fn written(w: &Workspace) -> String {
    let mut all = String::new();
    for e in std::fs::read_dir(w.dir()).expect("workspace").flatten() {
        if e.path().is_file() && e.file_name() != "main.tf" {
            all.push_str(&String::from_utf8_lossy(&std::fs::read(e.path()).unwrap_or_default()));
        }
    }
    all
}

async fn scenario(tf: Tf) {
    let s = Server::start_qemu().await;
    publish(&s, TINY);
    let t = s.token("acme", false);
    let w = Workspace::new(tf, &s, &t, MAIN_TF);
    let first = "first-s3cret-4f1c";
    if tf == Tf::V1_0_3 {
        let out = w.run(&["apply", "-auto-approve", "-no-color", "-input=false", "-var", &format!("secret={first}")]);
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(!out.status.success() && text.contains("user_data_wo is write-only") && text.contains("1.11"), "{text}");
        assert!(user_data_of(&s, &t).await.is_empty(), "nothing made");
        return;
    }
    w.ok(&["plan", "-no-color", "-input=false", "-var", &format!("secret={first}"), "-out=first.plan"]);
    w.apply(&["-var", &format!("secret={first}")]);
    let had = user_data_of(&s, &t).await;
    assert!(had.len() == 1 && had[0].contains(first), "the VM got the write-only user data: {had:?}");
    assert!(!written(&w).contains(first), "{tf:?} kept the write-only value in a plan or the state");
    let (code, text) = w.plan_code(&["-var", &format!("secret={first}")]);
    assert_eq!(code, 0, "nothing to do:\n{text}");

    // A new version replaces the VM with the new user data.
    let second = "second-s3cret-9a2e";
    let text = w.apply(&["-var", &format!("secret={second}"), "-var", "user_data_version=2"]);
    assert!(text.contains("1 added, 0 changed, 1 destroyed"), "{text}");
    let now = user_data_of(&s, &t).await;
    assert!(now.len() == 1 && now[0].contains(second), "{now:?}");
    assert!(!written(&w).contains(second), "{tf:?} kept the new write-only value");
    w.ok(&["destroy", "-auto-approve", "-no-color", "-input=false", "-var", &format!("secret={second}"), "-var", "user_data_version=2"]);
}

vmaas_tests::on_every_terraform!(scenario: user_data_wo_tofu, user_data_wo_terraform_1_0_3, user_data_wo_terraform_1_15_5);
