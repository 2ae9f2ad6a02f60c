//! The limits that keep one client from hurting the server: strict JSON,
//! body size, header deadlines, a connection cap, bounded metric labels and
//! console ticket caps; every refusal a JSON error. All on loopback, every
//! loop bounded.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::vms::{TINY, V1, publish};
use vmaas_tests::{Db, Server};

async fn post_raw(s: &Server, token: &str, path: &str, body: Vec<u8>) -> (u16, Value) {
    let resp = reqwest::Client::new()
        .post(format!("{}{path}", s.endpoint))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let st = resp.status().as_u16();
    (st, resp.json().await.unwrap_or(Value::Null))
}

fn field(v: &Value) -> &str {
    v["details"][0]["field"].as_str().unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_bodies_are_strict_and_bounded() {
    let s = Server::start(Db::Sqlite).await.unwrap();
    publish(&s, TINY);
    let t = s.token("acme", false);
    let vms = format!("{V1}/virtual_machines");
    let good = json!({"object": {"metadata": {"name": "a"}, "spec": {"template": "tiny"}}}).to_string();
    let (st, v) = post_raw(&s, &t, &vms, format!("{good} GARBAGE").into_bytes()).await;
    assert_eq!((st, field(&v)), (400, "body"), "trailing data: {v}");
    assert!(v["message"].as_str().unwrap().contains("after the JSON document"), "{v}");
    let misspelt = json!({"object": {"metadata": {"name": "a", "lables": {"x": "y"}}, "spec": {"template": "tiny"}}});
    let (st, v) = post_raw(&s, &t, &vms, misspelt.to_string().into_bytes()).await;
    assert_eq!((st, field(&v)), (400, "object.metadata.lables"), "unknown metadata field: {v}");
    assert!(v["message"].as_str().unwrap().contains("lables"), "{v}");
    let (st, v) = post_raw(&s, &t, &vms, b"{".to_vec()).await;
    assert_eq!((st, field(&v)), (400, "body"), "{v}");
    let (st, v) = post_raw(&s, &t, &vms, vec![b' '; 2 << 20]).await;
    assert_eq!((st, field(&v)), (413, "body"), "{v}");
    // Read back and sent again, the server's own metadata fields are accepted.
    let (st, created) = post_raw(&s, &t, &vms, good.into_bytes()).await;
    assert_eq!(st, 201, "{created}");
    let echo = json!({"object": {"metadata": created["object"]["metadata"], "spec": {"template": "tiny"}}});
    let (st, v) = s.raw(Method::PATCH, &format!("{vms}/{}", created["object"]["id"].as_str().unwrap()), Some(&t), Some(echo)).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(s.raw(Method::GET, &vms, Some(&t), None).await.1["total"], 1, "nothing half-made");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metric_labels_stay_bounded_whatever_clients_send() {
    let s = Server::start(Db::Sqlite).await.unwrap();
    let client = reqwest::Client::new();
    for i in 0..300 {
        let method = Method::from_bytes(format!("X{i:04}{}", "M".repeat(200)).as_bytes()).unwrap();
        let path = format!("/no/such/path/{i}/{}", "p".repeat(200));
        let resp = client.request(method, format!("{}{path}", s.endpoint)).send().await.unwrap();
        assert!(resp.headers()["content-type"].to_str().unwrap().starts_with("application/json"));
    }
    let metrics = s.raw(Method::GET, "/metrics", None, None).await.1;
    let text = metrics.as_str().unwrap();
    assert!(!text.contains("MMMM") && !text.contains("pppp"), "client-chosen text reached the labels");
    assert!(text.contains("method=\"OTHER\"") && text.contains("route=\"unmatched\""), "{text}");
    assert!(text.len() < 64 * 1024, "metrics grew to {} bytes", text.len());
}

fn half_request(endpoint: &str) -> TcpStream {
    let mut c = TcpStream::connect(endpoint.trim_start_matches("http://")).unwrap();
    c.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ").unwrap();
    c
}

/// A kept-alive connection that made one request and read its answer.
fn answered_once(endpoint: &str) -> TcpStream {
    let mut c = TcpStream::connect(endpoint.trim_start_matches("http://")).unwrap();
    c.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut buf = [0u8; 12];
    c.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"HTTP/1.1 200");
    c
}

/// Whether the server closed `c` (or answered it) within `wait`.
fn closed_within(c: &mut TcpStream, wait: Duration) -> bool {
    c.set_read_timeout(Some(wait)).unwrap();
    let mut buf = [0u8; 512];
    match c.read(&mut buf) {
        // Closed (0 bytes), or answered (a 408 is fine too).
        Ok(_n) => true,
        Err(e) => !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_are_cut_off_and_a_connection_cap_answers_503() {
    // Half-sent requests are closed once the header deadline passes.
    let s = Server::start_with(Db::Sqlite, &["--backend", "none", "--http-header-timeout", "1s"]).await.unwrap();
    let mut slow: Vec<TcpStream> = (0..200).map(|_| half_request(&s.endpoint)).collect();
    let (st, _) = s.raw(Method::GET, "/healthz", None, None).await;
    assert_eq!(st, 200, "healthz answers beside 200 slow clients");
    let started = Instant::now();
    let mut cut = 0;
    for c in &mut slow {
        let left = Duration::from_secs(5).saturating_sub(started.elapsed()).max(Duration::from_millis(50));
        cut += usize::from(closed_within(c, left));
    }
    assert_eq!(cut, 200, "every half-sent request is cut off");
    drop(slow);

    // A body that stops arriving is answered 408, as JSON, once the body deadline passes.
    let s = Server::start_with(Db::Sqlite, &["--backend", "none", "--http-body-timeout", "1s"]).await.unwrap();
    let t = s.token("acme", false);
    let mut c = TcpStream::connect(s.endpoint.trim_start_matches("http://")).unwrap();
    let head = format!(
        "POST {V1}/virtual_machines HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {t}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"object\""
    );
    c.write_all(head.as_bytes()).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut answer = String::new();
    let _ = c.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 408") && answer.contains("not sent in time"), "{answer}");

    // Over the cap of connections that were all answered, a connection gets
    // a JSON 503 at once; below it, service again. (Unanswered ones would
    // make room: the oldest goes.)
    let s = Server::start_with(Db::Sqlite, &["--backend", "none", "--max-connections", "8"]).await.unwrap();
    let held: Vec<TcpStream> = (0..8).map(|_| answered_once(&s.endpoint)).collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut extra = TcpStream::connect(s.endpoint.trim_start_matches("http://")).unwrap();
    extra.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    extra.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut answer = String::new();
    let _ = extra.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 503") && answer.contains("\"code\":14"), "{answer}");
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        // Until the server has seen the held connections go, a new one may
        // still get the 503, written before the request is read (which a
        // client may report as an error): both mean "not yet".
        let resp = reqwest::Client::new().get(format!("{}/healthz", s.endpoint)).send().await;
        if resp.is_ok_and(|r| r.status() == 200) {
            break;
        }
        assert!(Instant::now() < deadline, "no service once the slow clients left");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_tickets_are_capped_and_the_console_path_answers_json() {
    let s = Server::start(Db::Sqlite).await.unwrap();
    publish(&s, TINY);
    let t = s.token("acme", false);
    let body = json!({"object": {"metadata": {"name": "c"}, "spec": {"template": "tiny"}}});
    let (st, vm) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(body)).await;
    assert_eq!(st, 201, "{vm}");
    let id = vm["object"]["id"].as_str().unwrap();
    let (st, v) = s.raw(Method::GET, &format!("{V1}/virtual_machines/{id}/console"), Some(&t), None).await;
    assert_eq!(st, 400, "{v}");
    assert!(v["message"].as_str().unwrap_or("").contains("WebSocket"), "a plain GET gets a JSON error: {v}");
    let sessions = format!("{V1}/virtual_machines/{id}/console_sessions");
    for i in 0..8 {
        let (st, v) = s.raw(Method::POST, &sessions, Some(&t), None).await;
        assert_eq!(st, 201, "ticket {i}: {v}");
    }
    let (st, v) = s.raw(Method::POST, &sessions, Some(&t), None).await;
    assert_eq!((st, v["code"].as_u64(), field(&v)), (429, Some(8), "console_sessions"), "{v}");
}
