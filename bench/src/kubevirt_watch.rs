//! How `vmaas-bench kubevirt` sees a VM applied: a watch of each cluster's
//! KubeVirt VirtualMachines records when each vmaas VM (by its
//! `vmaas.io/id` label) first appears. The same watch runs in vmaas's phase
//! and in the bare client's, so both pay for the same measuring.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::bail;
use serde_json::Value;
use vmaas_tests::k8s::KubeApi;

/// The longest the creates and applies of one phase may take.
const LIMIT: Duration = Duration::from_secs(900);

/// When each vmaas VM's KubeVirt VM was first seen, by vmaas id.
pub(crate) type Seen = Arc<Mutex<HashMap<String, Instant>>>;

/// The VirtualMachines of every namespace.
const VMS: &str = "/apis/kubevirt.io/v1/virtualmachines";

/// Opens a watch of the cluster's VirtualMachines and follows it in a task
/// of its own, recording in `seen` when each first appears. A fresh API
/// server may not serve the resource yet: the watch is asked again until
/// it is, for at most 10 s, and is an error after that.
pub(crate) async fn follow(k: &KubeApi, seen: Seen) -> anyhow::Result<()> {
    let path = format!("{VMS}?watch=1");
    let mut watch = k.watch(&path).await;
    for _ in 0..100 {
        if watch.status().is_success() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        watch = k.watch(&path).await;
    }
    if !watch.status().is_success() {
        bail!("a watch of the API server's VirtualMachines was refused for 10 s: HTTP {}", watch.status());
    }
    tokio::spawn(record(k.clone(), watch, seen));
    Ok(())
}

/// Reads the watch's events into `seen`; when the API server ends the
/// watch (it closes one whose reader falls behind), opens it again from
/// the last version read, or, once that version is gone (410), lists the
/// VMs and watches from the list (the VMs the list finds count as seen
/// then: later than they were, never earlier). Stops when the API server
/// goes away.
async fn record(k: KubeApi, mut watch: reqwest::Response, seen: Seen) {
    let mut version = None;
    loop {
        let gone = read_events(&mut watch, &seen, &mut version).await;
        if gone || version.is_none() {
            let Some(list) = listed(&k).await else { return };
            note(&seen, list["items"].as_array().into_iter().flatten());
            version = list["metadata"]["resourceVersion"].as_str().map(str::to_owned);
        }
        let from = version.as_deref().unwrap_or_default();
        match k.get_streaming(&format!("{VMS}?watch=1&resourceVersion={from}")).await {
            Ok(w) if w.status().is_success() => watch = w,
            _ => return,
        }
        eprintln!("vmaas-bench: the API server at {} ended a watch; watching again from version {from}", k.url);
    }
}

/// The cluster's VirtualMachines as a list, if the API server answers.
async fn listed(k: &KubeApi) -> Option<Value> {
    let r = k.get_streaming(VMS).await.ok().filter(|r| r.status().is_success())?;
    r.json().await.ok()
}

/// Reads `watch` to its end, noting each VM in `seen` and the last
/// version read in `version`: whether the API server said that version is
/// gone.
async fn read_events(watch: &mut reqwest::Response, seen: &Seen, version: &mut Option<String>) -> bool {
    let mut buf = Vec::new();
    while let Ok(Some(chunk)) = watch.chunk().await {
        buf.extend_from_slice(&chunk);
        while let Some(end) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=end).collect();
            let event: Value = serde_json::from_slice(&line).unwrap_or_default();
            if event["type"] == "ERROR" {
                return event["object"]["code"] == 410;
            }
            if let Some(v) = event["object"]["metadata"]["resourceVersion"].as_str() {
                *version = Some(v.to_owned());
            }
            note(seen, std::iter::once(&event["object"]));
        }
    }
    false
}

/// Records each of `vms` (KubeVirt VMs) not seen before as seen now.
fn note<'a>(seen: &Seen, vms: impl Iterator<Item = &'a Value>) {
    let Ok(mut s) = seen.lock() else { return };
    for id in vms.filter_map(|vm| vm["metadata"]["labels"]["vmaas.io/id"].as_str()) {
        s.entry(id.to_owned()).or_insert_with(Instant::now);
    }
}

/// Waits until every one of `ids` was seen, at most [`LIMIT`] after
/// `started`; when the last of them was.
pub(crate) async fn all_seen<'a>(seen: &Seen, ids: impl Iterator<Item = &'a str> + Clone, started: Instant) -> anyhow::Result<Instant> {
    loop {
        let (missing, last) = match seen.lock() {
            Ok(s) => ids.clone().fold((0usize, started), |(m, last), id| match s.get(id) {
                Some(t) => (m, last.max(*t)),
                None => (m + 1, last),
            }),
            Err(_) => bail!("the watch's record is poisoned"),
        };
        if missing == 0 {
            return Ok(last);
        }
        if started.elapsed() > LIMIT {
            bail!("{missing} VMs not applied in {LIMIT:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
