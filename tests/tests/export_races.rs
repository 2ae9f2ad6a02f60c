//! Disk exports under load (issue 52), on the qemu backend with real
//! disks (loopback, bounded in count and time): six, then twenty, first
//! exports of one snapshot disk and of one volume at once all give the
//! same whole body, whose SHA-256 is the one the server announces (before
//! the body, or, to clients saying `TE: trailers`, as a trailer after a
//! volume's, which is hashed as it is sent, never before); twenty
//! exports abandoned while converting leave no file and no `qemu-img`
//! behind within 5 s; exports held unread count against the tenant's
//! export limit, and an export past its disk quota is refused, each a 429
//! naming the limit; one its client stops taking is cut short after
//! `--export-stall-timeout`, its place let go.

use std::path::Path;
use std::time::{Duration, Instant};

use futures::future::join_all;
use reqwest::Method;
use serde_json::json;
use sha2::{Digest, Sha256};
use vmaas_tests::Server;
use vmaas_tests::objects::{created, ready_volume, state, wait_for};
use vmaas_tests::pids_of;
use vmaas_tests::vms::{TINY, V1, publish, wait_ready, wait_until};

/// Writes `mib` MiB of a pattern into the qcow2 file at `disk` (`qemu-io`,
/// from qemu-utils): data every export must copy.
fn fill(disk: &Path, mib: u64) {
    let out = std::process::Command::new("qemu-io")
        .args(["-f", "qcow2", "-c", &format!("write -P 0x5a 0 {mib}M")])
        .arg(disk)
        .output()
        .expect("qemu-io (qemu-utils)");
    assert!(out.status.success(), "qemu-io: {}", String::from_utf8_lossy(&out.stderr));
}

/// One export as a client receives it (saying `TE: trailers` if
/// `trailers`): status, the announced SHA-256 and the body's (or the
/// error's JSON), and the body's length. A volume's digest asked after
/// the body comes only after it; one asked before comes only before it.
async fn export(http: &reqwest::Client, s: &Server, t: &str, path: &str, trailers: bool) -> (u16, String, String, usize) {
    use http_body_util::BodyExt;
    let mut req = http.get(format!("{}{V1}/{path}", s.endpoint)).bearer_auth(t);
    if trailers {
        req = req.header("te", "trailers");
    }
    let rsp = req.send().await.expect("export request");
    let status = rsp.status().as_u16();
    let before = rsp.headers().get("x-checksum-sha256").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let collected = reqwest::Body::from(rsp).collect().await.expect("the whole body");
    let after = collected.trailers().and_then(|t| t.get("x-checksum-sha256")).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let body = collected.to_bytes();
    if status != 200 {
        return (status, before.unwrap_or_default(), String::from_utf8_lossy(&body).into_owned(), body.len());
    }
    let volume = path.starts_with("volumes/");
    assert_eq!(
        (before.is_some(), after.is_some()),
        (!(trailers && volume), trailers && volume),
        "{path}, trailers asked: {trailers}: the digest before the body {before:?}, after it {after:?}"
    );
    (status, before.or(after).unwrap_or_default(), format!("{:x}", Sha256::digest(&body)), body.len())
}

/// `n` exports of `path` at once: every one a 200 with the same whole
/// body, whose digest is the announced one; that digest.
async fn all_alike(s: &Server, t: &str, path: &str, n: usize) -> String {
    let http = reqwest::Client::new();
    let got = join_all((0..n).map(|i| export(&http, s, t, path, i % 2 == 1))).await;
    let first = got[0].clone();
    for (i, (status, announced, received, len)) in got.iter().enumerate() {
        assert_eq!(*status, 200, "export {i} of {n} of {path}: {received}");
        assert_eq!(announced, received, "export {i} of {n} of {path}: the body's SHA-256 is not the announced one ({len} bytes)");
        assert!(*len > 0, "export {i} of {n} of {path}: an empty body");
        assert_eq!((received, len), (&first.2, &first.3), "export {i} of {n} of {path} differs from the first");
    }
    first.2
}

/// Files left in the server's exports directory and snapshots' part files.
fn leftovers(s: &Server) -> Vec<String> {
    let mut left = Vec::new();
    let mut dirs = vec![s.data_dir.clone()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            let name = p.to_string_lossy().into_owned();
            if p.is_dir() {
                dirs.push(p);
            } else if name.ends_with(".part") || (name.contains("/exports/") && !name.ends_with(".sha256")) {
                left.push(name);
            }
        }
    }
    left
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_first_exports_of_a_snapshot_and_a_volume_give_one_whole_body() {
    let s = Server::start_qemu_with(&["--exports-per-tenant", "20"]).await;
    publish(&s, TINY);
    let t = s.token("acme", false);
    let (vol, file) = ready_volume(&s, &t, "data", "512Mi").await;
    fill(&file, 256);
    let vm = created(&s, &t, "virtual_machines", json!({"metadata": {"name": "box"}, "spec": {"template": "tiny"}})).await;
    wait_ready(&s, &t, &vm).await;
    let stop = json!({"object": {"spec": {"state": "stopped"}}});
    let (st, _) = s.raw(Method::PATCH, &format!("{V1}/virtual_machines/{vm}"), Some(&t), Some(stop)).await;
    assert_eq!(st, 200);
    wait_until(&s, &t, &vm, "STOPPED", 60, |v| v["status"]["state"] == "VIRTUAL_MACHINE_STATE_STOPPED").await;
    let mut snaps = Vec::new();
    for name in ["six", "twenty"] {
        let id = created(&s, &t, "compute_instance_snapshots", json!({"metadata": {"name": name}, "spec": {"compute_instance": vm}})).await;
        wait_for(&s, &t, &format!("compute_instance_snapshots/{id}"), "the snapshot READY", |v| {
            state(v) == "COMPUTE_INSTANCE_SNAPSHOT_STATE_READY"
        })
        .await;
        snaps.push(id);
    }

    // Each snapshot's first exports at once: one conversion, one body.
    let six = all_alike(&s, &t, &format!("compute_instance_snapshots/{}/export", snaps[0]), 6).await;
    let twenty = all_alike(&s, &t, &format!("compute_instance_snapshots/{}/export", snaps[1]), 20).await;
    assert_eq!(six, twenty, "two snapshots of one stopped disk export alike");
    // The volume's, each converted for its own request.
    let v6 = all_alike(&s, &t, &format!("volumes/{vol}/export"), 6).await;
    let v20 = all_alike(&s, &t, &format!("volumes/{vol}/export"), 20).await;
    assert_eq!(v6, v20);
    // The body is the volume: qemu-img reads the same data from it.
    let mut rsp = reqwest::Client::new().get(format!("{}{V1}/volumes/{vol}/export", s.endpoint)).bearer_auth(&t).send().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("copy.qcow2");
    let mut f = std::fs::File::create(&copy).unwrap();
    while let Some(c) = rsp.chunk().await.unwrap() {
        std::io::Write::write_all(&mut f, &c).unwrap();
    }
    let cmp = std::process::Command::new("qemu-img").args(["compare", "-U"]).arg(&file).arg(&copy).output().unwrap();
    assert!(cmp.status.success(), "the export differs from the volume: {}", String::from_utf8_lossy(&cmp.stdout));
    let deadline = Instant::now() + Duration::from_secs(5);
    while !leftovers(&s).is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(leftovers(&s).is_empty(), "files left: {:?}", leftovers(&s));
}

#[tokio::test(flavor = "multi_thread")]
async fn abandoned_exports_leave_nothing_and_held_ones_count_against_the_limits() {
    let s = Server::start_qemu_with(&["--exports-per-tenant", "20"]).await;
    publish(&s, TINY);
    let t = s.token("acme", false);
    let (vol, file) = ready_volume(&s, &t, "big", "2Gi").await;
    fill(&file, 1024);

    // Twenty exports, each abandoned while its qemu-img converts.
    let needle = format!("{vol}.qcow2");
    let mut started = tokio::task::JoinSet::new();
    for _ in 0..20 {
        let (url, t) = (format!("{}{V1}/volumes/{vol}/export", s.endpoint), t.clone());
        started.spawn(async move { reqwest::Client::new().get(url).bearer_auth(t).send().await.map(|r| r.status().as_u16()) });
    }
    // A qemu-img is seen once it runs, its file only once it opened the
    // disk and made it (later on a machine busy writing): both are waited for.
    let deadline = Instant::now() + Duration::from_secs(20);
    while (pids_of("", &needle).len() < 20 || leftovers(&s).is_empty()) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let converting = pids_of("", &needle).len();
    assert!(converting >= 10, "only {converting} conversions seen under way: the disk converts too fast to abandon");
    assert!(!leftovers(&s).is_empty(), "conversions under way write files");
    started.abort_all();
    while started.join_next().await.is_some() {}
    let gone = Instant::now();
    while (!pids_of("", &needle).is_empty() || !leftovers(&s).is_empty()) && gone.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(pids_of("", &needle).is_empty(), "qemu-img left running 5 s after its client went away");
    assert!(leftovers(&s).is_empty(), "files left 5 s after their clients went away: {:?}", leftovers(&s));

    // Exports held unread (larger than what the sockets buffer) keep
    // their place: the 21st is refused.
    let (small, small_file) = ready_volume(&s, &t, "small", "64Mi").await;
    fill(&small_file, 48);
    let http = reqwest::Client::new();
    let mut held = Vec::new();
    for i in 0..20 {
        let rsp = http.get(format!("{}{V1}/volumes/{small}/export", s.endpoint)).bearer_auth(&t).send().await.unwrap();
        assert_eq!(rsp.status(), 200, "held export {i}");
        held.push(rsp);
    }
    let (st, e) = s.raw(Method::GET, &format!("{V1}/volumes/{small}/export"), Some(&t), None).await;
    assert_eq!(st, 429, "the 21st export held: {:.200}", e.to_string());
    assert!(e["message"].as_str().unwrap_or_default().contains("--exports-per-tenant 20"), "{e}");
    drop(held);
    let free = Instant::now();
    let mut again = 0;
    while free.elapsed() < Duration::from_secs(5) {
        again = s.raw(Method::GET, &format!("{V1}/volumes/{small}/export"), Some(&t), None).await.0;
        if again == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(again, 200, "the places of exports dropped come back");

    // Past the disk quota: the 2 GiB volume alone fills 3 GiB of quota
    // with its export; the 64 MiB one's fits.
    let admin = s.token("ops", true);
    let quota = json!({"object": {"spec": {"disk": "3Gi"}}});
    let (st, q) = s.raw(Method::PUT, &format!("{V1}/tenants/acme/quota"), Some(&admin), Some(quota)).await;
    assert!(st == 200 || st == 201, "{q}");
    let (st, e) = s.raw(Method::GET, &format!("{V1}/volumes/{vol}/export"), Some(&t), None).await;
    assert_eq!(st, 429, "past the quota: {:.200}", e.to_string());
    assert_eq!(e["details"][0]["field"], "quota.disk", "{e}");
    let (st, announced, received, _) = export(&http, &s, &t, &format!("volumes/{small}/export"), true).await;
    assert_eq!((st, &announced), (200, &received), "within its quota, a small export passes");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_export_its_client_stops_taking_is_cut_short_and_its_place_comes_back() {
    let s = Server::start_qemu_with(&["--exports-per-tenant", "1", "--export-stall-timeout", "1s"]).await;
    publish(&s, TINY);
    let t = s.token("acme", false);
    let (vol, file) = ready_volume(&s, &t, "held", "64Mi").await;
    fill(&file, 48);
    let path = format!("{V1}/volumes/{vol}/export");
    let held = reqwest::Client::new().get(format!("{}{path}", s.endpoint)).bearer_auth(&t).send().await.unwrap();
    assert_eq!(held.status(), 200);
    let (st, e) = s.raw(Method::GET, &path, Some(&t), None).await;
    assert_eq!(st, 429, "the second export while the first is held: {:.200}", e.to_string());
    // Held unread past the stall time: the first is cut and its place comes back.
    let since = Instant::now();
    let mut again = 0;
    while since.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        again = s.raw(Method::GET, &path, Some(&t), None).await.0;
        if again == 200 {
            break;
        }
    }
    assert_eq!(again, 200, "the place of an export its client stopped taking comes back");
    assert!(since.elapsed() >= Duration::from_millis(500), "the place came back before the stall time");
    use http_body_util::BodyExt;
    let got = reqwest::Body::from(held).collect().await;
    assert!(got.is_err(), "a body cut short ends in an error, never looking whole");
}
