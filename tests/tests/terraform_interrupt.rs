//! An apply interrupted as a user or a cancelled CI job interrupts it
//! (SIGINT to Terraform, which asks the provider to stop), on the real
//! server with a real QEMU guest that never gets READY: Terraform ends
//! within 5 s instead of at the wait's 10 minutes, and its state records
//! the VM that exists, so the next apply or destroy finds it.

use std::time::{Duration, Instant};

use reqwest::Method;
use vmaas_tests::Server;
use vmaas_tests::tf::{Tf, Workspace};

const NEVER_READY: &str =
    "id: never_ready\nspec_defaults:\n  image: test-guest\n  readiness_probe: {tcp: {port: 2222}, timeout_seconds: 600}\n";

const MAIN: &str = "terraform {\n  required_providers {\n    vmaas = {\n      source = \"vmaas/vmaas\"\n    }\n  }\n}\n\n\
                    provider \"vmaas\" {}\n\nresource \"vmaas_virtual_machine\" \"slow\" {\n  name     = \"slow\"\n  template = \"never_ready\"\n}\n";

async fn interrupted(tf: Tf) {
    let s = Server::start_qemu().await;
    vmaas_tests::vms::publish(&s, NEVER_READY);
    let t = s.token("ci", false);
    let w = Workspace::new(tf, &s, &t, MAIN);
    let mut apply = w.interruptible(&["apply", "-auto-approve", "-no-color", "-input=false"]);
    // Its output to a file: a provider left behind must not hold a pipe open.
    let log = tempfile::NamedTempFile::new().unwrap();
    // A group of its own, signalled as a terminal signals its foreground
    // group on Ctrl-C (Terraform runs as two processes, panicwrap's parent
    // and the real one).
    std::os::unix::process::CommandExt::process_group(&mut apply, 0);
    let mut child = apply.stdout(log.reopen().unwrap()).stderr(log.reopen().unwrap()).spawn().expect("terraform");
    // Once the VM exists the provider is waiting for it to be READY.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (_, list) = s.raw(Method::GET, "/api/fulfillment/v1/virtual_machines", Some(&t), None).await;
        if list["items"].as_array().is_some_and(|i| !i.is_empty()) {
            break;
        }
        assert!(Instant::now() < deadline && child.try_wait().unwrap().is_none(), "the VM was never made");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pid = child.id().to_string();
    let sent = Instant::now();
    assert!(std::process::Command::new("kill").args(["-INT", "--", &format!("-{pid}")]).status().unwrap().success());
    // Bounded: a Terraform still running after 30 s is killed, and its output shown.
    let pid_kill = pid.clone();
    let guard = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(30)).await;
        let _ = std::process::Command::new("kill").args(["-KILL", "--", &format!("-{pid_kill}")]).status();
    });
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap()).await.unwrap();
    guard.abort();
    let took = sent.elapsed();
    let said = std::fs::read_to_string(log.path()).unwrap_or_default();
    assert!(took < Duration::from_secs(5), "terraform took {took:?} to end after SIGINT ({tf:?}):\n{said}");
    assert!(!status.success(), "an interrupted apply fails: {said}");
    assert!(said.contains("interrupted"), "the provider says why: {said}");
    let state = w.ok(&["state", "list"]);
    assert!(state.contains("vmaas_virtual_machine.slow"), "the state records the VM that exists ({tf:?}):\n{state}\n{said}");
    w.ok(&["destroy", "-auto-approve", "-no-color", "-input=false"]);
    let (_, list) = s.raw(Method::GET, "/api/fulfillment/v1/virtual_machines", Some(&t), None).await;
    assert!(
        list["items"].as_array().is_none_or(|i| i.is_empty() || i.iter().all(|v| v["status"]["state"] == "VIRTUAL_MACHINE_STATE_DELETING")),
        "{list}"
    );
}

vmaas_tests::on_every_terraform!(interrupted: interrupt_tofu, interrupt_terraform_1_0_3, interrupt_terraform_1_15_5);
