//! The event stream (`GET /api/events/v1/events?watch=true`, OSAC's
//! `Events.Watch`): every change of the caller's objects, in order, as
//! Server-Sent Events; resumed with `Last-Event-ID` after a disconnect with
//! nothing missed; another tenant's objects never sent; a CEL filter over
//! the event; on SQLite and on PostgreSQL.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::vms::V1;
use vmaas_tests::{Db, Server, on_both_databases};

const SEED: &str = "id: tiny\nspec_defaults:\n  memory: 128Mi\n";

/// An open event stream.
struct Stream {
    rsp: reqwest::Response,
    buf: String,
}

impl Stream {
    async fn open(s: &Server, token: &str, query: &str, last: Option<&str>) -> Self {
        let mut req = reqwest::Client::new().get(format!("{}/api/events/v1/events?watch=true{query}", s.endpoint)).bearer_auth(token);
        if let Some(id) = last {
            req = req.header("Last-Event-ID", id);
        }
        let rsp = req.send().await.unwrap();
        assert_eq!(rsp.status(), 200);
        assert_eq!(rsp.headers()["content-type"], "text/event-stream");
        Self { rsp, buf: String::new() }
    }

    /// The next event: its id and its JSON (within 10 s).
    async fn next(&mut self) -> (String, Value) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let field = |name: &str| block.lines().find_map(|l| l.strip_prefix(name).map(str::trim).map(str::to_owned));
                if let (Some(id), Some(data)) = (field("id:"), field("data:")) {
                    return (id, serde_json::from_str(&data).unwrap());
                }
                continue; // a keep-alive comment
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "no event within 10 s; have {:?}", self.buf);
            match tokio::time::timeout(left, self.rsp.chunk()).await {
                Ok(Ok(Some(c))) => self.buf.push_str(&String::from_utf8_lossy(&c)),
                other => panic!("the stream ended: {other:?}"),
            }
        }
    }

    /// Events until one passes `done`; all of them.
    async fn until(&mut self, done: impl Fn(&Value) -> bool) -> Vec<(String, Value)> {
        let mut seen = Vec::new();
        for _ in 0..200 {
            let e = self.next().await;
            let stop = done(&e.1);
            seen.push(e);
            if stop {
                return seen;
            }
        }
        panic!("200 events and none matched: {seen:?}");
    }
}

fn vm_named<'a>(e: &'a Value, name: &str) -> Option<&'a Value> {
    e.get("virtual_machine").filter(|v| v["metadata"]["name"] == name)
}

on_both_databases! {
    async fn changes_stream_in_order_resume_and_stay_private(db: Db) {
        let Some(s) = Server::start(db).await else { return };
        let (admin, a, b) = (s.token("ops", true), s.token("acme", false), s.token("globex", false));
        vmaas_tests::vms::publish(&s, SEED);
        let mut watch = Stream::open(&s, &a, "", None).await;
        let body = |n: &str| json!({"object": {"metadata": {"name": n}, "spec": {"template": "tiny"}}});
        let (st, theirs) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&b), Some(body("theirs"))).await;
        assert_eq!(st, 201, "{theirs}");
        let (st, vm) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&a), Some(body("w1"))).await;
        assert_eq!(st, 201, "{vm}");
        let id = vm["object"]["id"].as_str().unwrap().to_owned();

        // Created, then the reconciler's status, in order; never globex's VM.
        let seen = watch.until(|e| vm_named(e, "w1").is_some_and(|v| v["status"].to_string().contains("NoBackend"))).await;
        assert_eq!(seen[0].1["type"], "EVENT_TYPE_OBJECT_CREATED", "{seen:?}");
        assert!(seen.iter().all(|(_, e)| vm_named(e, "theirs").is_none()), "another tenant's VM was sent: {seen:?}");
        let ids: Vec<i64> = seen.iter().map(|(i, _)| i.parse().unwrap()).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "in order: {ids:?}");

        // Disconnected, the VM changes; resumed, nothing is missed.
        let last = seen.last().unwrap().0.clone();
        drop(watch);
        let patch = json!({"object": {"spec": {"state": "stopped"}}});
        let (st, _) = s.raw(Method::PATCH, &format!("{V1}/virtual_machines/{id}"), Some(&a), Some(patch)).await;
        assert_eq!(st, 200);
        let mut watch = Stream::open(&s, &a, "", Some(&last)).await;
        let (next, e) = watch.next().await;
        // The first event after `last` this tenant may see (another tenant's
        // status write may come in between, and is not sent).
        let (st, page) = s.raw(Method::GET, &format!("/api/events/v1/events?after={last}"), Some(&a), None).await;
        assert_eq!(st, 200, "{page}");
        assert_eq!(page["items"][0]["id"].as_str(), Some(next.as_str()), "the next event after the last seen: {e}\nall after it: {page}");
        assert!(next.parse::<i64>().unwrap() > last.parse::<i64>().unwrap());
        let resumed = watch.until(|e| vm_named(e, "w1").is_some_and(|v| v["spec"]["state"] == "stopped")).await;
        assert!(!resumed.is_empty());

        // A filter over the event: only deletions.
        let filter = "&filter=event.type%20%3D%3D%20EVENT_TYPE_OBJECT_DELETED";
        let mut deletions = Stream::open(&s, &admin, filter, None).await;
        let (st, _) = s.raw(Method::DELETE, &format!("{V1}/virtual_machines/{id}"), Some(&a), None).await;
        assert_eq!(st, 202);
        let (_, e) = deletions.next().await;
        assert_eq!((e["type"].as_str(), e["virtual_machine"]["id"].as_str()), (Some("EVENT_TYPE_OBJECT_DELETED"), Some(id.as_str())), "{e}");

        // Without watch: a page of what followed an id; bad input named.
        let (st, page) = s.raw(Method::GET, &format!("/api/events/v1/events?after={last}"), Some(&a), None).await;
        assert_eq!(st, 200, "{page}");
        assert!(page["items"].as_array().unwrap().iter().any(|e| e["type"] == "EVENT_TYPE_OBJECT_DELETED"), "{page}");
        let (st, e) = s.raw(Method::GET, "/api/events/v1/events?filter=event.type%20%3D", Some(&a), None).await;
        assert_eq!((st, e["details"][0]["field"].as_str()), (400, Some("filter")), "{e}");
    }
}

/// A server (SQLite, no backend), a tenant's token, and the id of its VM `w`.
async fn one_vm() -> (Server, String, String) {
    let s = Server::start(Db::Sqlite).await.unwrap();
    let t = s.token("acme", false);
    vmaas_tests::vms::publish(&s, SEED);
    let body = json!({"object": {"metadata": {"name": "w"}, "spec": {"template": "tiny"}}});
    let (st, vm) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(body)).await;
    assert_eq!(st, 201, "{vm}");
    let id = vm["object"]["id"].as_str().unwrap().to_owned();
    (s, t, id)
}

/// The client's waits are woken by the VM's events: with a poll interval
/// far longer than the test, a wait still returns as soon as the VM stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_wake_on_the_vms_events() {
    let (s, t, id) = one_vm().await;
    let client = vmaas_client::Client::new(&s.endpoint, Some(t.clone())).unwrap();
    let (waiter, every) = (client.clone(), Duration::from_secs(120));
    let wid = id.clone();
    let started = Instant::now();
    let wait =
        tokio::spawn(async move { waiter.wait_vm(&wid, vmaas_client::WaitFor::Stopped, Duration::from_secs(60), every, |_| {}).await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let patch = json!({"object": {"spec": {"state": "stopped"}}});
    assert_eq!(s.raw(Method::PATCH, &format!("{V1}/virtual_machines/{id}"), Some(&t), Some(patch)).await.0, 200);
    let stopped = tokio::time::timeout(Duration::from_secs(30), wait).await.expect("woken by the event, not the 120 s poll");
    let vm = stopped.unwrap().unwrap().expect("the VM");
    assert_eq!(vm.status.state, vmaas_model::VmState::Stopped);
    assert!(started.elapsed() < every, "{:?}", started.elapsed());
}

/// `vmaas vm get NAME --watch`: the VM, then each change as it happens,
/// ending when the VM is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_watches_a_vm_until_it_is_deleted() {
    let (s, t, id) = one_vm().await;
    let mut child = tokio::process::Command::new(vmaas_tests::bin("vmaas"))
        .args(["vm", "get", "w", "--watch", "-o", "json"])
        .env("VMAAS_ENDPOINT", &s.endpoint)
        .env("VMAAS_TOKEN", &t)
        .env("VMAAS_CONFIG", s.data_dir.join("cli-config.yaml"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // The VM is printed once the watch is open: change it only then.
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut text = String::new();
    let first = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(l) = lines.next_line().await.unwrap() {
            text.push_str(&l);
            text.push('\n');
            if l == "}" {
                return true;
            }
        }
        false
    });
    assert!(first.await.expect("the VM within 30 s"), "{text}");
    let patch = json!({"object": {"spec": {"state": "stopped"}}});
    assert_eq!(s.raw(Method::PATCH, &format!("{V1}/virtual_machines/{id}"), Some(&t), Some(patch)).await.0, 200);
    assert_eq!(s.raw(Method::DELETE, &format!("{V1}/virtual_machines/{id}"), Some(&t), None).await.0, 202);
    let rest = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(l) = lines.next_line().await.unwrap() {
            text.push_str(&l);
            text.push('\n');
        }
        child.wait().await.unwrap()
    });
    let status = rest.await.expect("it ends with the VM");
    assert!(status.success(), "{text}");
    let events: Vec<Value> = text.lines().filter(|l| l.starts_with("{\"id\":\"")).map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(events.iter().any(|e| e["virtual_machine"]["spec"]["state"] == "stopped"), "{text}");
    assert_eq!(events.last().map(|e| e["type"].clone()), Some(json!("EVENT_TYPE_OBJECT_DELETED")), "{text}");
}
