//! `ssh_keys` and `user_data` on `vmaas_virtual_machine`, with both
//! Terraform versions: checked at plan, applied by the guest, no drift, and
//! a change replaces the VM; and the `vmaas_images` data source.

use reqwest::Method;
use serde_json::Value;
use vmaas_tests::Server;
use vmaas_tests::tf::{Tf, Workspace, repo};
use vmaas_tests::vms::publish;

const KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGuestConfigTestKeyOnly ci@vmaas";

async fn vms(s: &Server, token: &str) -> Value {
    s.raw(Method::GET, "/api/fulfillment/v1/virtual_machines", Some(token), None).await.1
}

async fn scenario(tf: Tf) {
    let s = Server::start_qemu().await;
    publish(&s, &std::fs::read_to_string(repo().join("examples/templates/tiny.yaml")).unwrap());
    let t = s.token("ci", false);
    let main_tf = std::fs::read_to_string(repo().join("examples/terraform/guest-config/main.tf")).unwrap();
    let w = Workspace::new(tf, &s, &t, &main_tf);
    let key = format!("ssh_key={KEY}");

    // A key that is not one fails at plan, naming it.
    let (code, text) = w.plan_code(&["-var", "ssh_key=hunter2"]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("invalid SSH key") && text.contains("must start with a key type"), "{text}");

    w.apply(&["-var", &key]);
    assert_eq!(w.output("status"), "READY");
    // The vmaas_images data source lists the server's images.
    let images: Value = serde_json::from_str(&w.ok(&["output", "-json", "images"])).unwrap();
    assert!(images.as_array().unwrap().iter().any(|i| i == "test-guest"), "{images}");
    let vm = &vms(&s, &t).await["items"][0];
    assert_eq!(vm["spec"]["ssh_public_key"], KEY, "{vm}");
    assert!(vm["spec"]["user_data"].as_str().unwrap().contains("content: \"hello\\n\""), "{vm}");
    // The guest took the key from its seed.
    let out = s.cli_with_stdin(&t, &["vm", "console", "configured", "--batch", "--idle", "3s"], b"\ncat /root/.ssh/authorized_keys\n");
    assert!(String::from_utf8_lossy(&out.stdout).contains(KEY), "{}", String::from_utf8_lossy(&out.stdout));
    let first = vm["id"].clone();

    let (code, text) = w.plan_code(&["-var", &key]);
    assert_eq!(code, 0, "a no-op re-plan:\n{text}");

    // New user data replaces the VM (cloud-init runs it on a first boot).
    let text = w.apply(&["-var", &key, "-var", "greeting=bonjour"]);
    assert!(text.contains("1 added, 0 changed, 1 destroyed"), "{text}");
    assert!(
        !text.contains("bonjour") && text.contains("(sensitive value)"),
        "user data is sensitive: not in the plan's output:
{text}"
    );
    let list = vms(&s, &t).await;
    assert_eq!(list["total"], 1);
    assert_ne!(list["items"][0]["id"], first);
    assert!(list["items"][0]["spec"]["user_data"].as_str().unwrap().contains("bonjour"));

    w.ok(&["destroy", "-auto-approve", "-no-color", "-var", &key]);
    assert_eq!(vms(&s, &t).await["total"], 0);
}

vmaas_tests::on_every_terraform!(scenario: guest_config_tofu, guest_config_terraform_1_0_3, guest_config_terraform_1_15_5);
