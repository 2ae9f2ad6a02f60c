//! VM helpers shared by the end-to-end tests: create, read and wait.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use crate::Server;

/// Prefix of the API routes.
pub const V1: &str = "/api/fulfillment/v1";

/// Creates VM `name` from `template`; panics unless the answer is 201.
pub async fn create(s: &Server, token: &str, name: &str, template: &str) -> String {
    let body = json!({"object": {"metadata": {"name": name}, "spec": {"template": template}}});
    let (st, vm) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(token), Some(body)).await;
    assert_eq!(st, 201, "{vm}");
    vm["object"]["id"].as_str().unwrap().to_owned()
}

/// Reads one VM: `(status, body)`.
pub async fn get(s: &Server, token: &str, id: &str) -> (u16, Value) {
    s.raw(Method::GET, &format!("{V1}/virtual_machines/{id}"), Some(token), None).await
}

/// Polls until `pred` holds for the VM, or panics with the last status and the server log.
pub async fn wait_until(s: &Server, token: &str, id: &str, what: &str, secs: u64, pred: impl Fn(&Value) -> bool) -> Value {
    wait_object(s, token, &format!("{V1}/virtual_machines/{id}"), what, secs, |v| v.is_some_and(&pred)).await
}

/// Polls the object at `path` until `pred` holds for it (`None` while it
/// is not found), or panics with the last answer and the server log after
/// `secs` seconds.
pub async fn wait_object(s: &Server, token: &str, path: &str, what: &str, secs: u64, pred: impl Fn(Option<&Value>) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let (st, v) = s.raw(Method::GET, path, Some(token), None).await;
        if pred((st == 200).then_some(&v["object"])) {
            return v["object"].clone();
        }
        if Instant::now() > deadline {
            panic!("timed out waiting for {path} to be {what}; last: {st} {v}{}\n{}", crate::scratch::SERVER_LOG, s.log());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits (`secs` at most) until the object at `path` has `status.state`
/// equal to `state`; returns the object.
pub async fn wait_state(s: &Server, token: &str, path: &str, state: &str, secs: u64) -> Value {
    wait_object(s, token, path, state, secs, |v| v.is_some_and(|v| v["status"]["state"] == state)).await
}

/// The state of a VM object, e.g. `VIRTUAL_MACHINE_STATE_READY`.
pub fn state(v: &Value) -> &str {
    v["status"]["state"].as_str().unwrap_or("")
}

/// The READY condition's message of VM object `v`: how the guest was
/// started (`… (restored from template snapshot KEY)` or `… (cold boot: WHY)`).
pub fn boot_of(v: &Value) -> String {
    let conditions = v["status"]["conditions"].as_array().cloned().unwrap_or_default();
    let ready = conditions.iter().find(|c| c["type"] == "VIRTUAL_MACHINE_CONDITION_TYPE_READY");
    ready.and_then(|c| c["message"].as_str()).unwrap_or_default().to_owned()
}

/// Whether VM object `v` holds RESTART_REQUIRED (a change waits for a restart).
pub fn restart_required(v: &Value) -> bool {
    v["status"]["conditions"].as_array().is_some_and(|c| {
        c.iter().any(|c| c["type"] == "VIRTUAL_MACHINE_CONDITION_TYPE_RESTART_REQUIRED" && c["status"] == "CONDITION_STATUS_TRUE")
    })
}

/// What a guest said between the markers `<<` and `>>` on its console
/// (the last such pair), so the echoed command and other noise are ignored.
pub fn said(text: &str) -> String {
    let start = text.rfind("<<").map(|i| i + 2).unwrap_or(0);
    let end = text[start..].find(">>").map(|i| start + i).unwrap_or(text.len());
    text[start..end].trim().to_owned()
}

/// Waits (2 min at most) for the VM to be READY.
pub async fn wait_ready(s: &Server, token: &str, id: &str) -> Value {
    wait_until(s, token, id, "READY", 120, |v| state(v) == "VIRTUAL_MACHINE_STATE_READY").await
}

/// Publishes the templates of `yaml` (documents separated by `---`) with `vmaas template sync`.
pub fn publish(s: &Server, yaml: &str) {
    let admin = s.token("ops", true);
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("templates.yaml"), yaml).expect("write templates");
    let out = s.cli(&admin, &["template", "sync", dir.path().to_str().expect("utf-8 path")]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// The `tiny` example template.
pub const TINY: &str = include_str!("../../examples/templates/tiny.yaml");

/// Types `input` on VM `vm`'s console through the CLI and returns what it
/// printed (until the guest is quiet for 3 s).
pub fn console(s: &Server, token: &str, vm: &str, input: &str) -> String {
    let out = s.cli_with_stdin(token, &["vm", "console", vm, "--batch", "--idle", "3s"], format!("\n{input}\n").as_bytes());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// VM `vm`'s console log (`vmaas vm logs`) once it holds `text`: it may
/// come after READY (a probe can answer before the guest prints it).
pub async fn console_log_with(s: &Server, token: &str, vm: &str, text: &str, within: Duration) -> String {
    let deadline = Instant::now() + within;
    loop {
        let log = String::from_utf8_lossy(&s.cli(token, &["vm", "logs", vm]).stdout).into_owned();
        if log.contains(text) {
            return log;
        }
        assert!(Instant::now() < deadline, "{text:?} not on {vm}'s console in {within:?}:\n{log}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A guest command printing `DEV=vdX.` for the disk whose serial is `serial` (`DEV=.` if none).
pub fn find_disk(serial: &str) -> String {
    format!("d=$(grep -l '^{serial}$' /sys/block/vd*/serial 2>/dev/null | cut -d/ -f4); echo \"DEV=$d.\"")
}

/// The disk [`find_disk`] printed, if any.
pub fn found_disk(text: &str) -> Option<String> {
    text.lines().rev().find_map(|l| l.trim().strip_prefix("DEV=")).map(|d| d.trim_end_matches('.').to_owned()).filter(|d| !d.is_empty())
}
