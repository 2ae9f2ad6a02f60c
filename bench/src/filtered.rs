//! Filtered lists in a full store (issue 57, goal 4), part of `vmaas-bench
//! api --objects N`: the quota tenant (half of the N VMs) gets 20 more,
//! labelled `bench=twenty` and stopped. Then, interleaved in one run, each
//! [`ROUNDS`] times, one request at a time:
//! - a list of 20 VMs with no filter (the baseline of the filters);
//! - a list filtered on the label, and one on `status.state` (CEL), each
//!   matching the 20;
//! - the hand-written SQL returning the same 20 rows, through a pool of its
//!   own on the same database (SQLite read-only beside the server, or
//!   PostgreSQL), using the indexes the schema has.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};
use sqlx::Row as _;

use crate::{percentile, verdict};

/// Requests of each kind measured.
const ROUNDS: usize = 500;
/// The VMs each filter matches.
const MATCHING: usize = 20;
/// The label the matching VMs have.
const LABEL: (&str, &str) = ("bench", "twenty");
/// The state they are in.
const STOPPED: &str = "VIRTUAL_MACHINE_STATE_STOPPED";

/// The server measured: its address and a client.
pub(crate) struct Api<'a> {
    /// `http://127.0.0.1:PORT`.
    pub base: &'a str,
    /// The client every request goes through.
    pub http: &'a reqwest::Client,
}

/// Where the hand-written SQL reads: the database's URL and its dialect.
pub(crate) struct Sql {
    /// `sqlite://…` or `postgres://…`.
    pub url: String,
    /// Whether it is PostgreSQL.
    pub postgres: bool,
}

/// Makes the [`MATCHING`] VMs of `token`'s tenant and waits until they are stopped.
async fn seed(s: &Api<'_>, token: &str) -> anyhow::Result<()> {
    let api = format!("{}/api/fulfillment/v1/virtual_machines", s.base);
    for i in 0..MATCHING {
        let body = json!({"object": {"metadata": {"name": format!("twenty-{i}"), "labels": {LABEL.0: LABEL.1}},
                          "spec": {"template": "simple_vm", "state": "stopped"}}});
        let r = s.http.post(&api).bearer_auth(token).json(&body).send().await?;
        if r.status() != 201 {
            bail!("twenty-{i}: {} {}", r.status(), r.text().await.unwrap_or_default());
        }
    }
    let t = Instant::now();
    loop {
        let page: Value = s.http.get(format!("{api}?state=stopped&limit=1")).bearer_auth(token).send().await?.json().await?;
        if page["total"] == MATCHING || t.elapsed() > Duration::from_secs(300) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// One list request (with the CEL `filter`, if any): its latency in ms,
/// after checking it returned [`MATCHING`] items.
async fn list(s: &Api<'_>, token: &str, filter: Option<&str>) -> anyhow::Result<f64> {
    let url = format!("{}/api/fulfillment/v1/virtual_machines", s.base);
    let limit = MATCHING.to_string();
    let query: Vec<(&str, &str)> = std::iter::once(("limit", limit.as_str())).chain(filter.map(|f| ("filter", f))).collect();
    let t = Instant::now();
    let page: Value = s.http.get(&url).query(&query).bearer_auth(token).send().await?.error_for_status()?.json().await?;
    let took = t.elapsed().as_secs_f64() * 1000.0;
    let got = page["items"].as_array().map_or(0, Vec::len);
    if got != MATCHING {
        bail!("{filter:?}: {got} items, not {MATCHING}");
    }
    Ok(took)
}

/// The hand-written queries: the same rows as the label's and the state's lists.
fn queries(postgres: bool) -> [String; 2] {
    let columns = "id, kind, tenant, name, spec, status, state, meta, version, created_at";
    let head = format!("SELECT {columns} FROM objects WHERE kind = 'virtual_machine' AND tenant = $1");
    let label = if postgres {
        format!("((meta::jsonb) -> 'labels') @> '{{\"{}\": \"{}\"}}'::jsonb", LABEL.0, LABEL.1)
    } else {
        format!("json_extract(meta, '$.labels.{}') = '{}'", LABEL.0, LABEL.1)
    };
    let tail = format!("ORDER BY created_at, id LIMIT {MATCHING}");
    [format!("{head} AND {label} {tail}"), format!("{head} AND state = '{STOPPED}' {tail}")]
}

/// One SQL query's latency in ms, after checking it returned [`MATCHING`] rows.
async fn sql(pool: &sqlx::AnyPool, query: &str, tenant: &str) -> anyhow::Result<f64> {
    let t = Instant::now();
    let rows = sqlx::query(sqlx::AssertSqlSafe(query.to_owned())).bind(tenant).fetch_all(pool).await?;
    // Read as the server would: every column of every row.
    let bytes: usize = rows.iter().map(|r| r.try_get::<String, _>("spec").map_or(0, |s| s.len())).sum();
    let took = t.elapsed().as_secs_f64() * 1000.0;
    if rows.len() != MATCHING || bytes == 0 {
        bail!("{query}: {} rows", rows.len());
    }
    Ok(took)
}

/// Seeds, measures and prints the table for database `name`.
pub(crate) async fn report(s: &Api<'_>, name: &str, token: &str, tenant: &str, db: &Sql) -> anyhow::Result<()> {
    seed(s, token).await?;
    sqlx::any::install_default_drivers();
    let pool = sqlx::any::AnyPoolOptions::new().max_connections(2).connect(&db.url).await.context("the bench's own pool")?;
    let label = format!("this.metadata.labels.{} == '{}'", LABEL.0, LABEL.1);
    let state = format!("this.status.state == '{STOPPED}'");
    let [sql_label, sql_state] = queries(db.postgres);
    let mut lat: [Vec<f64>; 5] = Default::default();
    for _ in 0..ROUNDS {
        lat[0].push(list(s, token, None).await?);
        lat[1].push(list(s, token, Some(&label)).await?);
        lat[2].push(list(s, token, Some(&state)).await?);
        lat[3].push(sql(&pool, &sql_label, tenant).await?);
        lat[4].push(sql(&pool, &sql_state, tenant).await?);
    }
    for l in &mut lat {
        l.sort_by(f64::total_cmp);
    }
    let p = |i: usize, q: f64| percentile(&lat[i], q);
    println!("| {name}: lists of {MATCHING} ({ROUNDS} each, interleaved) | p50 | p99 | goal |");
    println!("|---|---|---|---|");
    println!("| no filter | {:.2} ms | {:.2} ms | baseline |", p(0, 0.5), p(0, 0.99));
    for (i, what, sql_i) in [(1, "label", 3), (2, "state", 4)] {
        let (to_plain, to_sql) = (p(i, 0.99) / p(0, 0.99), p(sql_i, 0.99) / p(i, 0.99));
        println!(
            "| filter on the {what} | {:.2} ms | {:.2} ms | p99 {to_plain:.2}× no filter (≤ 2×: {}) |",
            p(i, 0.5),
            p(i, 0.99),
            verdict(to_plain <= 2.0)
        );
        println!(
            "| hand-written SQL, same rows ({what}) | {:.2} ms | {:.2} ms | vmaas {to_sql:.2} of it at p99 (≥ 0.5: {}) |",
            p(sql_i, 0.5),
            p(sql_i, 0.99),
            verdict(to_sql >= 0.5)
        );
    }
    Ok(())
}
