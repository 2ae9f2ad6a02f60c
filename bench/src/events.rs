//! `vmaas-bench events`: event fan-out. N watchers hold the event stream
//! open (Server-Sent Events on loopback, one connection each); a VM is
//! changed M times, one change at a time; each watcher's latency is from
//! the change's PATCH being sent to that watcher reading the change's
//! event. Bounded: N and M are given, every wait has a deadline.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::json;
use tokio::sync::mpsc;
use vmaas_server::auth::Role;
use vmaas_server::none_backend::NoBackend;
use vmaas_server::startup::{App, Config};

/// How long one change may take to reach every watcher.
const DEADLINE: Duration = Duration::from_secs(30);

/// How long a watcher's stream stays open at most.
const OPEN_FOR: Duration = Duration::from_secs(3600);

/// Runs the fan-out benchmark.
pub async fn events(watchers: usize, changes: usize) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    // Every watcher is the bench tenant's, on one token: the stream limits made room for them.
    let watches = vmaas_server::watches::WatchLimits { per_tenant: watchers, per_token: watchers, total: watchers.max(1024) };
    // What is measured is the fan-out: opening a thousand streams at once
    // is above the tenant's request rate, so that limit is lifted (as the
    // other benches set `VMAAS_TENANT_RATE_LIMIT`).
    let config = Config {
        reconcile_interval: Duration::from_secs(3600),
        watches,
        tenant_rate: None,
        ..Config::new("127.0.0.1:0".parse()?, dir.path().to_owned())
    };
    let app = App::open(config, Arc::new(NoBackend)).await?;
    let admin = app.state.keys.issue("ops", "ops", Role::Admin, Duration::from_secs(3600))?;
    let token = app.state.keys.issue("bench", "bench", Role::Tenant, Duration::from_secs(3600))?;
    let addr = crate::serve(app.router()).await?;
    let base = format!("http://{addr}/api/fulfillment/v1");
    let http = reqwest::Client::new();
    let tpl = json!({"object": {"id": "tiny", "spec_defaults": {"memory": "128Mi"}}});
    let r = http.post(format!("{base}/virtual_machine_templates")).bearer_auth(&admin).json(&tpl).send().await?;
    if !r.status().is_success() {
        bail!("publishing the template: {}", r.text().await?);
    }
    let body = json!({"object": {"metadata": {"name": "watched"}, "spec": {"template": "tiny"}}});
    let v: serde_json::Value = http.post(format!("{base}/virtual_machines")).bearer_auth(&token).json(&body).send().await?.json().await?;
    let id = v["object"]["id"].as_str().context("the VM's id")?.to_owned();

    // The VM's updates; a change's own event is the first carrying the
    // version its PATCH answered with (the status write follows it).
    let filter = format!("event.type == EVENT_TYPE_OBJECT_UPDATED && event.virtual_machine.id == '{id}'");
    let (tx, mut rx) = mpsc::unbounded_channel::<(usize, i64, Instant)>();
    let mut open = Vec::new();
    for w in 0..watchers {
        // A client each: a connection each.
        let client = vmaas_client::Client::new(&format!("http://{addr}"), Some(token.clone()))?;
        let watch = client.watch_events(&filter, OPEN_FOR).await.with_context(|| format!("opening watcher {w}"))?;
        open.push(tokio::spawn(read_events(w, watch, tx.clone())));
    }
    println!("vmaas-bench events: {watchers} watchers on loopback SSE, {changes} changes of one VM, SQLite, {} cores", cores());

    let mut latencies = Vec::with_capacity(watchers * changes);
    for c in 0..changes {
        let state = if c % 2 == 0 { "stopped" } else { "started" };
        let patch = json!({"object": {"spec": {"state": state}}});
        let sent = Instant::now();
        let r = http.patch(format!("{base}/virtual_machines/{id}")).bearer_auth(&token).json(&patch).send().await?;
        if !r.status().is_success() {
            bail!("change {c}: {}", r.text().await?);
        }
        let version = r.json::<serde_json::Value>().await?["object"]["metadata"]["version"].as_i64().context("the new version")?;
        let answered = sent.elapsed();
        let mut first: Option<f64> = None;
        let mut seen = vec![false; watchers];
        let mut left = watchers;
        let deadline = tokio::time::Instant::now() + DEADLINE;
        while left > 0 {
            let (w, v, at) =
                tokio::time::timeout_at(deadline, rx.recv()).await.context("watchers missed a change")?.context("watchers ended")?;
            if v == version && !std::mem::replace(&mut seen[w], true) {
                left -= 1;
                let ms = at.duration_since(sent).as_secs_f64() * 1000.0;
                first.get_or_insert(ms);
                latencies.push(ms);
            }
        }
        if std::env::var_os("VMAAS_BENCH_VERBOSE").is_some() {
            let last = latencies.last().copied().unwrap_or(0.0);
            println!(
                "change {c}: PATCH answered in {:.1} ms, first watcher {:.1} ms, last {last:.1} ms",
                answered.as_secs_f64() * 1000.0,
                first.unwrap_or(0.0)
            );
        }
    }
    for t in open {
        t.abort();
    }
    latencies.sort_by(f64::total_cmp);
    println!(
        "change → every watcher notified: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms ({} notifications)",
        crate::percentile(&latencies, 0.50),
        crate::percentile(&latencies, 0.99),
        latencies.last().copied().unwrap_or(0.0),
        latencies.len()
    );
    Ok(())
}

/// Reads watcher `w`'s stream, reporting each event's VM version and arrival.
async fn read_events(w: usize, mut watch: vmaas_client::Watch, tx: mpsc::UnboundedSender<(usize, i64, Instant)>) {
    while let Some(e) = watch.next().await {
        let at = Instant::now();
        if let Some(version) = e["virtual_machine"]["metadata"]["version"].as_i64()
            && tx.send((w, version, at)).is_err()
        {
            return;
        }
    }
}

fn cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}
