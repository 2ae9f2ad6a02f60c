//! PostgreSQL creates (issue 57, goal 5), part of `vmaas-bench api` when
//! `VMAAS_BENCH_DATABASE_URL` names a server: a bare loop of single-row
//! inserts of a created VM's JSON, from as many clients through a pool of
//! the server's size (16), beside the server's creates; and what the server
//! sends the database per create, counted by `pg_stat_statements` (when the
//! server preloads it, as `scripts/postgres.sh` starts it).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sqlx::Row as _;

use crate::Figures;

/// The pool's size: the server's on PostgreSQL.
const POOL: u32 = 16;

/// Single-row inserts of `size` bytes from `connections` clients through a
/// pool of [`POOL`] on `url`, each autocommitted, for `duration` (at most `cap`).
pub(crate) async fn bare_inserts(url: &str, size: usize, connections: usize, duration: Duration, cap: u64) -> anyhow::Result<Figures> {
    let pool = sqlx::postgres::PgPoolOptions::new().max_connections(POOL).connect(url).await?;
    sqlx::query("CREATE TABLE bare (id TEXT PRIMARY KEY, body TEXT NOT NULL)").execute(&pool).await?;
    let body = Arc::new("x".repeat(size));
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let end = started + duration;
    let tasks = (0..connections)
        .map(|_| {
            let (pool, body, next) = (pool.clone(), body.clone(), next.clone());
            tokio::spawn(async move {
                let (mut lat, mut errors) = (Vec::new(), 0u64);
                while Instant::now() < end && next.load(Ordering::Relaxed) < cap {
                    let id = next.fetch_add(1, Ordering::Relaxed).to_string();
                    let t0 = Instant::now();
                    match sqlx::query("INSERT INTO bare (id, body) VALUES ($1, $2)").bind(id).bind(body.as_str()).execute(&pool).await {
                        Ok(_) => lat.push(t0.elapsed().as_micros() as u32),
                        Err(_) => errors += 1,
                    }
                }
                (lat, errors)
            })
        })
        .collect();
    Figures::gather_since("bare PostgreSQL insert loop", tasks, Some(started), duration).await
}

/// `pg_stat_statements` on the database of `url`, if the server preloads it.
pub(crate) struct Statements {
    pool: sqlx::PgPool,
}

impl Statements {
    /// The counts of the database `url` names; `None` when the server does
    /// not preload the extension.
    pub(crate) async fn open(url: &str) -> Option<Self> {
        let pool = sqlx::postgres::PgPoolOptions::new().max_connections(1).connect(url).await.ok()?;
        sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements").execute(&pool).await.ok()?;
        sqlx::query("SELECT calls FROM pg_stat_statements LIMIT 1").fetch_all(&pool).await.ok()?;
        Some(Self { pool })
    }

    /// Counts from zero.
    pub(crate) async fn reset(&self) -> anyhow::Result<()> {
        sqlx::query("SELECT pg_stat_statements_reset()").execute(&self.pool).await?;
        Ok(())
    }

    /// The statements run on this database since [`Statements::reset`]
    /// (what was sent, whatever sent it), the eight most called with the
    /// milliseconds the database spent on each call, and the VMs stored.
    pub(crate) async fn report(&self) -> anyhow::Result<(u64, Vec<Called>, u64)> {
        let here = "dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND query NOT LIKE '%pg_stat_statements%'";
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 90) AS q, calls, mean_exec_time AS mean \
             FROM pg_stat_statements WHERE {here} ORDER BY calls DESC"
        )))
        .fetch_all(&self.pool)
        .await?;
        let calls: Vec<Called> = rows
            .iter()
            .map(|r| {
                Ok(Called {
                    query: r.try_get("q")?,
                    calls: u64::try_from(r.try_get::<i64, _>("calls")?).unwrap_or(0),
                    mean_ms: r.try_get("mean")?,
                })
            })
            .collect::<anyhow::Result<_>>()?;
        let vms: i64 =
            sqlx::query("SELECT COUNT(*) AS n FROM objects WHERE kind = 'virtual_machine'").fetch_one(&self.pool).await?.try_get("n")?;
        Ok((calls.iter().map(|c| c.calls).sum(), calls.into_iter().take(8).collect(), u64::try_from(vms).unwrap_or(0)))
    }
}

/// One statement as `pg_stat_statements` counted it.
pub(crate) struct Called {
    /// Its text, whitespace folded, cut at 90 characters.
    pub(crate) query: String,
    /// How many times it ran.
    pub(crate) calls: u64,
    /// Milliseconds the database took per call.
    pub(crate) mean_ms: f64,
}
