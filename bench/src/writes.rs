//! API writes: VM creates per second through the REST API (and through
//! gRPC's `ComputeInstances/Create`, on a server of its own), from
//! `connections` clients at once, on SQLite and (when
//! `VMAAS_BENCH_DATABASE_URL` names a PostgreSQL server) on PostgreSQL,
//! each create acknowledged only once it is committed; beside a bare loop
//! that inserts rows of the same size into SQLite, one transaction each,
//! with the journal mode and synchronous setting the store uses. On SQLite
//! the three run in turn twice, `sync` before each, and the better of each
//! pair is reported.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::json;
use sqlx::Connection;
use vmaas_server::auth::Role;
use vmaas_server::none_backend::NoBackend;
use vmaas_server::startup::{App, Config};

use crate::{Figures, grpc_create, pg_writes, serve};

/// Most creates one scenario makes, whatever its duration.
const MAX_CREATES: u64 = 50_000;

/// Which front the creates go through.
#[derive(Clone, Copy, PartialEq)]
enum Front {
    /// `POST virtual_machines`.
    Rest,
    /// gRPC's `osac.public.v1.ComputeInstances/Create`.
    Grpc,
}

/// Creates through a server on `database` (SQLite in a new data directory
/// when `None`) by `front`; the figures and the size of a created VM's JSON.
async fn creates(
    name: &str,
    front: Front,
    database: Option<String>,
    connections: usize,
    duration: Duration,
    statements: Option<&pg_writes::Statements>,
) -> anyhow::Result<(Figures, usize)> {
    let dir = tempfile::tempdir()?;
    let config = Config {
        database_url: database,
        reconcile_interval: Duration::from_secs(3600),
        // Checked on every request, never refusing: its cost, not its limit.
        tenant_rate: vmaas_server::rate::RateConfig::new(1_000_000_000, 0),
        ..Config::new("127.0.0.1:0".parse()?, dir.path().to_owned())
    };
    let app = App::open(config, Arc::new(NoBackend)).await?;
    let admin = app.state.keys.issue("ops", "ops", Role::Admin, Duration::from_secs(3600))?;
    let token = app.state.keys.issue("bench", "bench", Role::Tenant, Duration::from_secs(3600))?;
    let addr = serve(app.router_with_grpc()?).await?;
    let base = format!("http://{addr}/api/fulfillment/v1");
    let http = reqwest::Client::new();
    let tpl = json!({"object": {"id": "simple_vm", "parameters": [{"name": "vm_cpu_cores", "default": {"value": 2}}]}});
    http.post(format!("{base}/virtual_machine_templates")).bearer_auth(&admin).json(&tpl).send().await?.error_for_status()?;
    let sample = http
        .post(format!("{base}/virtual_machines"))
        .bearer_auth(&token)
        .json(&json!({"object": {"id": "sample", "spec": {"template": "simple_vm"}}}))
        .send()
        .await?
        .error_for_status()?
        .text()
        .await?;
    if let Some(s) = statements {
        s.reset().await?;
    }
    let made = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let started = Instant::now();
    let end = started + duration;
    let mut tasks = Vec::new();
    for w in 0..connections {
        let (url, token, made) = (format!("{base}/virtual_machines"), token.clone(), made.clone());
        let client = reqwest::Client::builder().pool_max_idle_per_host(1).build()?;
        let mut grpc = match front {
            Front::Grpc => Some(grpc_create::Client::connect(&format!("http://{addr}"), &token).await?),
            Front::Rest => None,
        };
        tasks.push(tokio::spawn(async move {
            let (mut lat, mut errors) = (Vec::new(), 0u64);
            for n in 0u64.. {
                if Instant::now() >= end || made.fetch_add(1, std::sync::atomic::Ordering::Relaxed) >= MAX_CREATES {
                    break;
                }
                let name = format!("w{w}-{n}");
                let t0 = Instant::now();
                let ok = match grpc.as_mut() {
                    Some(g) => g.create(&name, "simple_vm").await.is_ok(),
                    None => {
                        let body = json!({"object": {"id": name, "spec": {"template": "simple_vm"}}});
                        // The answer is read whole, as the gRPC client reads and decodes its own.
                        match client.post(&url).bearer_auth(&token).json(&body).send().await {
                            Ok(r) => r.status().as_u16() == 201 && r.bytes().await.is_ok(),
                            Err(_) => false,
                        }
                    }
                };
                match ok {
                    true => lat.push(t0.elapsed().as_micros() as u32),
                    false => errors += 1,
                }
            }
            (lat, errors)
        }));
    }
    Ok((Figures::gather_since(name, tasks, Some(started), duration).await?, sample.len()))
}

/// Inserts rows of `size` bytes into a new SQLite file for `duration`, one
/// autocommitted insert at a time (WAL, synchronous FULL: the store's settings).
async fn bare_sqlite(size: usize, duration: Duration) -> anyhow::Result<Figures> {
    let dir = tempfile::tempdir()?;
    let opts = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(dir.path().join("bare.db"))
        .create_if_missing(true)
        .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
        .synchronous(sqlx::sqlite::SqliteSynchronous::Full);
    let mut conn = sqlx::SqliteConnection::connect_with(&opts).await?;
    sqlx::query("CREATE TABLE t (id TEXT PRIMARY KEY, body TEXT NOT NULL)").execute(&mut conn).await?;
    let body = "x".repeat(size);
    let started = Instant::now();
    let end = started + duration;
    let mut lat = Vec::new();
    for n in 0u64..MAX_CREATES {
        let t0 = Instant::now();
        if t0 >= end {
            break;
        }
        sqlx::query("INSERT INTO t (id, body) VALUES ($1, $2)").bind(n.to_string()).bind(&body).execute(&mut conn).await?;
        lat.push(t0.elapsed().as_micros() as u32);
    }
    Figures::gather_since("bare SQLite insert loop", vec![tokio::spawn(async move { (lat, 0) })], Some(started), duration).await
}

/// A new database on the PostgreSQL server of `base` (a `postgres://` URL).
pub(crate) async fn fresh_postgres(base: &str) -> anyhow::Result<String> {
    let name = format!("bench_{}", uuid::Uuid::new_v4().simple());
    let mut conn = sqlx::PgConnection::connect(base).await.context("VMAAS_BENCH_DATABASE_URL")?;
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut conn).await?;
    let (head, _) = base.rsplit_once('/').context("a database URL ends with /DATABASE")?;
    Ok(format!("{head}/{name}"))
}

/// Writes to disk what the scenarios before left dirty in the page cache
/// (and deleted files' blocks), so that its writeback falls into no
/// scenario's time.
fn settle() -> anyhow::Result<()> {
    let status = std::process::Command::new("sync").status().context("running sync")?;
    anyhow::ensure!(status.success(), "sync failed: {status}");
    Ok(())
}

/// The one of `a` and `b` with the higher rate.
fn best(a: Option<Figures>, b: Figures) -> Figures {
    match a {
        Some(a) if a.rps >= b.rps => a,
        _ => b,
    }
}

/// The write figures on SQLite, then on PostgreSQL if named. The creates
/// through REST and gRPC and the bare loop run in turn, twice, and the
/// better of each pair counts (as for the gRPC Gets): runs of the same
/// build spread by ±8 % here.
pub async fn figures(connections: usize, duration: Duration) -> anyhow::Result<Vec<Figures>> {
    let (mut sqlite, mut bare, mut grpc, mut size) = (None, None, None, 0);
    for _ in 0..2 {
        settle()?;
        let (rest, made) = creates("vmaas POST virtual_machines, SQLite", Front::Rest, None, connections, duration, None).await?;
        (sqlite, size) = (Some(best(sqlite, rest)), made);
        settle()?;
        let (g, _) = creates("vmaas gRPC ComputeInstances/Create", Front::Grpc, None, connections, duration, None).await?;
        grpc = Some(best(grpc, g));
        settle()?;
        bare = Some(best(bare, bare_sqlite(size, duration).await?));
    }
    let (sqlite, bare, grpc) = (sqlite.context("no run")?, bare.context("no run")?, grpc.context("no run")?);
    let mut out = vec![bare, sqlite, grpc];
    match std::env::var("VMAAS_BENCH_DATABASE_URL").ok().filter(|u| !u.is_empty()) {
        Some(base) => out.extend(postgres(&base, size, connections, duration).await?),
        None => println!("(PostgreSQL creates skipped: set VMAAS_BENCH_DATABASE_URL=postgres://… to measure them)"),
    }
    Ok(out)
}

/// The server's creates on PostgreSQL, what it sends per create, and the
/// bare insert loop beside them.
async fn postgres(base: &str, size: usize, connections: usize, duration: Duration) -> anyhow::Result<[Figures; 2]> {
    let url = fresh_postgres(base).await?;
    let statements = pg_writes::Statements::open(&url).await;
    settle()?;
    let name = "vmaas POST virtual_machines, PostgreSQL";
    let (made, _) = creates(name, Front::Rest, Some(url), connections, duration, statements.as_ref()).await?;
    match statements {
        Some(s) => {
            let (calls, top, vms) = s.report().await?;
            // The sample VM was made before the counts were reset.
            let creates = vms.saturating_sub(1).max(1);
            println!(
                "PostgreSQL: {calls} statements for {creates} creates: {:.1} per create; the most called:",
                calls as f64 / creates as f64
            );
            for c in top {
                println!("  {:>6.2} per create, {:>6.3} ms each  {}", c.calls as f64 / creates as f64, c.mean_ms, c.query);
            }
        }
        None => println!("(statements per create not counted: the PostgreSQL server does not preload pg_stat_statements)"),
    }
    let fresh = fresh_postgres(base).await?;
    settle()?;
    let bare = pg_writes::bare_inserts(&fresh, size, connections, duration, MAX_CREATES).await?;
    Ok([bare, made])
}

/// Prints the write figures alone, and their ratio.
pub async fn report(connections: usize, duration: Duration) -> anyhow::Result<()> {
    println!("vmaas-bench api --writes-only: {connections} connections, {} s per scenario", duration.as_secs());
    let results = figures(connections, duration).await?;
    for f in &results {
        println!("{:<36} {:>10.0} {:>9.2} {:>9.2} {:>7}", f.name, f.rps, f.p50_ms, f.p99_ms, f.errors);
    }
    println!("ratio creates on SQLite / bare SQLite inserts: {:.0}% (goal >= 50%)", 100.0 * results[1].rps / results[0].rps);
    println!("ratio gRPC creates / REST creates (SQLite): {:.0}% (goal >= 90%)", 100.0 * results[2].rps / results[1].rps);
    if let [.., bare, pg] = results.as_slice()
        && results.len() == 5
    {
        println!("ratio creates on PostgreSQL / bare PostgreSQL inserts: {:.0}% (goal >= 50%)", 100.0 * pg.rps / bare.rps);
    }
    Ok(())
}
