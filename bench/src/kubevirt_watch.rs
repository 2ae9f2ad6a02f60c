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

/// Opens a watch of the cluster's VirtualMachines and follows it in a task
/// of its own, recording in `seen` when each first appears. A fresh API
/// server may not serve the resource yet: the watch is asked again until
/// it is, for at most 10 s, and is an error after that.
pub(crate) async fn follow(k: &KubeApi, seen: Seen) -> anyhow::Result<()> {
    let path = "/apis/kubevirt.io/v1/virtualmachines?watch=1";
    let mut watch = k.watch(path).await;
    for _ in 0..100 {
        if watch.status().is_success() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        watch = k.watch(path).await;
    }
    if !watch.status().is_success() {
        bail!("a watch of the API server's VirtualMachines was refused for 10 s: HTTP {}", watch.status());
    }
    tokio::spawn(record(watch, seen));
    Ok(())
}

/// Reads the watch's events, one JSON object a line, into `seen`.
async fn record(mut watch: reqwest::Response, seen: Seen) {
    let mut buf = Vec::new();
    while let Ok(Some(chunk)) = watch.chunk().await {
        buf.extend_from_slice(&chunk);
        while let Some(end) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=end).collect();
            let event: Value = serde_json::from_slice(&line).unwrap_or_default();
            if let Some(id) = event["object"]["metadata"]["labels"]["vmaas.io/id"].as_str()
                && let Ok(mut s) = seen.lock()
            {
                s.entry(id.to_owned()).or_insert_with(Instant::now);
            }
        }
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
