//! `vmaas-bench qemu`: real VMs of the test guest through the API, once
//! booted cold and once from template snapshots (the default): create→READY,
//! stop and delete times, what an idle VM costs the host (resident and
//! unique memory, from `/proc/PID/smaps_rollup`), a burst, and then how many
//! idle VMs from snapshots are READY at once on this host. Each run deletes
//! what it creates and checks that no QEMU is left.

use std::time::{Duration, Instant};

use vmaas_client::WaitFor;

use crate::percentile;
use crate::vms::{none_left, qemu_pid, ready_tiny, start_qemu_server_with, timed_wait, tiny};

/// Memory the density run leaves the host, at least.
const KEEP_FREE: u64 = 2 << 30;

/// What one mode measured.
struct Figures {
    first: f64,
    ready: Vec<f64>,
    stop: Vec<f64>,
    delete: Vec<f64>,
    resident_mib: f64,
    unique_mib: f64,
    burst: f64,
}

/// `(resident, unique)` KiB of process `pid` (the backend's own reading).
fn memory_kib(pid: i32) -> (u64, u64) {
    let (resident, unique) = vmaas_qemu::memory::of_process(pid).unwrap_or((0, 0));
    (resident / 1024, unique / 1024)
}

/// The host's `MemAvailable`, in bytes.
fn available() -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let kib = text.lines().find(|l| l.starts_with("MemAvailable:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok());
    kib.unwrap_or(0) * 1024
}

/// Stops a VM and waits for it STOPPED; seconds.
async fn stop(c: &vmaas_client::Client, id: &str) -> anyhow::Result<f64> {
    let patch = vmaas_model::PatchVirtualMachine {
        spec: vmaas_model::vm::SpecPatch { state: Some(vmaas_model::PowerState::Stopped), ..Default::default() },
        ..Default::default()
    };
    let t = Instant::now();
    c.patch_vm(id, &patch).await?;
    c.wait_vm(id, WaitFor::Stopped, Duration::from_secs(120), Duration::from_millis(20), |_| {}).await?;
    Ok(t.elapsed().as_secs_f64())
}

/// One mode: `vms` VMs one after another (after a first one, which makes
/// the snapshot when there are snapshots), then `burst` at once.
async fn one_mode(images: std::path::PathBuf, snapshots: bool, tcg_cache_mib: u32, vms: usize, burst: usize) -> anyhow::Result<Figures> {
    let srv = start_qemu_server_with(images, snapshots, false, tcg_cache_mib).await?;
    let (dir, c) = (&srv.dir, &srv.client);
    let t = Instant::now();
    let first = ready_tiny(c, "first").await?;
    let first_secs = t.elapsed().as_secs_f64();
    let mut ready = Vec::new();
    let mut ids = vec![first.id];
    for i in 0..vms {
        let t = Instant::now();
        ids.push(ready_tiny(c, &format!("seq-{i}")).await?.id);
        ready.push(t.elapsed().as_secs_f64());
    }
    // Idle: free page reporting hands freed pages back after 2 s.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let mem: Vec<(u64, u64)> = ids.iter().filter_map(|id| qemu_pid(dir.path(), id)).map(memory_kib).collect();
    let mean = |f: fn(&(u64, u64)) -> u64| mem.iter().map(f).sum::<u64>() as f64 / mem.len().max(1) as f64 / 1024.0;
    let (resident_mib, unique_mib) = (mean(|m| m.0), mean(|m| m.1));
    let (mut stops, mut deletes) = (Vec::new(), Vec::new());
    for id in &ids {
        stops.push(stop(c, id).await?);
    }
    for id in &ids {
        let t = Instant::now();
        c.delete_vm(id).await?;
        c.wait_vm(id, WaitFor::Deleted, Duration::from_secs(120), Duration::from_millis(20), |_| {}).await?;
        deletes.push(t.elapsed().as_secs_f64());
    }
    let t = Instant::now();
    let reqs: Vec<_> = (0..burst).map(|i| tiny(format!("burst-{i}"))).collect();
    let created = futures::future::try_join_all(reqs.iter().map(|r| c.create_vm(r))).await?;
    futures::future::try_join_all(created.iter().map(|vm| timed_wait(c, &vm.id, WaitFor::Ready))).await?;
    let burst_secs = t.elapsed().as_secs_f64();
    futures::future::try_join_all(created.iter().map(|vm| c.delete_vm(&vm.id))).await?;
    futures::future::try_join_all(created.iter().map(|vm| timed_wait(c, &vm.id, WaitFor::Deleted))).await?;
    none_left(dir.path())?;
    for v in [&mut ready, &mut stops, &mut deletes] {
        v.sort_by(|a, b| a.total_cmp(b));
    }
    Ok(Figures { first: first_secs, ready, stop: stops, delete: deletes, resident_mib, unique_mib, burst: burst_secs })
}

fn print(what: &str, snapshots: bool, f: &Figures, burst: usize) {
    println!("{what}:");
    println!("  first VM → READY {:.2} s{}", f.first, if snapshots { " (makes the snapshot)" } else { "" });
    println!("  create→READY     p50 {:.2} s   p95 {:.2} s   (n={})", percentile(&f.ready, 0.5), percentile(&f.ready, 0.95), f.ready.len());
    println!("  stop→STOPPED     p50 {:.2} s   delete→gone p50 {:.2} s", percentile(&f.stop, 0.5), percentile(&f.delete, 0.5));
    println!("  idle VM memory   resident {:.0} MiB, unique {:.0} MiB (mean)", f.resident_mib, f.unique_mib);
    println!("  {burst} VMs at once, all READY: {:.2} s", f.burst);
}

/// How many idle VMs from snapshots are READY at once: VMs are added
/// until `max`, or until the host would keep less than 2 GiB free, or one
/// does not come up; then every one is checked READY, and all deleted.
/// Idle guests use little CPU and copy-on-write disks little disk: the
/// server promises 64 virtual CPUs per host CPU and 20 times the disks' file
/// system here (`--cpu-overcommit 64 --disk-overcommit 20`; its defaults,
/// 16 and 2, stop at 32 VMs on 2 cores and at 50 of 10 GiB on 252 GiB).
async fn density(images: std::path::PathBuf, max: usize) -> anyhow::Result<()> {
    let srv = start_qemu_server_with(images, true, true, 0).await?;
    let (dir, c) = (&srv.dir, &srv.client);
    let mut ids = Vec::new();
    let mut why = format!("reached --idle {max}");
    let (start, at_start) = (Instant::now(), available());
    while ids.len() < max {
        // What each VM took so far (a guess before the first).
        let per_vm = if ids.is_empty() { 512 << 20 } else { (at_start.saturating_sub(available()) / ids.len() as u64).max(64 << 20) };
        if available() < KEEP_FREE + per_vm {
            why = format!("stopped at {} GiB available", available() >> 30);
            break;
        }
        match tokio::time::timeout(Duration::from_secs(120), ready_tiny(c, &format!("idle-{}", ids.len()))).await {
            Ok(Ok(vm)) => ids.push(vm.id),
            Ok(Err(e)) => {
                why = format!("VM {} did not come up: {e}", ids.len());
                break;
            }
            Err(_) => {
                why = format!("VM {} was not READY within 120 s", ids.len());
                break;
            }
        }
    }
    let filled = start.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let mut all_ready = 0;
    for id in &ids {
        let vm = c.get_vm(id).await?;
        if vm.status.state == vmaas_model::VmState::Ready {
            all_ready += 1;
        }
    }
    let pids: Vec<i32> = ids.iter().filter_map(|id| qemu_pid(dir.path(), id)).collect();
    let unique: u64 = pids.iter().map(|p| memory_kib(*p).1).sum();
    let cpu = idle_cpu(&pids, IDLE_WINDOW).await;
    let answering = answering(c, &ids).await;
    println!(
        "idle VMs from snapshots READY at once: {all_ready} of {} ({why}; {filled:.0} s to start them; {:.0} MiB unique each; {} GiB still available)",
        ids.len(),
        unique as f64 / 1024.0 / ids.len().max(1) as f64,
        available() >> 30
    );
    let n = pids.len().max(1) as f64;
    println!(
        "idle CPU over {} s: {} guests' QEMUs {:.3} cores in total, {:.4} per guest (100 of them: {:.2} cores; goal ≤ 0.5: {}); the server {:.3} cores; {answering} of {} answer their probe",
        IDLE_WINDOW.as_secs(),
        pids.len(),
        cpu.guests,
        cpu.guests / n,
        cpu.guests / n * 100.0,
        if cpu.guests / n * 100.0 <= 0.5 { "met" } else { "not met" },
        cpu.server,
        ids.len()
    );
    for id in &ids {
        c.delete_vm(id).await?;
    }
    for id in &ids {
        timed_wait(c, id, WaitFor::Deleted).await?;
    }
    none_left(dir.path())
}

/// How long idle guests' CPU is measured.
const IDLE_WINDOW: Duration = Duration::from_secs(60);

/// CPU used over a window, in cores.
struct IdleCpu {
    /// By the guests' QEMU processes, together.
    guests: f64,
    /// By this process (the server runs in it).
    server: f64,
}

/// The CPU `pids` and this process use over `window` (a process gone
/// counts nothing).
async fn idle_cpu(pids: &[i32], window: Duration) -> IdleCpu {
    let used = |pid: &str| crate::scale::cpu_seconds_of(pid).unwrap_or(0.0);
    let guests = || pids.iter().map(|p| used(&p.to_string())).sum::<f64>();
    let (g0, s0, t) = (guests(), used("self"), Instant::now());
    tokio::time::sleep(window).await;
    let (g1, s1, secs) = (guests(), used("self"), t.elapsed().as_secs_f64());
    let cores = |seconds: f64| seconds.max(0.0) / secs;
    IdleCpu { guests: cores(g1 - g0), server: cores(s1 - s0) }
}

/// How many of the VMs `ids` answer an HTTP GET of their page on their
/// external address (what their readiness probe asks).
async fn answering(c: &vmaas_client::Client, ids: &[String]) -> usize {
    let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).no_proxy().build();
    let Ok(http) = http else { return 0 };
    let mut n = 0;
    for id in ids {
        let Ok(vm) = c.get_vm(id).await else { continue };
        let Some(ip) = vm.status.external_ip else { continue };
        let got = http.get(format!("http://{ip}/")).send().await;
        if got.is_ok_and(|r| r.status().is_success()) {
            n += 1;
        }
    }
    n
}

/// Runs the benchmark.
pub async fn qemu(vms: usize, burst: usize, idle: usize, tcg_caches: &[u32], images: std::path::PathBuf) -> anyhow::Result<()> {
    println!(
        "vmaas-bench qemu: test guest (256Mi, 1 core), {} cores, {vms} VMs one after another, then {burst} at once; cold boots, then from snapshots",
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
    );
    let cold = one_mode(images.clone(), false, 0, vms, burst).await?;
    print("cold boot (--vm-snapshots=false)", false, &cold, burst);
    let snap = one_mode(images.clone(), true, 0, vms, burst).await?;
    print("from a template snapshot (the default)", true, &snap, burst);
    for &mib in tcg_caches {
        let small = one_mode(images.clone(), true, mib, vms, 0).await?;
        println!(
            "from a template snapshot, --clone-tcg-cache-mib {mib}: create→READY p50 {:.2} s, idle VM memory resident {:.0} MiB, unique {:.0} MiB",
            percentile(&small.ready, 0.5),
            small.resident_mib,
            small.unique_mib
        );
    }
    let p50 = |f: &Figures| percentile(&f.ready, 0.5);
    let ratio = p50(&snap) / p50(&cold).max(1e-9);
    println!(
        "snapshot / cold: create→READY p50 {ratio:.2}x (goal ≤ 0.09: {}; {:.2} s against {:.2} s; p95 {:.2}x the p50, goal ≤ 1.5), unique memory {:.2}x (goal ≤ 48 MiB: {:.0} MiB)",
        if ratio <= 0.09 { "met" } else { "not met" },
        p50(&snap),
        p50(&cold),
        percentile(&snap.ready, 0.95) / p50(&snap).max(1e-9),
        snap.unique_mib / cold.unique_mib.max(1e-9),
        snap.unique_mib
    );
    crate::disk_snapshots::snapshots(vms, images.clone()).await?;
    if idle > 0 {
        density(images, idle).await?;
    }
    Ok(())
}
