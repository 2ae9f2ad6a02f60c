//! `vmaas-bench kubevirt --vms N`: the kubevirt backend against a real
//! kube-apiserver and etcd on loopback (`vmaas_tests::k8s`), the real
//! `vmaas-server` binary (SQLite). N VMs are created through the API by 16
//! clients over 10 tenants, and a watch of the cluster's VirtualMachines
//! records when each is applied: objects applied per second (N over the
//! time from the first create to the last VM seen) and create→applied p50
//! and p99 (from the create request to the VM's first watch event). Then,
//! for a sample of the VMs one at a time, the bench plays KubeVirt (a
//! running, ready VMI and the VM's status: `vmaas_tests::kubevirt::play_vm`)
//! and measures from the API server's acknowledgement of the last status
//! write until the vmaas API reports the VM READY (polled every 2 ms).
//! The server's resident memory is read with the N VMs stored and applied.
//! Then the same KubeVirt VMs are applied by a bare kube-rs client to
//! fresh API servers ([`crate::kubevirt_bare`]), watched the same way
//! ([`crate::kubevirt_watch`]): the baseline of the rate.
//! All of it runs twice in one report: on one cluster, then on two
//! clusters behind the one server (`--cluster`), each a kube-apiserver of
//! its own whose node has room for every VM, so that placement spreads them.
//! Each ends with what vmaas's phase and the bare client's cost per VM
//! (requests by verb and resource, CPU seconds: [`crate::kubevirt_cost`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};
use vmaas_tests::k8s::Cluster;
use vmaas_tests::kubevirt::{IMAGES, data_source, node, play_vm};

use crate::kubevirt_cost::Cost;
use crate::kubevirt_watch::{Seen, all_seen, follow};
use crate::percentile;
use crate::scale::{Server, server_binary};

/// Clients creating VMs.
const CLIENTS: usize = 16;
/// Tenants the VMs are spread over.
const TENANTS: usize = 10;
/// VMs whose status change is measured.
const SAMPLES: usize = 100;

/// The server's resident memory, in MiB.
fn rss_mib(pid: u32) -> anyhow::Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kb: f64 = status.lines().find_map(|l| l.strip_prefix("VmRSS:")).context("VmRSS")?.trim().trim_end_matches("kB").trim().parse()?;
    Ok(kb / 1024.0)
}

/// One VM created: its id, when its create was sent, and its tenant's index.
type Made = (String, Instant, usize);

/// Creates `n` VMs.
async fn create(s: &Server, tokens: &[String], n: usize) -> anyhow::Result<Vec<Made>> {
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        let (next, http, base, tokens) = (next.clone(), s.http.clone(), s.base.clone(), tokens.to_vec());
        tasks.push(tokio::spawn(async move {
            let mut made = Vec::new();
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= n {
                    return Ok::<_, anyhow::Error>(made);
                }
                let body = json!({"object": {"metadata": {"name": format!("vm-{i}")}, "spec": {"template": "bench"}}});
                let sent = Instant::now();
                let r = http
                    .post(format!("{base}/api/fulfillment/v1/virtual_machines"))
                    .bearer_auth(&tokens[i % tokens.len()])
                    .json(&body)
                    .send()
                    .await?;
                if r.status() != 201 {
                    bail!("create {i}: {} {}", r.status(), r.text().await.unwrap_or_default());
                }
                let v: Value = r.json().await?;
                made.push((v["object"]["id"].as_str().context("an id")?.to_owned(), sent, i % tokens.len()));
            }
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await??);
    }
    Ok(all)
}

/// Plays KubeVirt for VM `id` (on whichever of `clusters` has it) and
/// times until the API says READY, in ms.
async fn status_change(s: &Server, clusters: &[Cluster], token: &str, id: &str, i: usize) -> anyhow::Result<f64> {
    let mut found = None;
    for c in clusters {
        let path = format!("/apis/kubevirt.io/v1/virtualmachines?labelSelector=vmaas.io/id={id}");
        let (_, list) = c.request(reqwest::Method::GET, &path, None, None).await;
        if let Some(vm) = list["items"].get(0) {
            found = Some((c.api(), vm.clone()));
        }
    }
    let (k, vm) = found.context("the KubeVirt VM")?;
    play_vm(&k, &vm, None, &format!("10.244.{}.{}", i / 200, 10 + i % 200)).await;
    let changed = Instant::now();
    let url = format!("{}/api/fulfillment/v1/virtual_machines/{id}", s.base);
    loop {
        let v: Value = s.http.get(&url).bearer_auth(token).send().await?.json().await?;
        if v["object"]["status"]["state"] == "VIRTUAL_MACHINE_STATE_READY" {
            return Ok(changed.elapsed().as_secs_f64() * 1000.0);
        }
        if changed.elapsed() > Duration::from_secs(30) {
            bail!("VM {id} not READY 30 s after its status changed: {v}");
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "**not met**" }
}

/// What one run measured.
struct Figures {
    rate: f64,
    /// The API's creates per second (until the last was answered).
    creates: f64,
    /// The bare kube-rs client applying the same VMs, watched the same way.
    bare: crate::kubevirt_bare::Bare,
    lat: Vec<f64>,
    changes: Vec<f64>,
    rss: f64,
    rss_after: f64,
    /// What vmaas's creates and applies cost, and the bare client's applies.
    cost: Cost,
}

/// A cluster with the catalog's image and a node with room for every VM.
async fn cluster() -> Cluster {
    let k = Cluster::start().await;
    k.namespace(IMAGES).await;
    data_source(&k, "test-guest").await;
    node(&k, "node-1", "100000", "1000Ti", json!({})).await;
    k
}

/// Runs the benchmark with `n` VMs on `clusters` clusters.
async fn run(bin: &std::path::Path, n: usize, clusters: usize) -> anyhow::Result<Figures> {
    let mut ks = Vec::new();
    for _ in 0..clusters {
        ks.push(cluster().await);
    }
    let dir = tempfile::tempdir()?;
    let mut backend: Vec<String> = ["--backend", "kubevirt", "--default-image", "test-guest"].map(String::from).to_vec();
    match ks.as_slice() {
        [one] => backend.extend(["--kubeconfig".to_owned(), one.kubeconfig().display().to_string()]),
        many => {
            for (i, k) in many.iter().enumerate() {
                backend.extend(["--cluster".to_owned(), format!("c{i}={}", k.kubeconfig().display())]);
            }
        }
    }
    let args: Vec<&str> = backend.iter().map(String::as_str).collect();
    let s = Server::start_on(bin, dir.path(), None, None, &args).await?;
    let admin = s.token(bin, "ops", true)?;
    let tokens: Vec<String> = (0..TENANTS).map(|i| s.token(bin, &format!("tenant{i}"), false)).collect::<anyhow::Result<_>>()?;
    let tpl = json!({"object": {"id": "bench", "parameters": [{"name": "vm_cpu_cores", "default": {"value": 1}}]}});
    let api = format!("{}/api/fulfillment/v1", s.base);
    s.http.post(format!("{api}/virtual_machine_templates")).bearer_auth(&admin).json(&tpl).send().await?.error_for_status()?;
    let seen: Seen = Arc::default();
    for k in &ks {
        follow(&k.api(), seen.clone()).await?;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;

    let urls: Vec<&str> = ks.iter().map(|k| k.url.as_str()).collect();
    println!("vmaas-bench kubevirt --vms {n}: {} (SQLite) on {clusters} kube-apiserver(s) {}", bin.display(), urls.join(", "));
    let before = crate::kubevirt_cost::snapshot(&ks, Some(s.child.id())).await?;
    let started = Instant::now();
    let made = create(&s, &tokens, n).await?;
    let creates = n as f64 / started.elapsed().as_secs_f64();
    let last = all_seen(&seen, made.iter().map(|(id, ..)| id.as_str()), started).await?;
    let rate = n as f64 / last.duration_since(started).as_secs_f64();
    let cost = before.until(&crate::kubevirt_cost::snapshot(&ks, Some(s.child.id())).await?);
    let mut lat: Vec<f64> = {
        let s = seen.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
        made.iter().map(|(id, sent, _)| s[id].saturating_duration_since(*sent).as_secs_f64() * 1000.0).collect()
    };
    lat.sort_by(f64::total_cmp);
    let mut spread = Vec::new();
    for k in &ks {
        let (_, list) = k.request(reqwest::Method::GET, "/apis/kubevirt.io/v1/virtualmachines", None, None).await;
        spread.push(list["items"].as_array().map_or(0, Vec::len).to_string());
    }
    println!("KubeVirt VMs on each cluster: {}", spread.join(" / "));
    tokio::time::sleep(Duration::from_secs(5)).await;
    let rss = rss_mib(s.child.id())?;

    let mut changes = Vec::new();
    for (i, (id, _, tenant)) in made.iter().take(SAMPLES).enumerate() {
        changes.push(status_change(&s, &ks, &tokens[*tenant], id, i).await?);
    }
    changes.sort_by(f64::total_cmp);
    let rss_after = rss_mib(s.child.id())?;
    // The baseline: the same VMs applied by a bare client to fresh API
    // servers, once vmaas and its clusters are gone.
    let objects = crate::kubevirt_bare::capture(&ks).await;
    drop(s);
    drop(ks);
    let mut fresh = Vec::new();
    for _ in 0..clusters {
        fresh.push(cluster().await);
    }
    let bare = crate::kubevirt_bare::rate(&fresh, objects, CLIENTS).await?;
    Ok(Figures { rate, creates, bare, lat, changes, rss, rss_after, cost })
}

/// Runs the benchmark with `n` VMs on `server` (default: beside this
/// binary), on one cluster and then on two.
pub async fn report(n: usize, server: Option<PathBuf>) -> anyhow::Result<()> {
    let bin = server_binary(server)?;
    let one = run(&bin, n, 1).await?;
    let two = run(&bin, n, 2).await?;
    println!("| kubevirt backend, {n} VMs | one cluster | two clusters | goal |");
    println!("|---|---|---|---|");
    let rate = |f: &Figures| format!("{:.0}", f.rate);
    println!(
        "| VMs applied per second ({CLIENTS} clients creating) | {} | {} | ≥ 200: {} |",
        rate(&one),
        rate(&two),
        verdict(one.rate.min(two.rate) >= 200.0)
    );
    println!(
        "| a bare kube-rs client applying the same VMs ({CLIENTS} tasks), per second, to the last seen by the same watch | {:.0} | {:.0} | baseline |",
        one.bare.seen, two.bare.seen
    );
    println!("| the same, to the last apply acknowledged | {:.0} | {:.0} | — |", one.bare.acknowledged, two.bare.acknowledged);
    println!("| the API's creates alone, per second | {:.0} | {:.0} | — |", one.creates, two.creates);
    let (r1, r2) = (one.rate / one.bare.seen, two.rate / two.bare.seen);
    println!("| vmaas / bare (issue 57, goal 3) | {r1:.2} | {r2:.2} | ≥ 0.9: {} |", verdict(r1.min(r2) >= 0.9));
    let (a1, a2) = (one.rate / one.bare.acknowledged, two.rate / two.bare.acknowledged);
    println!("| vmaas / bare, to the last acknowledged | {a1:.2} | {a2:.2} | — |");
    let lat = |f: &Figures| format!("{:.0} / {:.0} ms", percentile(&f.lat, 0.5), percentile(&f.lat, 0.99));
    println!("| create → applied, p50 / p99 | {} | {} | — |", lat(&one), lat(&two));
    let change = |f: &Figures| format!("{:.1} / {:.1} ms", percentile(&f.changes, 0.5), percentile(&f.changes, 0.99));
    let p99 = percentile(&one.changes, 0.99).max(percentile(&two.changes, 0.99));
    println!(
        "| cluster status change → API, p50 / p99 ({SAMPLES} VMs) | {} | {} | p99 ≤ 100 ms: {} |",
        change(&one),
        change(&two),
        verdict(p99 <= 100.0)
    );
    let rss = |f: &Figures| format!("{:.0} MiB ({:.0} after the status changes)", f.rss, f.rss_after);
    let most = one.rss.max(one.rss_after).max(two.rss).max(two.rss_after);
    println!("| server RSS with {n} VMs applied | {} | {} | ≤ 200 MiB: {} |", rss(&one), rss(&two), verdict(most <= 200.0));
    println!();
    crate::kubevirt_cost::print("one cluster", n, &one.cost, &one.bare.cost);
    println!();
    crate::kubevirt_cost::print("two clusters", n, &two.cost, &two.bare.cost);
    Ok(())
}
