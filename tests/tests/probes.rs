//! Probes and metrics as Kubernetes and Prometheus read them, on the real
//! server (API only, loopback): `/livez` and `/readyz` answer; `/metrics`
//! has the standard `process_*` figures and `vmaas_build_info`, and shows
//! nothing of a tenant (quotas by tenant) without an administrator's
//! token, while `--metrics-listen`'s own address shows everything without
//! one. (A database outage's `/readyz` 503 beside `/livez` 200 is in
//! `db_outage.rs`; `/healthz`'s quarantine, an administrator's only, in
//! `hardening.rs`.)

use reqwest::Method;
use serde_json::json;
use vmaas_tests::vms::V1;
use vmaas_tests::{Db, Server};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_answer_and_metrics_show_tenants_to_administrators_only() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let at = format!("127.0.0.1:{port}");
    let s = Server::start_with(Db::Sqlite, &["--backend", "none", "--metrics-listen", &at]).await.expect("server");
    for path in ["/livez", "/readyz"] {
        let (st, body) = s.raw(Method::GET, path, None, None).await;
        assert_eq!((st, &body["status"]), (200, &json!("ok")), "{path}: {body}");
    }
    let admin = s.token("ops", true);
    let quota = json!({"object": {"spec": {"cores": 4}}});
    let (st, q) = s.raw(Method::PUT, &format!("{V1}/tenants/acme/quota"), Some(&admin), Some(quota)).await;
    assert!(st < 300, "{q}");

    let text = |v: serde_json::Value| v.as_str().unwrap_or_default().to_owned();
    let anyone = text(s.raw(Method::GET, "/metrics", None, None).await.1);
    for name in ["process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds", "process_start_time_seconds"] {
        assert!(anyone.lines().any(|l| l.starts_with(name)), "no {name}: {anyone}");
    }
    assert!(anyone.contains(&format!("vmaas_build_info{{version=\"{}\"}} 1", env!("CARGO_PKG_VERSION"))), "{anyone}");
    assert!(!anyone.contains("tenant=") && !anyone.contains("vmaas_quota"), "a tenant shown without a token: {anyone}");
    let tenant = text(s.raw(Method::GET, "/metrics", Some(&s.token("acme", false)), None).await.1);
    assert!(!tenant.contains("tenant="), "a tenant's token sees no tenant either: {tenant}");
    let full = text(s.raw(Method::GET, "/metrics", Some(&admin), None).await.1);
    assert!(full.contains("vmaas_quota_limit{tenant=\"acme\",resource=\"cores\"} 4"), "{full}");

    // Its own address: every figure, no token.
    let own = reqwest::get(format!("http://{at}/metrics")).await.unwrap().text().await.unwrap();
    assert!(own.contains("vmaas_quota_limit{tenant=\"acme\",resource=\"cores\"} 4") && own.contains("process_cpu_seconds_total"), "{own}");
    let api = reqwest::get(format!("http://{at}{V1}/virtual_machines")).await.unwrap();
    assert_eq!(api.status(), 404, "only /metrics is served there");
}

/// The reconciler works on as many objects at once as `--reconcile-workers`
/// says, else as the backend asks; `/healthz` shows it, and a count that
/// cannot be is refused naming the flag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reconcilers_workers_are_the_backends_unless_told() {
    let default = Server::start_with(Db::Sqlite, &["--backend", "none"]).await.expect("server");
    assert_eq!(workers(&default).await, json!(8));
    let told = Server::start_with(Db::Sqlite, &["--backend", "none", "--reconcile-workers", "3"]).await.expect("server");
    assert_eq!(workers(&told).await, json!(3));

    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(vmaas_tests::bin("vmaas-server"))
        .args(["--listen", "127.0.0.1:0", "--backend", "none", "--reconcile-workers", "0"])
        .arg("--data-dir")
        .arg(dir.path())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && said.contains("--reconcile-workers"), "{said}");
    assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none(), "nothing made in the data directory");
}

/// How many objects the reconciler of `s` works on at once, as `/healthz` says.
async fn workers(s: &Server) -> serde_json::Value {
    let (_, health) = s.raw(Method::GET, "/healthz", None, None).await;
    health["reconciler"]["workers"].clone()
}
