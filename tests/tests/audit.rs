//! The audit log of the real `vmaas-server`: one JSON line per mutating
//! request (who, what, when, result, from where), refused and
//! unauthenticated ones included, reads left out; rotated by size.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::vms::{TINY, V1, publish};
use vmaas_tests::{Db, Server};

/// The audit log's lines about VMs once there are at least `n` of them
/// (the log is written by a task of its own, so it may lag the answers).
async fn vm_lines(s: &Server, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(s.data_dir.join("audit.log")).unwrap_or_default();
        let all: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).expect("a JSON line"))
            .filter(|v| v["path"].as_str().is_some_and(|p| p.starts_with(&format!("{V1}/virtual_machines"))))
            .collect();
        if all.len() >= n {
            return all;
        }
        assert!(Instant::now() < deadline, "{} lines about VMs, expected {n}:\n{text}", all.len());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutating_requests_are_audited_and_the_log_rotates() {
    let s = Server::start_with(Db::Sqlite, &["--backend", "none", "--audit-log-max-size", "8Ki", "--audit-log-keep", "2"]).await.unwrap();
    publish(&s, TINY);
    let acme = s.token("acme", false);
    let vm = json!({"object": {"metadata": {"name": "web"}, "spec": {"template": "tiny"}}});
    let (st, made) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&acme), Some(vm.clone())).await;
    assert_eq!(st, 201, "{made}");
    let id = made["object"]["id"].as_str().unwrap();
    s.raw(Method::GET, &format!("{V1}/virtual_machines/{id}"), Some(&acme), None).await;
    let bad = json!({"object": {"metadata": {"name": "Bad Name"}, "spec": {"template": "tiny"}}});
    assert_eq!(s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&acme), Some(bad)).await.0, 400);
    assert_eq!(s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some("forged.token.here"), Some(vm)).await.0, 401);
    assert_eq!(s.raw(Method::DELETE, &format!("{V1}/virtual_machines/{id}"), Some(&acme), None).await.0, 202);

    let ours = vm_lines(&s, 4).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(vm_lines(&s, 4).await.len(), 4, "the GET is not audited: {ours:#?}");
    let (created, refused, unauthenticated, deleted) = (&ours[0], &ours[1], &ours[2], &ours[3]);
    assert_eq!(
        (&created["subject"], &created["tenant"], &created["role"], &created["method"], &created["status"], &created["result"]),
        (&json!("acme"), &json!("acme"), &json!("tenant"), &json!("POST"), &json!(201), &json!("ok"))
    );
    assert_eq!(created["path"], format!("{V1}/virtual_machines"));
    assert!(created["remote"].as_str().unwrap().starts_with("127.0.0.1:"), "{created}");
    assert!(chrono::DateTime::parse_from_rfc3339(created["time"].as_str().unwrap()).is_ok(), "{created}");
    assert_eq!((&refused["status"], &refused["result"], &refused["subject"]), (&json!(400), &json!("refused"), &json!("acme")));
    assert_eq!((&unauthenticated["status"], unauthenticated.get("subject")), (&json!(401), None), "who is unknown: {unauthenticated}");
    assert_eq!((&deleted["method"], &deleted["path"]), (&json!("DELETE"), &json!(format!("{V1}/virtual_machines/{id}"))));

    // Rotation at 8 KiB, two old files kept.
    for n in 0..120 {
        let net = json!({"object": {"metadata": {"name": format!("n{n}")}, "spec": {"ipv4_cidr": format!("10.{n}.0.0/16")}}});
        s.raw(Method::POST, &format!("{V1}/virtual_networks"), Some(&acme), Some(net)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while !s.data_dir.join("audit.log.2").exists() {
        assert!(Instant::now() < deadline, "not rotated");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!s.data_dir.join("audit.log.3").exists());
    for f in ["audit.log", "audit.log.1", "audit.log.2"] {
        let size = std::fs::metadata(s.data_dir.join(f)).unwrap().len();
        assert!(size <= 8192, "{f}: {size} bytes");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_log_goes_to_stdout_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let server = vmaas_tests::bin("vmaas-server");
    let mut child = tokio::process::Command::new(&server)
        .args(["--listen", &format!("127.0.0.1:{port}"), "--backend", "none", "--audit-log", "-", "--data-dir"])
        .arg(dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("vmaas-server");
    let base = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while reqwest::get(format!("{base}/livez")).await.map(|r| r.status().as_u16()).unwrap_or(0) != 200 {
        assert!(Instant::now() < deadline, "the server did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let token = std::process::Command::new(&server).args(["token", "--tenant", "acme", "--data-dir"]).arg(dir.path()).output().unwrap();
    let token = String::from_utf8(token.stdout).unwrap().trim().to_owned();
    let net = json!({"object": {"metadata": {"name": "n"}, "spec": {"ipv4_cidr": "10.1.0.0/16"}}});
    let rsp = reqwest::Client::new().post(format!("{base}{V1}/virtual_networks")).bearer_auth(&token).json(&net).send().await.unwrap();
    assert_eq!(rsp.status(), 201);
    // The line is written by a task of its own: read stdout until it comes.
    let mut out = child.stdout.take().unwrap();
    let mut text = String::new();
    let mut buf = [0u8; 4096];
    while !text.contains("virtual_networks") {
        let n = tokio::time::timeout(Duration::from_secs(10), tokio::io::AsyncReadExt::read(&mut out, &mut buf))
            .await
            .expect("a line")
            .unwrap();
        assert!(n > 0, "stdout ended: {text}");
        text.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    let line: Value = serde_json::from_str(text.lines().find(|l| l.contains("virtual_networks")).unwrap()).expect("a JSON line");
    assert_eq!(
        (line["method"].as_str(), line["status"].as_u64(), line["tenant"].as_str()),
        (Some("POST"), Some(201), Some("acme")),
        "{line}"
    );
    assert!(!dir.path().join("audit.log").exists(), "no file beside stdout");
    let _ = child.kill().await;
}

/// gRPC calls served typed are audited as the REST routes are: each call
/// that changes something, under its method's path, with its caller and
/// its outcome; a read is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_calls_that_change_something_are_audited() {
    let s = Server::start_with(Db::Sqlite, &["--backend", "none"]).await.unwrap();
    publish(&s, TINY);
    let acme = s.token("acme", false);
    let out =
        vmaas_tests::osac::run_client(&s, "audit_client.py", &["--token", &acme], &["create code OK", "get code OK", "delete code OK"])
            .await;
    assert!(out.contains("bad code INVALID_ARGUMENT"), "{out}");
    let service = "/osac.public.v1.ComputeInstances/";
    let deadline = Instant::now() + Duration::from_secs(10);
    let lines = loop {
        let text = std::fs::read_to_string(s.data_dir.join("audit.log")).unwrap_or_default();
        let ours: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["path"].as_str().is_some_and(|p| p.starts_with(service)))
            .collect();
        if ours.len() >= 3 || Instant::now() > deadline {
            break ours;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let got: Vec<(String, u64, String, String)> = lines
        .iter()
        .map(|l| {
            let text = |k: &str| l[k].as_str().unwrap_or_default().to_owned();
            (text("path").trim_start_matches(service).to_owned(), l["status"].as_u64().unwrap_or(0), text("result"), text("subject"))
        })
        .collect();
    let want = [("Create", 200, "ok"), ("Create", 400, "refused"), ("Delete", 200, "ok")]
        .map(|(m, st, r)| (m.to_owned(), st, r.to_owned(), "acme".to_owned()));
    assert_eq!(got, want, "{lines:#?}");
}
