//! `vmaas-bench api --objects N`: the server as its store fills. The real
//! `vmaas-server` binary (`--backend none`) is measured empty and then with
//! N VMs stored, on SQLite and (with `VMAAS_BENCH_DATABASE_URL`) on
//! PostgreSQL: its CPU while nobody calls it, `/healthz` p99, and VM create
//! p50 for a tenant without a quota and one with a quota (holding half of
//! the VMs), and lists filtered on a label and on a state beside
//! hand-written SQL ([`crate::filtered`]). On PostgreSQL a second replica then takes creates while the
//! first is frozen with SIGSTOP for 20 s in the middle of its own burst.
//! `--server` measures another build of the server, to compare.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::{percentile, verdict};

/// Creates measured one at a time, per tenant and store size.
const SAMPLES: usize = 100;
/// Clients filling the store.
const FILLERS: usize = 32;
/// The longest a fill may take.
const FILL_LIMIT: Duration = Duration::from_secs(1200);
/// How long idle CPU is measured.
const IDLE_WINDOW: Duration = Duration::from_secs(20);
/// How long the first replica is frozen.
const FREEZE: Duration = Duration::from_secs(20);

/// One `vmaas-server` process.
pub(crate) struct Server {
    pub(crate) child: Child,
    dir: PathBuf,
    pub(crate) base: String,
    pub(crate) http: reqwest::Client,
}

impl Server {
    /// Starts `bin` on `dir` (and `database`), sharing `key` when given; waits until it answers.
    async fn start(bin: &Path, dir: &Path, database: Option<&str>, key: Option<&Path>) -> anyhow::Result<Self> {
        Self::start_on(bin, dir, database, key, &["--backend", "none"]).await
    }

    /// [`Server::start`] with the backend `backend` names (`--backend kubevirt …`).
    pub(crate) async fn start_on(
        bin: &Path,
        dir: &Path,
        database: Option<&str>,
        key: Option<&Path>,
        backend: &[&str],
    ) -> anyhow::Result<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let log = std::fs::File::create(dir.join("server.log"))?;
        let mut cmd = Command::new(bin);
        cmd.args(["--listen", &format!("127.0.0.1:{port}")]).args(backend).arg("--data-dir").arg(dir);
        if let Some(url) = database {
            cmd.args(["--database-url", url]);
        }
        if let Some(key) = key {
            cmd.arg("--jwt-key-file").arg(key);
        }
        // What is measured is the server's own rate: the tenant's limit is
        // checked on every request but set above what the bench reaches.
        let child = cmd
            .env("VMAAS_TENANT_RATE_LIMIT", "1000000")
            .env("VMAAS_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()?;
        let s = Self { child, dir: dir.to_owned(), base: format!("http://127.0.0.1:{port}"), http: reqwest::Client::new() };
        let t = Instant::now();
        while s.http.get(format!("{}/healthz", s.base)).send().await.is_err() {
            if t.elapsed() > Duration::from_secs(60) {
                bail!("the server did not start; see {}", dir.join("server.log").display());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(s)
    }

    pub(crate) fn token(&self, bin: &Path, tenant: &str, admin: bool) -> anyhow::Result<String> {
        crate::server_token(bin, &self.dir, tenant, admin, "4h")
    }

    fn signal(&self, sig: &str) -> anyhow::Result<()> {
        let ok = Command::new("kill").args([sig, &self.child.id().to_string()]).status()?.success();
        if ok { Ok(()) } else { bail!("kill {sig} failed") }
    }

    /// CPU seconds the process has used so far.
    fn cpu_seconds(&self) -> anyhow::Result<f64> {
        cpu_seconds_of(&self.child.id().to_string())
    }

    /// One create of VM `name` as `token`: its latency, in ms.
    async fn create(&self, token: &str, name: &str) -> anyhow::Result<f64> {
        let body = json!({"object": {"metadata": {"name": name}, "spec": {"template": "simple_vm"}}});
        let t = Instant::now();
        let r = self.http.post(format!("{}/api/fulfillment/v1/virtual_machines", self.base)).bearer_auth(token).json(&body).send().await?;
        if r.status() != 201 {
            bail!("create {name}: {} {}", r.status(), r.text().await.unwrap_or_default());
        }
        Ok(t.elapsed().as_secs_f64() * 1000.0)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-CONT", &self.child.id().to_string()]).status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The CPU seconds process `pid` has used (`/proc/PID/stat`, read by the
/// server's own `process_*` metrics).
pub(crate) fn cpu_seconds_of(pid: &str) -> anyhow::Result<f64> {
    vmaas_server::process_metrics::cpu_seconds_of(pid).with_context(|| format!("reading /proc/{pid}/stat"))
}

/// What one store size gave.
#[derive(Debug, Default, Clone, Copy)]
struct Figures {
    idle_cores: f64,
    healthz_p99_ms: f64,
    create_p50_ms: f64,
    create_quota_p50_ms: f64,
}

/// The tenants, their tokens and the admin's.
struct Tokens {
    admin: String,
    free: String,
    quota: String,
    others: Vec<String>,
}

/// Measures `s` as it is: idle CPU, healthz, creates (named `tag`-…).
async fn measure(s: &Server, t: &Tokens, tag: &str) -> anyhow::Result<Figures> {
    let before = s.cpu_seconds()?;
    tokio::time::sleep(IDLE_WINDOW).await;
    let idle_cores = (s.cpu_seconds()? - before) / IDLE_WINDOW.as_secs_f64();
    let mut health = Vec::new();
    for _ in 0..200 {
        let started = Instant::now();
        s.http.get(format!("{}/healthz", s.base)).send().await?;
        health.push(started.elapsed().as_secs_f64() * 1000.0);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    health.sort_by(f64::total_cmp);
    let (mut free, mut quota) = (Vec::new(), Vec::new());
    for i in 0..SAMPLES {
        free.push(s.create(&t.free, &format!("{tag}-f{i}")).await?);
        quota.push(s.create(&t.quota, &format!("{tag}-q{i}")).await?);
    }
    free.sort_by(f64::total_cmp);
    quota.sort_by(f64::total_cmp);
    Ok(Figures {
        idle_cores,
        healthz_p99_ms: percentile(&health, 0.99),
        create_p50_ms: percentile(&free, 0.5),
        create_quota_p50_ms: percentile(&quota, 0.5),
    })
}

/// Stores `n` VMs: half of them the quota tenant's, the rest spread over ten others.
async fn fill(s: &Server, t: &Tokens, n: usize) -> anyhow::Result<f64> {
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..FILLERS {
        let (next, base, quota, others) = (next.clone(), s.base.clone(), t.quota.clone(), t.others.clone());
        tasks.push(tokio::spawn(async move {
            let http = reqwest::Client::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n || started.elapsed() > FILL_LIMIT {
                    return Ok::<_, anyhow::Error>(());
                }
                let token = if i % 2 == 0 { &quota } else { &others[i % others.len()] };
                let body = json!({"object": {"metadata": {"name": format!("fill-{i}")}, "spec": {"template": "simple_vm"}}});
                let r = http.post(format!("{base}/api/fulfillment/v1/virtual_machines")).bearer_auth(token).json(&body).send().await?;
                if r.status() != 201 {
                    bail!("fill {i}: {} {}", r.status(), r.text().await.unwrap_or_default());
                }
            }
        }));
    }
    for task in tasks {
        task.await??;
    }
    if started.elapsed() > FILL_LIMIT {
        bail!("filling {n} VMs took longer than {FILL_LIMIT:?}");
    }
    Ok(started.elapsed().as_secs_f64())
}

/// Waits until the reconciler has seen everything (`/healthz`), then until
/// it has worked through what the fill queued (its pass count still for
/// [`STILL`]; at most [`CATCH_UP_LIMIT`]), then one resync period more;
/// returns how long the catching up took.
async fn settle(s: &Server) -> anyhow::Result<Duration> {
    let t = Instant::now();
    loop {
        let h: Value = s.http.get(format!("{}/healthz", s.base)).send().await?.json().await.unwrap_or_default();
        if h["reconciler"]["synced"].as_bool() != Some(false) || t.elapsed() > Duration::from_secs(300) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let (mut last, mut still_since) = (passes(s).await?, Instant::now());
    while still_since.elapsed() < STILL && t.elapsed() < CATCH_UP_LIMIT {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = passes(s).await?;
        if now != last {
            (last, still_since) = (now, Instant::now());
        }
    }
    let caught_up = t.elapsed().saturating_sub(STILL);
    tokio::time::sleep(Duration::from_secs(15)).await;
    Ok(caught_up)
}

/// How long the reconciler's pass count must stay the same to have caught up.
const STILL: Duration = Duration::from_secs(3);
/// The longest the reconciler is given to catch up.
const CATCH_UP_LIMIT: Duration = Duration::from_secs(600);

/// The reconcile passes the server has run (`vmaas_reconcile_passes_total`).
async fn passes(s: &Server) -> anyhow::Result<f64> {
    let text = s.http.get(format!("{}/metrics", s.base)).send().await?.text().await?;
    let line = text.lines().find(|l| l.starts_with("vmaas_reconcile_passes_total")).context("vmaas_reconcile_passes_total in /metrics")?;
    Ok(line.rsplit(' ').next().unwrap_or_default().parse()?)
}

async fn setup(s: &Server, bin: &Path) -> anyhow::Result<Tokens> {
    let tokens = Tokens {
        admin: s.token(bin, "ops", true)?,
        free: s.token(bin, "free", false)?,
        quota: s.token(bin, "quota", false)?,
        others: (0..10).map(|i| s.token(bin, &format!("tenant{i}"), false)).collect::<anyhow::Result<_>>()?,
    };
    let api = format!("{}/api/fulfillment/v1", s.base);
    let tpl = json!({"object": {"id": "simple_vm", "parameters": [{"name": "vm_cpu_cores", "default": {"value": 2}}]}});
    s.http.post(format!("{api}/virtual_machine_templates")).bearer_auth(&tokens.admin).json(&tpl).send().await?.error_for_status()?;
    let quota = json!({"object": {"spec": {"virtual_machines": 1_000_000, "cores": 100_000_000, "memory": "1Pi", "disk": "1Ei"}}});
    s.http.put(format!("{api}/tenants/quota/quota")).bearer_auth(&tokens.admin).json(&quota).send().await?.error_for_status()?;
    Ok(tokens)
}

/// The whole scenario on one database: empty, then `n` VMs.
async fn one_database(bin: &Path, name: &str, database: Option<&str>, n: usize) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let s = Server::start(bin, dir.path(), database, None).await?;
    let t = setup(&s, bin).await?;
    settle(&s).await?;
    let empty = measure(&s, &t, "empty").await?;
    let took = fill(&s, &t, n).await?;
    println!("{name}: {n} VMs stored in {took:.1} s ({:.0} creates/s from {FILLERS} clients)", n as f64 / took);
    let caught_up = settle(&s).await?;
    println!("{name}: the reconciler caught up {:.1} s after the fill", caught_up.as_secs_f64());
    let full = measure(&s, &t, "full").await?;
    println!("| {name} | empty | {n} VMs | goal at {n} |");
    println!("|---|---|---|---|");
    println!("| idle CPU, cores | {:.3} | {:.3} | ≤ 0.05: {} |", empty.idle_cores, full.idle_cores, verdict(full.idle_cores <= 0.05));
    println!(
        "| `/healthz` p99 | {:.2} ms | {:.2} ms | ≤ 10 ms: {} |",
        empty.healthz_p99_ms,
        full.healthz_p99_ms,
        verdict(full.healthz_p99_ms <= 10.0)
    );
    println!(
        "| create p50, no quota | {:.2} ms | {:.2} ms | ≤ 2× empty: {} |",
        empty.create_p50_ms,
        full.create_p50_ms,
        verdict(full.create_p50_ms <= 2.0 * empty.create_p50_ms)
    );
    println!(
        "| create p50, a quota (holding {} VMs) | {:.2} ms | {:.2} ms | ≤ 2× empty: {} |",
        n / 2,
        empty.create_quota_p50_ms,
        full.create_quota_p50_ms,
        verdict(full.create_quota_p50_ms <= 2.0 * empty.create_quota_p50_ms)
    );
    let sql = match database {
        Some(url) => crate::filtered::Sql { url: url.to_owned(), postgres: true },
        None => crate::filtered::Sql { url: format!("sqlite://{}?mode=ro", s.dir.join("vmaas.db").display()), postgres: false },
    };
    let api = crate::filtered::Api { base: &s.base, http: &s.http };
    crate::filtered::report(&api, name, &t.quota, "quota", &sql).await?;
    if let Some(url) = database {
        frozen(bin, &s, &t, url).await?;
    }
    Ok(())
}

/// A second replica on the same database takes creates, one at a time,
/// while the first is frozen for [`FREEZE`] in the middle of a burst of its own.
async fn frozen(bin: &Path, a: &Server, t: &Tokens, url: &str) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let b = Server::start(bin, dir.path(), Some(url), Some(&a.dir.join("jwt-hs256.key"))).await?;
    let burst: Vec<_> = (0..16)
        .map(|i| {
            let (base, token) = (a.base.clone(), t.free.clone());
            tokio::spawn(async move {
                let http = reqwest::Client::builder().timeout(FREEZE * 2).build()?;
                for k in 0..50 {
                    let body = json!({"object": {"metadata": {"name": format!("a-{i}-{k}")}, "spec": {"template": "simple_vm"}}});
                    let _ = http.post(format!("{base}/api/fulfillment/v1/virtual_machines")).bearer_auth(&token).json(&body).send().await;
                }
                Ok::<_, anyhow::Error>(())
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(50)).await;
    a.signal("-STOP")?;
    let frozen_at = Instant::now();
    let mut lat = Vec::new();
    let mut i = 0;
    while frozen_at.elapsed() < FREEZE && i < 5000 {
        lat.push(b.create(&t.free, &format!("b-{i}")).await?);
        i += 1;
    }
    a.signal("-CONT")?;
    for task in burst {
        task.await??;
    }
    lat.sort_by(f64::total_cmp);
    let worst = percentile(&lat, 1.0);
    println!(
        "| replica frozen {} s: creates through the other | {} creates | p50 {:.2} ms, p99 {:.2} ms, slowest {worst:.1} ms | slowest ≤ 1000 ms: {} |",
        FREEZE.as_secs(),
        lat.len(),
        percentile(&lat, 0.5),
        percentile(&lat, 0.99),
        verdict(worst <= 1000.0)
    );
    Ok(())
}

/// The server binary: `server`, else `vmaas-server` beside this binary.
pub(crate) fn server_binary(server: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let bin = match server {
        Some(b) => b,
        None => std::env::current_exe()?.parent().context("bench directory")?.join("vmaas-server"),
    };
    if !bin.exists() {
        bail!("{} is missing: cargo build --release --bins", bin.display());
    }
    Ok(bin)
}

/// Runs the benchmark with `n` VMs, on `server` (default: beside this binary).
pub async fn report(n: usize, server: Option<PathBuf>) -> anyhow::Result<()> {
    let bin = server_binary(server)?;
    println!("vmaas-bench api --objects {n}: {} (--backend none)", bin.display());
    one_database(&bin, "SQLite", None, n).await?;
    match std::env::var("VMAAS_BENCH_DATABASE_URL") {
        Ok(base) => one_database(&bin, "PostgreSQL", Some(&crate::writes::fresh_postgres(&base).await?), n).await,
        Err(_) => {
            println!("(PostgreSQL skipped: set VMAAS_BENCH_DATABASE_URL=postgres://… to measure it)");
            Ok(())
        }
    }
}
