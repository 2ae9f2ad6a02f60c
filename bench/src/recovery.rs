//! `vmaas-bench recovery`: the time a server killed with `kill -9` takes to
//! come back with N running VMs: until its API answers, and until it has
//! reconciled every VM (`/healthz` says `reconciler.synced`), watching that
//! no VM's state regresses from READY meanwhile. The server is the real
//! binary, so that it can be killed; the guests are real QEMU guests.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use vmaas_client::{Client, VmQuery, WaitFor};
use vmaas_model::{VirtualMachineTemplate, VmState};

use crate::percentile;
use crate::vms::{none_left, tiny_template};

/// VMs booted at once while preparing.
const WAVE: usize = 10;

/// A `vmaas-server` process over one data directory.
struct ServerProcess {
    bin: PathBuf,
    dir: PathBuf,
    images: PathBuf,
    port: u16,
    /// Whether the server has `--cpu-overcommit` (a release before it has no limit).
    overcommit: bool,
    child: Option<Child>,
}

impl ServerProcess {
    fn start(&mut self) -> anyhow::Result<()> {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.dir.join("server.log"))?;
        let mut cmd = Command::new(&self.bin);
        cmd.args([
            "--listen",
            &format!("127.0.0.1:{}", self.port),
            "--backend",
            "qemu",
            "--vm-address-pool",
            "127.44.0.0/24",
            "--external-ip-pool",
            "127.45.0.0/24",
        ]);
        if self.overcommit {
            cmd.args(["--cpu-overcommit", "64"]);
        }
        let child = cmd
            .args(["--stop-grace", "5s"])
            .arg("--data-dir")
            .arg(&self.dir)
            .arg("--images-dir")
            .arg(&self.images)
            .env("VMAAS_TENANT_RATE_LIMIT", "1000000")
            .env("VMAAS_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", self.bin.display()))?;
        self.child = Some(child);
        Ok(())
    }

    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill").arg("-TERM").arg(c.id().to_string()).status();
            let _ = c.wait();
        }
    }

    fn token(&self, tenant: &str, admin: bool) -> anyhow::Result<String> {
        crate::server_token(&self.bin, &self.dir, tenant, admin, "2h")
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.kill9();
    }
}

async fn health(http: &reqwest::Client, endpoint: &str) -> Option<serde_json::Value> {
    let r = http.get(format!("{endpoint}/healthz")).timeout(Duration::from_millis(500)).send().await.ok()?;
    if !r.status().is_success() {
        return None;
    }
    r.json().await.ok()
}

/// Whether the server has reconciled every VM since it started: its
/// `/healthz` says so, or (a release without that report) it has made at
/// least one reconcile pass per VM.
async fn synced(http: &reqwest::Client, endpoint: &str, health: &serde_json::Value, n: usize) -> bool {
    if let Some(s) = health["reconciler"]["synced"].as_bool() {
        return s;
    }
    let Ok(r) = http.get(format!("{endpoint}/metrics")).send().await else { return false };
    let text = r.text().await.unwrap_or_default();
    let passes = text.lines().find_map(|l| l.strip_prefix("vmaas_reconcile_passes_total ")).and_then(|v| v.trim().parse::<f64>().ok());
    passes.is_some_and(|p| p >= n as f64)
}

/// One kill and recovery: `(seconds to API, seconds to reconciled, READY regressions seen)`.
async fn one_recovery(srv: &mut ServerProcess, c: &Client, endpoint: &str, n: usize) -> anyhow::Result<(f64, f64, usize)> {
    let http = reqwest::Client::new();
    srv.kill9();
    let t = Instant::now();
    srv.start()?;
    let deadline = t + Duration::from_secs(120);
    let mut api = None;
    let mut regressions = 0;
    loop {
        if Instant::now() > deadline {
            bail!("the server did not recover within 120 s; see {}", srv.dir.join("server.log").display());
        }
        let Some(h) = health(&http, endpoint).await else {
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        };
        api.get_or_insert(t.elapsed().as_secs_f64());
        let page = c.list_vms(&VmQuery { limit: Some(n as u64), ..Default::default() }).await?;
        regressions += page.items.iter().filter(|v| v.status.state != VmState::Ready).count();
        if synced(&http, endpoint, &h, n).await {
            let done = t.elapsed().as_secs_f64();
            return Ok((api.unwrap_or(done), done, regressions));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs the benchmark: N VMs READY, then `rounds` kills and recoveries.
pub async fn recovery(n: usize, rounds: usize, images: PathBuf, server: Option<PathBuf>) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let bin = match server {
        Some(b) => b,
        None => std::env::current_exe()?.parent().context("bench directory")?.join("vmaas-server"),
    };
    if !bin.exists() {
        bail!("{} is missing: cargo build --release --bins", bin.display());
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let help = Command::new(&bin).arg("--help").output()?;
    let overcommit = String::from_utf8_lossy(&help.stdout).contains("--cpu-overcommit");
    let mut srv = ServerProcess { bin, dir: dir.path().to_owned(), images, port, overcommit, child: None };
    srv.start()?;
    let admin = Client::new(&endpoint, Some(srv.token("ops", true)?))?;
    let c = Client::new(&endpoint, Some(srv.token("bench", false)?))?;
    let t = Instant::now();
    while admin.all_templates().await.is_err() {
        if t.elapsed() > Duration::from_secs(30) {
            bail!("the server did not start; see {}", dir.path().join("server.log").display());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let tiny: VirtualMachineTemplate = serde_json::from_value(tiny_template())?;
    admin.create_template(&tiny).await?;
    println!("vmaas-bench recovery: {n} VMs of the test guest, then {rounds} × kill -9 of the server and a restart");
    let boot = Instant::now();
    let mut ids = Vec::new();
    // In waves: fifty software-emulated guests booting at once on two cores
    // starve each other's timers.
    for wave in (0..n).collect::<Vec<_>>().chunks(WAVE) {
        let mut started = Vec::new();
        for i in wave {
            started.push(c.create_vm(&crate::vms::tiny(format!("r-{i}"))).await?.id);
        }
        for id in &started {
            c.wait_vm(id, WaitFor::Ready, Duration::from_secs(600), Duration::from_millis(500), |_| {}).await?;
        }
        ids.extend(started);
    }
    println!("{n} VMs READY after {:.1} s", boot.elapsed().as_secs_f64());
    let (mut api, mut synced, mut regressions) = (Vec::new(), Vec::new(), 0);
    for _ in 0..rounds {
        let (a, s, r) = one_recovery(&mut srv, &c, &endpoint, n).await?;
        api.push(a);
        synced.push(s);
        regressions += r;
    }
    api.sort_by(f64::total_cmp);
    synced.sort_by(f64::total_cmp);
    println!("kill -9 → API answering        p50 {:.3} s   max {:.3} s", percentile(&api, 0.5), percentile(&api, 1.0));
    println!("kill -9 → every VM reconciled  p50 {:.3} s   max {:.3} s   (goal ≤ 2 s)", percentile(&synced, 0.5), percentile(&synced, 1.0));
    println!("READY VMs seen not READY while recovering: {regressions}");
    cleanup(&mut srv, &c, &ids, dir.path()).await
}

async fn cleanup(srv: &mut ServerProcess, c: &Client, ids: &[String], dir: &Path) -> anyhow::Result<()> {
    futures::future::try_join_all(ids.iter().map(|id| c.delete_vm(id))).await?;
    for id in ids {
        c.wait_vm(id, WaitFor::Deleted, Duration::from_secs(300), Duration::from_millis(200), |_| {}).await?;
    }
    srv.stop();
    none_left(dir)
}
