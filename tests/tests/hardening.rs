//! Hardening against an unlucky operator and a crash, with real QEMU
//! guests: a lost database never destroys a guest, a damaged state file
//! never shadows a running one, a killed server is replaced without a stall,
//! a guest whose host state is gone stops, and guest egress is closed.

use std::io::Read;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::Value;
use vmaas_tests::vms::{TINY, V1, create, get, publish, state, wait_ready};
use vmaas_tests::{Server, qemu_pids};

/// Whether `pid` runs (a zombie nobody reaped yet has no command line).
fn alive(pid: i32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| !c.is_empty())
}

/// `/healthz` as an administrator sees it (the quarantined VMs are theirs only).
async fn healthz(s: &Server) -> Value {
    let admin = s.token("ops", true);
    s.raw(Method::GET, "/healthz", Some(&admin), None).await.1
}

/// Waits (bounded) until `pred` holds for `/healthz`.
async fn wait_health(s: &Server, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let h = healthz(s).await;
        if pred(&h) {
            return h;
        }
        assert!(Instant::now() < deadline, "{what}: {h:#}\n{}", s.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn refused(s: &Server, extra: &[&str]) -> String {
    let mut args = vec!["--listen", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let out = s.server_command(&args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "the server must refuse to start:\n{err}");
    err
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_database_quarantines_guests_and_never_destroys_them() {
    let mut s = Server::start_qemu().await;
    publish(&s, TINY);
    let t = s.token("acme", false);
    let kept = create(&s, &t, "kept", "tiny").await;
    let orphan = create(&s, &t, "orphan", "tiny").await;
    wait_ready(&s, &t, &kept).await;
    wait_ready(&s, &t, &orphan).await;
    let (kept_pid, orphan_pid) = (qemu_pids(&kept)[0], qemu_pids(&orphan)[0]);
    s.stop().await;

    // A database truncated to 0 bytes: refused, guests untouched.
    let db = s.data_dir.join("vmaas.db");
    std::fs::write(&db, b"").unwrap();
    for f in ["vmaas.db-wal", "vmaas.db-shm"] {
        let _ = std::fs::remove_file(s.data_dir.join(f));
    }
    let err = refused(&s, &[]);
    assert!(err.contains("belongs to store") && err.contains("--adopt-store"), "{err}");
    // The database files removed: refused the same way.
    std::fs::remove_file(&db).unwrap();
    let err = refused(&s, &[]);
    assert!(err.contains("--adopt-store"), "{err}");
    // And with the identity file gone too (an older release's data directory), the emptiness alone is enough.
    std::fs::remove_file(s.data_dir.join("store-identity")).unwrap();
    std::fs::remove_file(&db).unwrap();
    let err = refused(&s, &[]);
    assert!(err.contains("database is empty") && err.contains("2 VM(s)"), "{err}");
    assert!(alive(kept_pid) && alive(orphan_pid), "the guests run on");

    // Accepting the empty database quarantines the guests: kept running, reported.
    std::fs::remove_file(&db).unwrap();
    let base = s.extra().to_vec();
    let mut with_adopt = base.clone();
    with_adopt.push("--adopt-store".to_owned());
    s.set_extra(&with_adopt);
    s.relaunch().await;
    let h = wait_health(&s, "both VMs quarantined", |h| h["quarantine"].as_array().is_some_and(|q| q.len() == 2)).await;
    let q = h["quarantine"].as_array().unwrap();
    // Without an administrator's token: the count, not the VMs (their names, tenants and paths).
    let (_, anyone) = s.raw(Method::GET, "/healthz", None, None).await;
    assert!(anyone.get("quarantine").is_none() && anyone["quarantined"] == 2, "{anyone:#}");
    let acme = s.token("acme", false);
    let (_, tenant) = s.raw(Method::GET, "/healthz", Some(&acme), None).await;
    assert!(tenant.get("quarantine").is_none(), "{tenant:#}");
    assert!(q.iter().all(|v| v["running"] == true && v["tenant"] == "acme"), "{h:#}");
    let metrics = s.raw(Method::GET, "/metrics", None, None).await.1;
    assert!(metrics.as_str().unwrap().contains("vmaas_quarantined_resources 2"), "{metrics}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(alive(kept_pid) && alive(orphan_pid), "quarantined guests keep running");
    assert!(s.log().contains("quarantined a VM the store does not know"));
    s.stop().await;

    // A guest whose directory is removed behind the server's back stops by itself.
    std::fs::remove_dir_all(s.data_dir.join("vms").join(&orphan)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    while alive(orphan_pid) {
        assert!(Instant::now() < deadline, "the guest of a removed directory still runs");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // gc lists, then removes, what the store does not know.
    s.set_extra(&base);
    let out = s.server_command(&["gc", "--dry-run"]);
    let listed = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && listed.contains(&format!("would remove virtual machine {kept}")),
        "{listed}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(alive(kept_pid), "a dry run removes nothing");
    let out = s.server_command(&["gc"]);
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("removed virtual machine"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!alive(kept_pid) && !s.data_dir.join("vms").join(&kept).exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_with_a_damaged_state_file_neither_stalls_nor_shadows_the_guest() {
    let mut s = Server::start_qemu().await;
    publish(&s, TINY);
    let t = s.token("acme", false);
    let id = create(&s, &t, "survivor", "tiny").await;
    let vm = wait_ready(&s, &t, &id).await;
    let ip = vm["status"]["externalIP"].as_str().unwrap().to_owned();
    let pid = qemu_pids(&id)[0];

    s.kill9().await;
    std::fs::write(s.data_dir.join("vms").join(&id).join("vm.json"), b"{\"id\": \"trunc").unwrap();
    // As a data directory of the release before store identities: its database
    // has its VMs, nothing records an identity, and the server starts.
    std::fs::remove_file(s.data_dir.join("store-identity")).unwrap();
    let url = format!("sqlite://{}", s.data_dir.join("vmaas.db").display());
    let mut db = <sqlx::SqliteConnection as sqlx::Connection>::connect(&url).await.unwrap();
    sqlx::query("DELETE FROM store_identity").execute(&mut db).await.unwrap();
    drop(db);
    s.relaunch().await;
    // READY from the first answer on: no PROGRESSING flap after a restart.
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        let (st, v) = get(&s, &t, &id).await;
        assert_eq!((st, state(&v["object"])), (200, "VIRTUAL_MACHINE_STATE_READY"), "{v:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(s.log().contains("took over the reconciler lease"), "{}", s.log());
    assert!(s.log().contains("damaged vm.json: rebuilt from the host"), "{}", s.log());
    assert_eq!(qemu_pids(&id), vec![pid], "the running guest is adopted, not shadowed by a second QEMU");
    let state_file: Value = serde_json::from_slice(&std::fs::read(s.data_dir.join("vms").join(&id).join("vm.json")).unwrap()).unwrap();
    assert_eq!(state_file["name"], "survivor", "the rebuilt state file is completed from the store");
    assert_eq!(state_file["external_ip"], ip.as_str());

    // A VM created right after the restart is reconciled at once, and deleting the
    // first frees its external IP and stops its QEMU.
    let next = create(&s, &t, "next", "tiny").await;
    let (st, _) = s.raw(Method::DELETE, &format!("{V1}/virtual_machines/{id}"), Some(&t), None).await;
    assert_eq!(st, 202);
    wait_ready(&s, &t, &next).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while alive(pid) || get(&s, &t, &id).await.0 != 404 {
        assert!(Instant::now() < deadline, "the VM was not deleted\n{}", s.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Listens on 127.0.0.1 and reports whether anything connected within `wait`.
fn connected_within(listener: &std::net::TcpListener, wait: Duration) -> bool {
    listener.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + wait;
    while Instant::now() < deadline {
        if let Ok((mut c, _)) = listener.accept() {
            let mut buf = [0u8; 64];
            let _ = c.set_read_timeout(Some(Duration::from_millis(500)));
            let _ = c.read(&mut buf);
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// Runs `cmd` in the guest's console (the CLI, batch mode) and returns the output.
fn in_guest(s: &Server, token: &str, vm: &str, cmd: &str) -> String {
    let out = s.cli_with_stdin(token, &["vm", "console", vm, "--batch", "--idle", "8s"], cmd.as_bytes());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guest_egress_is_closed_unless_an_administrator_opens_it() {
    // Two servers: the default (closed), and one that opens the default network.
    let closed = Server::start_qemu().await;
    let mut open = Server::start_qemu().await;
    let mut args = open.extra().to_vec();
    args.extend(["--guest-egress".to_owned(), "default".to_owned()]);
    open.set_extra(&args);
    open.restart().await;
    let mut ids = Vec::new();
    for s in [&closed, &open] {
        publish(s, TINY);
        let t = s.token("acme", false);
        ids.push((create(s, &t, "egress", "tiny").await, t));
    }
    for (s, (id, t)) in [&closed, &open].into_iter().zip(&ids) {
        wait_ready(s, t, id).await;
    }
    // The user network's gateway, 10.0.2.2, is the host's loopback: the only
    // address a guest in a test may be pointed at.
    for (s, (_, t), expect) in [(&closed, &ids[0], false), (&open, &ids[1], true)] {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let out = in_guest(s, t, "egress", &format!("echo hello | timeout 3 nc 10.0.2.2 {port}; echo egress-tried-$((1+1))\n"));
        assert!(out.contains("egress-tried-2"), "the command ran in the guest: {out}");
        assert_eq!(connected_within(&listener, Duration::from_secs(5)), expect, "egress open = {expect}; console: {out}");
    }
}
