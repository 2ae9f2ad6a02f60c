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
