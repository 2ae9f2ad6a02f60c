//! Two replicas of the real `vmaas-server` on one PostgreSQL, as an
//! operator runs them: what one admits the other sees before it decides.
//! Concurrent creates split across both never go past a quota, never hand
//! out one subnet or pool address twice, and never attach one volume
//! twice; a replica frozen with SIGSTOP holds the other's writes up for
//! less than a second; one killed mid-burst loses no acknowledged create.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use futures::future::join_all;
use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::vms::{TINY, V1, publish};
use vmaas_tests::{Db, Server, seed};

/// Two replicas on one fresh PostgreSQL database, started with `args`.
async fn pair(args: &[&str]) -> Option<(Server, Server)> {
    let a = Server::start_with(Db::Postgres, args).await?;
    let b = Server::replica_of(&a).await;
    publish(&a, TINY);
    Some((a, b))
}

fn vm(name: &str) -> Value {
    json!({"object": {"metadata": {"name": name}, "spec": {"template": "tiny"}}})
}

/// POSTs `bodies` to `path` all at once, alternately through `a` and `b`.
async fn burst(a: &Server, b: &Server, t: &str, path: &str, bodies: Vec<Value>) -> Vec<(u16, Value)> {
    let calls = bodies.into_iter().enumerate().map(|(i, body)| {
        let s = if i % 2 == 0 { a } else { b };
        async move { s.raw(Method::POST, path, Some(t), Some(body)).await }
    });
    join_all(calls).await
}

/// The codes of `answers`, counted: `(created, others)`, failing on any
/// answer but 201 and `refused`.
fn tally(answers: &[(u16, Value)], refused: u16) -> usize {
    for (st, v) in answers {
        assert!(*st == 201 || *st == refused, "{st}: {v}");
    }
    answers.iter().filter(|(st, _)| *st == 201).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quota_holds_across_replicas() {
    let Some((a, b)) = pair(&["--backend", "none"]).await else { return };
    let admin = a.token("ops", true);
    for round in 0..5 {
        let tenant = format!("acme{round}");
        let t = a.token(&tenant, false);
        let quota = json!({"object": {"spec": {"virtual_machines": 10}}});
        let (st, q) = a.raw(Method::PUT, &format!("{V1}/tenants/{tenant}/quota"), Some(&admin), Some(quota)).await;
        assert_eq!(st, 200, "{q}");
        let bodies = (0..60).map(|i| vm(&format!("vm{i}"))).collect();
        let answers = burst(&a, &b, &t, &format!("{V1}/virtual_machines"), bodies).await;
        let created = tally(&answers, 429);
        let (_, list) = b.raw(Method::GET, &format!("{V1}/virtual_machines?limit=100"), Some(&t), None).await;
        let names: Vec<&Value> = list["items"].as_array().unwrap().iter().map(|v| &v["metadata"]["name"]).collect();
        assert_eq!((created, names.len()), (10, 10), "round {round}: a quota of 10 across two replicas: {names:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subnet_and_pool_addresses_are_never_handed_out_twice() {
    let Some((a, b)) = pair(&["--backend", "none", "--external-ip-pool", "127.44.9.0/29"]).await else { return };
    let t = a.token("acme", false);
    let net = json!({"object": {"metadata": {"name": "lab"}, "spec": {"ipv4_cidr": "10.60.0.0/16"}}});
    assert_eq!(a.raw(Method::POST, &format!("{V1}/virtual_networks"), Some(&t), Some(net)).await.0, 201);
    let sn = json!({"object": {"metadata": {"name": "small"}, "spec": {"virtual_network": "lab", "ipv4_cidr": "10.60.1.0/28"}}});
    let (st, v) = b.raw(Method::POST, &format!("{V1}/subnets"), Some(&t), Some(sn)).await;
    assert_eq!(st, 201, "{v}");

    // 24 VMs on a /28 (13 VM addresses after the gateway).
    let bodies = (0..24)
        .map(|i| {
            json!({"object": {"metadata": {"name": format!("vm{i}")},
                "spec": {"template": "tiny", "network_attachments": [{"subnet": "small"}]}}})
        })
        .collect();
    let answers = burst(&a, &b, &t, &format!("{V1}/virtual_machines"), bodies).await;
    let made: Vec<&Value> = answers.iter().filter(|(st, _)| *st == 201).map(|(_, v)| v).collect();
    for (st, v) in answers.iter().filter(|(st, _)| *st != 201) {
        assert_eq!(st, &400, "a full subnet is a clear refusal: {v}");
        assert!(v.to_string().contains("network_attachments[0]"), "{v}");
    }
    let addresses: Vec<&str> = made.iter().map(|v| v["object"]["spec"]["network_attachments"][0]["ip_address"].as_str().unwrap()).collect();
    let distinct: HashSet<&&str> = addresses.iter().collect();
    assert_eq!(distinct.len(), addresses.len(), "an address was handed out twice: {addresses:?}");
    assert_eq!(addresses.len(), 13, "every VM address of the /28 is used once: {addresses:?}");

    // 20 external IPs from a /29 pool (8 addresses).
    let bodies = (0..20).map(|i| json!({"object": {"metadata": {"name": format!("ip{i}")}, "spec": {}}})).collect();
    let answers = burst(&a, &b, &t, &format!("{V1}/external_ips"), bodies).await;
    let got: Vec<String> = answers.iter().filter(|(st, _)| *st == 201).map(|(_, v)| v["object"]["status"]["address"].to_string()).collect();
    for (st, v) in answers.iter().filter(|(st, _)| *st != 201) {
        assert_eq!((st, &v["code"]), (&409, &json!(8)), "an empty pool is RESOURCE_EXHAUSTED: {v}");
    }
    let distinct: HashSet<&String> = got.iter().collect();
    assert_eq!(distinct.len(), got.len(), "a pool address was handed out twice: {got:?}");
    assert!(!got.is_empty() && got.len() <= 8, "{got:?}");
}

/// On the qemu backend (volumes are made by the replica that reconciles; VMs stay stopped).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volume_is_attached_once_across_replicas() {
    let images = vmaas_tests::images_dir().display().to_string();
    let args =
        ["--backend", "qemu", "--images-dir", &images, "--vm-address-pool", "127.45.3.0/25", "--external-ip-pool", "127.45.3.128/25"];
    let Some((a, b)) = pair(&args).await else { return };
    let t = a.token("acme", false);
    let volume = json!({"metadata": {"name": "data"}, "spec": {"size": "64Mi"}});
    let id = vmaas_tests::objects::created(&a, &t, "volumes", volume).await;
    vmaas_tests::objects::wait_for(&a, &t, &format!("volumes/{id}"), "the volume READY", |v| {
        vmaas_tests::objects::state(v).ends_with("READY")
    })
    .await;
    let vms = (0..8)
        .map(|i| json!({"object": {"metadata": {"name": format!("vm{i}")}, "spec": {"template": "tiny", "state": "stopped"}}}))
        .collect();
    assert_eq!(tally(&burst(&a, &b, &t, &format!("{V1}/virtual_machines"), vms).await, 429), 8);
    let bodies = (0..8)
        .map(|i| json!({"object": {"metadata": {"name": format!("att{i}")}, "spec": {"volume": "data", "compute_instance": format!("vm{i}")}}}))
        .collect();
    let answers = burst(&a, &b, &t, &format!("{V1}/volume_attachments"), bodies).await;
    assert_eq!(tally(&answers, 409), 1, "one volume, one attachment: {answers:?}");
}

/// Writes through `b` while `a` is frozen: each takes less than a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_replica_does_not_hold_up_the_other() {
    let Some((a, b)) = pair(&["--backend", "none"]).await else { return };
    let t = a.token("acme", false);
    let pid = a.pid().expect("a runs").to_string();
    let mut slowest = Duration::ZERO;
    for round in 0..6u64 {
        // a is frozen while it writes a burst, so that it may be caught holding what it holds while writing.
        let fire: Vec<_> = (0..8).map(|i| vm(&format!("a{round}-{i}"))).collect();
        let during = async {
            tokio::time::sleep(Duration::from_millis(5 + 7 * round)).await;
            assert!(std::process::Command::new("kill").args(["-STOP", &pid]).status().unwrap().success());
            let mut worst = Duration::ZERO;
            for i in 0..5 {
                let started = Instant::now();
                let (st, v) = b.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(vm(&format!("b{round}-{i}")))).await;
                assert_eq!(st, 201, "{v}");
                worst = worst.max(started.elapsed());
            }
            assert!(std::process::Command::new("kill").args(["-CONT", &pid]).status().unwrap().success());
            worst
        };
        let path = format!("{V1}/virtual_machines");
        let (_, worst) = tokio::join!(burst(&a, &a, &t, &path, fire), during);
        slowest = slowest.max(worst);
    }
    assert!(slowest < Duration::from_millis(1000), "a write through b waited {slowest:?} for frozen a");
    println!("the slowest write through b while a was frozen took {slowest:?}");
}

/// `a` (the replica that reconciles) killed with SIGKILL in the middle of a
/// burst of creates through it: every create it acknowledged is stored,
/// and `b` reconciles within 5 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_mid_burst_loses_no_acknowledged_create() {
    let Some((mut a, b)) = pair(&["--backend", "none"]).await else { return };
    let t = a.token("acme", false);
    assert!(a.log().contains("reconciler lease acquired"), "{}", a.log());
    let path = format!("{V1}/virtual_machines");
    let http = reqwest::Client::new();
    // A request the kill cut off is no answer: only 201s count.
    let acked = std::sync::atomic::AtomicUsize::new(0);
    let fire = (0..40).map(|i| {
        let req = http.post(format!("{}{path}", a.endpoint)).bearer_auth(&t).json(&vm(&format!("vm{i}")));
        let acked = &acked;
        async move {
            let Ok(r) = req.send().await else { return (0, Value::Null) };
            let st = r.status().as_u16();
            let v = r.json::<Value>().await.unwrap_or(Value::Null);
            if st == 201 && !v.is_null() {
                acked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            (st, v)
        }
    });
    let fire: Vec<_> = fire.collect();
    let (answers, ()) = tokio::join!(join_all(fire), async {
        // Killed once some are acknowledged, while the others are under way.
        let deadline = Instant::now() + Duration::from_secs(20);
        while acked.load(std::sync::atomic::Ordering::SeqCst) < 5 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        a.kill9().await;
    });
    let killed = Instant::now();
    let acknowledged: Vec<&str> = answers
        .iter()
        .filter(|(st, v)| *st == 201 && !v.is_null())
        .map(|(_, v)| v["object"]["metadata"]["name"].as_str().unwrap())
        .collect();
    assert!(acknowledged.len() >= 5 && acknowledged.len() < 40, "the kill came mid-burst: {} acknowledged", acknowledged.len());
    let (_, list) = b.raw(Method::GET, &format!("{path}?limit=100"), Some(&t), None).await;
    let stored: HashSet<&str> = list["items"].as_array().unwrap().iter().map(|v| v["metadata"]["name"].as_str().unwrap()).collect();
    for name in &acknowledged {
        assert!(stored.contains(name), "{name} was acknowledged and is not stored: {stored:?}");
    }
    while !b.log().contains("took over the reconciler lease") && !b.log().contains("reconciler lease acquired") {
        assert!(killed.elapsed() < Duration::from_secs(5), "b did not take over reconciling:\n{}", b.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // b reconciles what a stored: every stored VM gets b's status.
    let ids: Vec<String> = list["items"].as_array().unwrap().iter().map(|v| v["id"].as_str().unwrap().to_owned()).collect();
    for id in ids {
        vmaas_tests::objects::wait_for(&b, &t, &format!("virtual_machines/{id}"), "b's status", |v| {
            v.is_some_and(|v| v["status"]["conditions"].to_string().contains("NoBackend"))
        })
        .await;
    }
    println!("{} of 40 acknowledged before the kill, {} stored", acknowledged.len(), stored.len());
}

/// Two replicas on one PostgreSQL: both serve the same state, one reconciles.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_postgres() {
    let Some(a) = Server::start(Db::Postgres).await else { return };
    let b = Server::replica_of(&a).await;
    let admin = a.token("ops", true);
    let t = a.token("acme", false);
    seed::publish(&a, &admin).await;
    let (st, vm) = a.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(seed::vm("shared"))).await;
    assert_eq!(st, 201);
    let id = vm["object"]["id"].as_str().unwrap();
    let (st, seen) = b.raw(Method::GET, &format!("{V1}/virtual_machines/{id}"), Some(&t), None).await;
    assert_eq!(st, 200, "replica b serves what replica a stored: {seen}");
    // A name taken through one replica is taken for the other.
    let (st, _) = b.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(seed::vm("shared"))).await;
    assert_eq!(st, 409);
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    let leaders = [&a, &b].iter().filter(|s| s.log().contains("reconciler lease acquired")).count();
    assert_eq!(leaders, 1, "exactly one replica reconciles:\nA:\n{}\nB:\n{}", a.log(), b.log());
}

/// A replica killed with `kill -9` while it reconciles: the other takes the
/// lease over at once (the holder was a process of this host that is gone),
/// instead of waiting for it to expire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_leader_is_replaced_at_once() {
    let Some(mut a) = Server::start(Db::Postgres).await else { return };
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let b = Server::replica_of(&a).await;
    assert!(a.log().contains("reconciler lease acquired"), "{}", a.log());
    a.kill9().await;
    let started = std::time::Instant::now();
    while !b.log().contains("took over the reconciler lease from a process that is gone") {
        assert!(started.elapsed() < std::time::Duration::from_secs(3), "the survivor did not take over:\n{}", b.log());
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The embedded database has one owner: a second server on the same data directory refuses to start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_server_per_data_directory() {
    let s = Server::start(Db::Sqlite).await.unwrap();
    let out = std::process::Command::new(vmaas_tests::bin("vmaas-server"))
        .args(["--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&s.data_dir)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("another vmaas-server is using"), "{err}");
}

/// The status and body a console WebSocket at `s` with `?ticket=` answers
/// its upgrade with (`--backend none` has no console, so a ticket that
/// opens the door gets 409 saying so, and one that does not gets 401).
async fn console_with(s: &Server, id: &str, ticket: &str) -> (u16, String) {
    let url = format!("{}{V1}/virtual_machines/{id}/console?ticket={ticket}", s.endpoint.replace("http://", "ws://"));
    match tokio_tungstenite::connect_async(url.as_str()).await {
        Ok(_) => (101, String::new()),
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => {
            (r.status().as_u16(), String::from_utf8_lossy(r.body().as_deref().unwrap_or_default()).into_owned())
        }
        Err(e) => panic!("console: {e}"),
    }
}

/// A console session of VM `id`, opened through `s`: status and answer.
async fn session(s: &Server, t: &str, id: &str) -> (u16, Value) {
    s.raw(Method::POST, &format!("{V1}/virtual_machines/{id}/console_sessions"), Some(t), None).await
}

/// A console ticket one replica hands out opens the console on the other,
/// once; the caps on unused tickets count both replicas' tickets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_console_ticket_is_good_on_every_replica_once() {
    let Some((a, b)) = pair(&["--backend", "none"]).await else { return };
    let t = a.token("acme", false);
    let created: Vec<String> = join_all(["one", "two"].map(|n| vmaas_tests::vms::create(&a, &t, n, "tiny"))).await;
    let (st, got) = session(&a, &t, &created[0]).await;
    assert_eq!(st, 201, "{got}");
    let ticket = got["ticket"].as_str().unwrap().to_owned();
    let (st, body) = console_with(&b, &created[0], &ticket).await;
    assert_eq!(st, 409, "replica b takes replica a's ticket (and then says it has no console): {body}");
    assert!(body.contains("has no serial console"), "{body}");
    let (st, body) = console_with(&a, &created[0], &ticket).await;
    assert_eq!(st, 401, "a ticket used on b is used up on a too: {body}");

    // Eight unused tickets for one VM, handed out by both replicas: the ninth is refused by either.
    for i in 0..8 {
        let (st, v) = session(if i % 2 == 0 { &a } else { &b }, &t, &created[1]).await;
        assert_eq!(st, 201, "ticket {i}: {v}");
    }
    for s in [&a, &b] {
        let (st, v) = session(s, &t, &created[1]).await;
        assert_eq!((st, v["details"][0]["field"].as_str()), (429, Some("console_sessions")), "{v}");
    }
}
