//! What a client lives through, against the real server: a tenant past its
//! request rate gets 429 with `Retry-After` while other tenants go on, and
//! the typed client waits it out; a server restarted in the middle of
//! `vmaas vm create --wait`, and of `tofu apply` of five VMs, fails
//! neither (their requests are tried again until it is back).

use std::process::Stdio;
use std::time::{Duration, Instant};

use reqwest::Method;
use vmaas_tests::tf::{Tf, Workspace};
use vmaas_tests::{Db, Server, vms};

const VMS: &str = "/api/fulfillment/v1/virtual_machines";

#[tokio::test]
async fn a_tenant_past_its_request_rate_waits_and_the_others_do_not() {
    let args = ["--backend", "none", "--tenant-rate-limit", "1", "--tenant-rate-burst", "4"];
    let Some(s) = Server::start_with(Db::Sqlite, &args).await else { return };
    let (acme, globex) = (s.token("acme", false), s.token("globex", false));
    let http = reqwest::Client::new();
    let get = |token: &str| http.get(format!("{}{VMS}", s.endpoint)).bearer_auth(token).send();

    let mut answers = Vec::new();
    for _ in 0..8 {
        answers.push(get(&acme).await.expect("an answer"));
    }
    let statuses: Vec<u16> = answers.iter().map(|r| r.status().as_u16()).collect();
    assert_eq!(statuses[..4], [200; 4], "the burst is answered: {statuses:?}");
    let limited = answers.into_iter().rev().find(|r| r.status() == 429).unwrap_or_else(|| panic!("none limited: {statuses:?}"));
    let wait: u64 = limited.headers()["retry-after"].to_str().expect("text").parse().expect("whole seconds");
    assert!((1..=2).contains(&wait), "Retry-After: {wait}");
    let body: serde_json::Value = limited.json().await.expect("the API's error body");
    assert_eq!(body["code"], 8, "RESOURCE_EXHAUSTED: {body}");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(message.contains("\"acme\"") && message.contains("1 per second"), "names the tenant and its rate: {message}");

    // Another tenant has a bucket of its own, full, while acme's is empty.
    for i in 0..4 {
        assert_eq!(get(&globex).await.expect("an answer").status(), 200, "globex's request {i}");
    }
    // The gRPC gateway and event streams count against the same rate.
    let (status, _) = s.raw(Method::GET, VMS, Some(&acme), None).await;
    assert_eq!(status, 429, "acme is still past its rate");

    // The typed client waits out Retry-After instead of failing.
    let client = s.client(&acme);
    let started = Instant::now();
    let page = client.list_vms(&Default::default()).await.expect("answered after Retry-After");
    assert!(page.items.is_empty());
    assert!(started.elapsed() >= Duration::from_millis(500), "it waited: {:?}", started.elapsed());
}

#[tokio::test]
async fn a_server_restarted_under_vm_create_wait_does_not_fail_it() {
    let mut s = Server::start_qemu().await;
    vms::publish(&s, vms::TINY);
    let t = s.token("ops", false);
    let mut create = s.cli_command(&t, &["vm", "create", "steady", "-t", "tiny", "--wait", "--timeout", "5m"]);
    let mut child = create.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("vmaas");
    until_vms(&s, &t, 1).await;
    assert!(child.try_wait().expect("vmaas").is_none(), "vm create --wait ended before the restart: nothing was tested");
    s.stop().await;
    // Down for a moment: the CLI's requests find nobody listening.
    tokio::time::sleep(Duration::from_secs(2)).await;
    s.launch_again().await;
    let out = tokio::task::spawn_blocking(move || child.wait_with_output()).await.expect("join").expect("vmaas");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "vm create --wait failed across the restart:\n{stdout}\n{stderr}");
    let (status, list) = s.raw(Method::GET, VMS, Some(&t), None).await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["items"][0]["metadata"]["name"], "steady", "{list}");
    assert_eq!(list["items"][0]["status"]["state"], "VIRTUAL_MACHINE_STATE_READY", "{list}");
}

const FIVE: &str = "terraform {\n  required_providers {\n    vmaas = {\n      source = \"vmaas/vmaas\"\n    }\n  }\n}\n\n\
                    provider \"vmaas\" {}\n\nresource \"vmaas_virtual_machine\" \"vm\" {\n  count    = 5\n  name     = \"vm-${count.index}\"\n  template = \"tiny\"\n}\n";

async fn restarted_under_apply(tf: Tf) {
    let mut s = Server::start_qemu().await;
    vms::publish(&s, vms::TINY);
    let t = s.token("ci", false);
    let w = Workspace::new(tf, &s, &t, FIVE);
    let log = tempfile::NamedTempFile::new().expect("log");
    let mut apply = w.command(&["apply", "-auto-approve", "-no-color", "-input=false"]);
    let mut child = apply.stdout(log.reopen().expect("log")).stderr(log.reopen().expect("log")).spawn().expect("terraform");
    // Restarted once some VMs exist and the provider waits for them.
    until_vms(&s, &t, 2).await;
    assert!(child.try_wait().expect("terraform").is_none(), "{tf:?}: the apply ended before the restart: nothing was tested");
    s.stop().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    s.launch_again().await;
    let status = tokio::task::spawn_blocking(move || child.wait()).await.expect("join").expect("terraform");
    let output = std::fs::read_to_string(log.path()).unwrap_or_default();
    assert!(status.success(), "{tf:?}: apply failed across the restart:\n{output}");
    assert!(output.contains("5 added"), "{tf:?}: {output}");
    let (_, list) = s.raw(Method::GET, VMS, Some(&t), None).await;
    let items = list["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(items.len(), 5, "{list}");
    assert!(items.iter().all(|vm| vm["status"]["state"] == "VIRTUAL_MACHINE_STATE_READY"), "{list}");
}

#[tokio::test]
async fn a_server_restarted_under_tofu_apply_does_not_fail_it() {
    restarted_under_apply(Tf::Tofu).await;
}

#[tokio::test]
async fn a_server_restarted_under_terraform_1_0_apply_does_not_fail_it() {
    restarted_under_apply(Tf::V1_0_3).await;
}

#[tokio::test]
async fn a_server_restarted_under_terraform_1_15_apply_does_not_fail_it() {
    restarted_under_apply(Tf::V1_15_5).await;
}

/// Waits until the tenant of `token` has `n` VMs.
async fn until_vms(s: &Server, token: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let (_, list) = s.raw(Method::GET, VMS, Some(token), None).await;
        if list["items"].as_array().is_some_and(|i| i.len() >= n) {
            return;
        }
        assert!(Instant::now() < deadline, "{n} VMs were never made: {list}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
