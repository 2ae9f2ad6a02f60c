//! Live migration on the qemu backend (`vmaas-bench migration`): a test
//! guest moved to a new QEMU process again and again through the API,
//! timed from the request to READY on the new process, while its web page
//! is fetched through its external IP (on loopback) every few
//! milliseconds: the longest gap between two answers is the downtime a
//! client sees. Bounded in rounds and time; deletes what it creates.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use vmaas_client::WaitFor;

use crate::percentile;
use crate::vms::{none_left, qemu_pid, ready_tiny, start_qemu_server};

/// The longest a fetcher runs.
const FETCH_LIMIT: Duration = Duration::from_secs(300);

/// What a client fetching the page saw.
struct Seen {
    /// The longest time between two answers.
    gap: Duration,
    /// Fetches that failed (refused, reset, timed out or not a success).
    failed: usize,
}

/// Fetches `url` until `stop`: the longest time between two answers, and the failures.
async fn longest_gap(url: String, stop: Arc<AtomicBool>) -> Seen {
    let http = reqwest::Client::builder().no_proxy().timeout(Duration::from_millis(500)).build().unwrap_or_default();
    let start = Instant::now();
    let (mut last_ok, mut gap, mut failed) = (Instant::now(), Duration::ZERO, 0);
    while !stop.load(Ordering::Relaxed) && start.elapsed() < FETCH_LIMIT {
        let ok = matches!(http.get(&url).send().await, Ok(r) if r.status().is_success());
        if ok {
            gap = gap.max(last_ok.elapsed());
            last_ok = Instant::now();
        } else {
            failed += 1;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Seen { gap, failed }
}

/// `rounds` migrations of one guest; prints the time to READY and the longest gap a client saw.
pub async fn migration(rounds: usize, images: std::path::PathBuf) -> anyhow::Result<()> {
    let srv = start_qemu_server(images).await?;
    let (c, admin) = (&srv.client, vmaas_client::Client::new(&srv.endpoint, Some(srv.admin.clone()))?);
    let vm = ready_tiny(c, "mover").await?;
    let ip = vm.status.external_ip.clone().context("the VM has no external IP")?;
    println!("vmaas-bench migration: accelerator {}, test guest (256Mi, 1 core), {rounds} live migrations to a new QEMU", srv.accel);
    // The same fetches with nothing moving: the gap a client sees anyway.
    let stop = Arc::new(AtomicBool::new(false));
    let fetcher = tokio::spawn(longest_gap(format!("http://{ip}/"), stop.clone()));
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    let idle = fetcher.await?;
    println!(
        "  no migration: longest gap between answers over 2 s {:.0} ms, {} failed fetches (the baseline)",
        idle.gap.as_secs_f64() * 1e3,
        idle.failed
    );
    let (mut totals, mut gaps, mut failed) = (Vec::new(), Vec::new(), 0);
    for round in 0..rounds {
        let before = qemu_pid(srv.dir.path(), &vm.id);
        let stop = Arc::new(AtomicBool::new(false));
        let fetcher = tokio::spawn(longest_gap(format!("http://{ip}/"), stop.clone()));
        tokio::time::sleep(Duration::from_millis(300)).await;
        let t = Instant::now();
        admin.migrate_vm(&vm.id, None).await?;
        c.wait_vm(&vm.id, WaitFor::Ready, Duration::from_secs(300), Duration::from_millis(20), |_| {}).await?;
        let total = t.elapsed();
        let after = qemu_pid(srv.dir.path(), &vm.id);
        tokio::time::sleep(Duration::from_millis(300)).await;
        stop.store(true, Ordering::Relaxed);
        let seen = fetcher.await?;
        if after == before {
            bail!("round {round}: the guest is still on QEMU {before:?}");
        }
        println!(
            "  round {round}: READY on the new QEMU after {:.2} s; longest gap between answers {:.0} ms; {} failed fetches",
            total.as_secs_f64(),
            seen.gap.as_secs_f64() * 1e3,
            seen.failed
        );
        totals.push(total.as_secs_f64());
        gaps.push(seen.gap.as_secs_f64() * 1e3);
        failed += seen.failed;
    }
    totals.sort_by(f64::total_cmp);
    gaps.sort_by(f64::total_cmp);
    let (p50, max) = (percentile(&gaps, 0.5), percentile(&gaps, 1.0));
    println!(
        "migration to READY: p50 {:.2} s, max {:.2} s; downtime seen by a client: p50 {p50:.0} ms, max {max:.0} ms (goal p50 ≤ 100 ms and max ≤ 200 ms: {})",
        percentile(&totals, 0.5),
        percentile(&totals, 1.0),
        if p50 <= 100.0 && max <= 200.0 { "met" } else { "not met" }
    );
    println!("  fetches that failed over the {rounds} migrations (refused, reset or timed out): {failed}");
    c.delete_vm(&vm.id).await?;
    c.wait_vm(&vm.id, WaitFor::Deleted, Duration::from_secs(120), Duration::from_millis(50), |_| {}).await?;
    none_left(srv.dir.path())
}
