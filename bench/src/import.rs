//! `vmaas-bench import` (issue 57, goal 7): an image import over HTTP of a
//! qcow2 holding 1 GiB of data, from a file server on loopback, against
//! the best tools for the same job in the same run: `curl` to a file, then
//! `qemu-img check` of it. Both read the same URL of the same server; the
//! import is timed from its create to READY as a client polling every
//! 20 ms sees it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};
use vmaas_tests::files::FileServer;

use crate::percentile;
use crate::vms::start_qemu_server;

/// The goal: the import at least this fraction of the tools' rate.
const GOAL: f64 = 0.8;

/// Runs `program ARGS`, failing with its output if it fails.
fn run(program: &str, args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new(program).args(args).output().with_context(|| format!("running {program}"))?;
    if !out.status.success() {
        bail!("{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(())
}

/// A qcow2 at `path` holding `mib` MiB of data (a pattern, so nothing is sparse).
fn make_disk(path: &Path, mib: u64) -> anyhow::Result<()> {
    let p = path.to_str().context("path")?;
    run("qemu-img", &["create", "-q", "-f", "qcow2", p, &format!("{}M", mib + 64)])?;
    run("qemu-io", &["-f", "qcow2", "-c", &format!("write -q -P 0x5a 0 {mib}M"), p])
}

/// `curl` of `url` to a file in `dir`, then `qemu-img check` of it (s);
/// with `durable`, the file is synced to disk between the two (`sync
/// FILE`), as the import syncs what it received before it checks it.
fn tools(url: &str, dir: &Path, durable: bool) -> anyhow::Result<f64> {
    let out = dir.join("curl.qcow2");
    let o = out.to_str().context("path")?;
    let t = Instant::now();
    run("curl", &["-sSf", "-o", o, url])?;
    if durable {
        run("sync", &[o])?;
    }
    run("qemu-img", &["check", "-q", o])?;
    let took = t.elapsed().as_secs_f64();
    std::fs::remove_file(&out)?;
    Ok(took)
}

/// One import of `url` as `name` through the API, create to READY (s); the
/// image is deleted again.
async fn import(http: &reqwest::Client, api: &str, token: &str, url: &str, name: &str) -> anyhow::Result<f64> {
    let body = json!({"object": {"metadata": {"name": name}, "spec": {"source": url}}});
    let t = Instant::now();
    let made: Value = http.post(format!("{api}/images")).bearer_auth(token).json(&body).send().await?.error_for_status()?.json().await?;
    let id = made["object"]["id"].as_str().context("the image's id")?.to_owned();
    let give_up = Instant::now() + Duration::from_secs(600);
    let took = loop {
        let img: Value = http.get(format!("{api}/images/{id}")).bearer_auth(token).send().await?.json().await?;
        match img["object"]["status"]["state"].as_str() {
            Some("IMAGE_STATE_READY") => break t.elapsed().as_secs_f64(),
            Some("IMAGE_STATE_FAILED") => bail!("the import failed: {img}"),
            _ if Instant::now() > give_up => bail!("the import did not finish in 10 minutes: {img}"),
            _ => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    };
    http.delete(format!("{api}/images/{id}")).bearer_auth(token).send().await?.error_for_status()?;
    while http.get(format!("{api}/images/{id}")).bearer_auth(token).send().await?.status() != 404 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(took)
}

/// Runs the benchmark: `rounds` of each, alternating, with `mib` MiB of data.
pub async fn import_bench(mib: u64, rounds: usize, images: PathBuf) -> anyhow::Result<()> {
    let work = tempfile::tempdir()?;
    let served = work.path().join("served");
    std::fs::create_dir(&served)?;
    make_disk(&served.join("disk.qcow2"), mib)?;
    let bytes = std::fs::metadata(served.join("disk.qcow2"))?.len();
    let files = FileServer::start(served).await;
    let url = format!("{}/disk.qcow2", files.url);
    let srv = start_qemu_server(images).await?;
    let api = format!("{}/api/fulfillment/v1", srv.endpoint);
    let http = reqwest::Client::new();
    println!(
        "vmaas-bench import: a qcow2 of {:.0} MiB ({mib} MiB of data) over HTTP on loopback, {rounds} rounds",
        bytes as f64 / 1048576.0
    );
    // Untimed: the first read of the served file.
    tools(&url, work.path(), false)?;
    let (mut ours, mut theirs, mut synced) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        theirs.push(tools(&url, work.path(), false)?);
        ours.push(import(&http, &api, &srv.token, &url, &format!("import-{round}")).await?);
        synced.push(tools(&url, work.path(), true)?);
        println!(
            "  round {round}: import {:.2} s, curl + qemu-img check {:.2} s, the same with the file synced {:.2} s",
            ours[round], theirs[round], synced[round]
        );
    }
    for v in [&mut ours, &mut theirs, &mut synced] {
        v.sort_by(f64::total_cmp);
    }
    let (a, b, c) = (percentile(&ours, 0.5), percentile(&theirs, 0.5), percentile(&synced, 0.5));
    let mib_s = |s: f64| bytes as f64 / 1048576.0 / s;
    println!("  import, create → READY (median)                 {a:>6.2} s  {:>6.0} MiB/s", mib_s(a));
    println!("  curl to a file + qemu-img check (median)        {b:>6.2} s  {:>6.0} MiB/s", mib_s(b));
    println!("  the same, the file synced before the check      {c:>6.2} s  {:>6.0} MiB/s", mib_s(c));
    println!("  ratio (the import's rate / the tools')           {:.2}  (goal ≥ {GOAL}: {})", b / a, crate::verdict(b / a >= GOAL));
    println!("  ratio to the tools with the file synced          {:.2}", c / a);
    Ok(())
}
