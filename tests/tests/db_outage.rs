//! A PostgreSQL outage, played on loopback: the server reaches its
//! database through a TCP relay of the test's own, which the test cuts
//! (every connection dropped, nothing listening) and then restores. While
//! it is out, requests are answered 503 UNAVAILABLE within seconds, not
//! 500s after a long wait, and `/healthz` says so within about a second,
//! `/readyz` is 503 and `/livez` still 200 (a liveness probe restarts
//! nothing); once it is back, the server serves again without a restart.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::json;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use vmaas_tests::vms::V1;
use vmaas_tests::{Db, Server, fresh_postgres_db, postgres_url};

/// Relays every connection to `listener` to `to` until aborted (its
/// connections with it: they are tasks of this one's set).
fn relay(listener: TcpListener, to: SocketAddr) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut conns = tokio::task::JoinSet::new();
        while let Ok((mut client, _)) = listener.accept().await {
            conns.spawn(async move {
                if let Ok(mut db) = TcpStream::connect(to).await {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut db).await;
                }
            });
        }
    })
}

/// `(host:port, the URL through the relay at `port`)` of a database URL.
fn through(url: &str, port: u16) -> (SocketAddr, String) {
    let (scheme, rest) = url.split_once("://").unwrap();
    let (auth, rest) = rest.split_once('@').unwrap();
    let (hostport, path) = rest.split_once('/').unwrap();
    (hostport.parse().unwrap(), format!("{scheme}://{auth}@127.0.0.1:{port}/{path}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_outage_is_503_at_once_and_service_comes_back() {
    let Some(base) = postgres_url() else { return };
    let db = fresh_postgres_db(&base).await;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (pg, url) = through(&db, port);
    let mut up = relay(listener, pg);
    let s = Server::start_with(Db::Sqlite, &["--backend", "none", "--database-url", &url]).await.expect("server");
    let t = s.token("acme", false);
    let net = |name: &str| json!({"object": {"metadata": {"name": name}, "spec": {"ipv4_cidr": "10.9.0.0/16"}}});
    let (st, v) = s.raw(Method::POST, &format!("{V1}/virtual_networks"), Some(&t), Some(net("before"))).await;
    assert_eq!(st, 201, "{v}");

    // Out: the relay and every connection through it are gone.
    up.abort();
    let _ = up.await;
    for (method, path, body) in
        [(Method::GET, format!("{V1}/virtual_networks"), None), (Method::POST, format!("{V1}/virtual_networks"), Some(net("during")))]
    {
        let started = Instant::now();
        let (st, e) = s.raw(method, &path, Some(&t), body).await;
        let took = started.elapsed();
        assert_eq!((st, e["code"].as_i64()), (503, Some(14)), "{path}: {e}");
        assert!(took < Duration::from_secs(5), "{path} took {took:?}");
    }
    let started = Instant::now();
    let (st, h) = s.raw(Method::GET, "/healthz", None, None).await;
    assert_eq!((st, h["status"].as_str()), (503, Some("unavailable")), "{h}");
    assert!(started.elapsed() < Duration::from_millis(2500), "healthz took {:?}", started.elapsed());
    // A readiness probe takes the replica out; a liveness probe restarts nothing.
    let (st, r) = s.raw(Method::GET, "/readyz", None, None).await;
    assert_eq!((st, &r["database"], &r["backend"]), (503, &json!(false), &json!(true)), "{r}");
    assert_eq!(s.raw(Method::GET, "/livez", None, None).await.0, 200);

    // Back: the same address again, and the server serves without a restart.
    let listener = TcpListener::bind(("127.0.0.1", port)).await.unwrap();
    up = relay(listener, pg);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (st, v) = s.raw(Method::POST, &format!("{V1}/virtual_networks"), Some(&t), Some(net("after"))).await;
        if st == 201 {
            break;
        }
        assert!(Instant::now() < deadline, "no service once the database was back: {st} {v}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let (_, list) = s.raw(Method::GET, &format!("{V1}/virtual_networks"), Some(&t), None).await;
    assert_eq!(list["total"], 2, "what was stored before the outage is there, nothing half-made during it: {list}");
    assert_eq!(s.raw(Method::GET, "/healthz", None, None).await.0, 200);
    assert_eq!(s.raw(Method::GET, "/readyz", None, None).await.0, 200);
    up.abort();
}
