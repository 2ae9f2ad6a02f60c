//! Creates under load on the real `vmaas-server`, on SQLite (where they are
//! committed in groups) and PostgreSQL: every acknowledged create survives
//! `kill -9`; creates racing for one name make one VM; creates racing for
//! a quota's last room take exactly what it allows.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::vms::{TINY, V1, publish};
use vmaas_tests::{Db, Server, on_both_databases};

/// Clients creating at once.
const CLIENTS: usize = 24;

fn vm(name: &str) -> Value {
    json!({"object": {"metadata": {"name": name}, "spec": {"template": "tiny"}}})
}

/// Every VM `token` sees, by id, with its name (read a page at a time).
async fn all_vms(s: &Server, token: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    loop {
        let (st, page) = s.raw(Method::GET, &format!("{V1}/virtual_machines?offset={}&limit=1000", out.len()), Some(token), None).await;
        assert_eq!(st, 200, "{page}");
        let items = page["items"].as_array().expect("items").clone();
        for v in &items {
            out.insert(v["id"].as_str().expect("id").to_owned(), v["metadata"]["name"].as_str().expect("name").to_owned());
        }
        if items.is_empty() || out.len() as u64 >= page["total"].as_u64().expect("total") {
            return out;
        }
    }
}

/// Client `c` creates VMs named `c{c}-{n}` until `until` (at most 400),
/// counting each acknowledged one in `counted`: the `(id, name)` of each
/// one the server acknowledged with 201.
async fn create_until(endpoint: String, token: String, c: usize, until: Instant, counted: Arc<AtomicUsize>) -> Vec<(String, String)> {
    let http = reqwest::Client::new();
    let mut acked = Vec::new();
    for n in 0..400 {
        if Instant::now() >= until {
            break;
        }
        let name = format!("c{c}-{n}");
        let sent = http.post(format!("{endpoint}{V1}/virtual_machines")).bearer_auth(&token).json(&vm(&name)).send().await;
        let Ok(r) = sent else { break };
        if r.status().as_u16() != 201 {
            break;
        }
        let Ok(body) = r.json::<Value>().await else { break };
        acked.push((body["object"]["id"].as_str().expect("id").to_owned(), name));
        counted.fetch_add(1, Ordering::SeqCst);
    }
    acked
}

on_both_databases! {
    /// Clients create VMs as fast as the server takes them; the server is
    /// killed with SIGKILL in the middle. Every create it acknowledged is
    /// there after a restart, under its name, and nothing is there twice.
    async fn every_acknowledged_create_survives_kill_9(db: Db) {
        let Some(mut s) = Server::start(db).await else { return };
        publish(&s, TINY);
        let t = s.token("acme", false);
        let until = Instant::now() + Duration::from_secs(20);
        let counted = Arc::new(AtomicUsize::new(0));
        let clients: Vec<_> =
            (0..CLIENTS).map(|c| tokio::spawn(create_until(s.endpoint.clone(), t.clone(), c, until, counted.clone()))).collect();
        // Kill once creates are flowing: 100 acknowledged (the clients
        // see an answer a moment after the server stored it).
        let started = Instant::now();
        while counted.load(Ordering::SeqCst) < 100 {
            assert!(started.elapsed() < Duration::from_secs(15), "creates did not flow");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        s.kill9().await;
        let mut acked = Vec::new();
        for c in clients {
            acked.extend(c.await.expect("client"));
        }
        assert!(acked.len() >= 100, "only {} creates were acknowledged", acked.len());
        s.relaunch().await;
        let stored = all_vms(&s, &t).await;
        let lost: Vec<_> = acked.iter().filter(|(id, name)| stored.get(id) != Some(name)).collect();
        assert!(lost.is_empty(), "{} of {} acknowledged creates were lost, e.g. {:?}", lost.len(), acked.len(), &lost[..lost.len().min(3)]);
        let mut names: Vec<_> = stored.values().collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), stored.len(), "a name is stored twice");
    }
}

on_both_databases! {
    /// Creates of one name at once (committed together on SQLite): one is
    /// made, every other one is told the name is taken; one VM is stored.
    async fn creates_racing_for_one_name_make_one_vm(db: Db) {
        let Some(s) = Server::start(db).await else { return };
        publish(&s, TINY);
        let t = s.token("acme", false);
        let path = format!("{V1}/virtual_machines");
        let answers = futures::future::join_all((0..CLIENTS).map(|_| s.raw(Method::POST, &path, Some(&t), Some(vm("only"))))).await;
        let statuses: Vec<u16> = answers.iter().map(|a| a.0).collect();
        assert_eq!(statuses.iter().filter(|st| **st == 201).count(), 1, "{statuses:?}");
        for (st, e) in answers.iter().filter(|(st, _)| *st != 201) {
            assert_eq!(*st, 409, "{e}");
            assert!(e["message"].as_str().expect("message").contains("\"only\" already exists"), "{e}");
        }
        let stored = all_vms(&s, &t).await;
        assert_eq!(stored.values().filter(|n| *n == "only").count(), 1, "{stored:?}");
        // The other creates of the batch were not held up by the refused ones.
        assert_eq!(s.raw(Method::POST, &path, Some(&t), Some(vm("after"))).await.0, 201);
    }
}

on_both_databases! {
    /// A quota of 5 VMs and 24 creates at once: exactly 5 are made, the
    /// others are told the quota is exhausted, even though the 5 are
    /// committed after their admission.
    async fn creates_racing_for_a_quota_take_exactly_its_room(db: Db) {
        let Some(s) = Server::start(db).await else { return };
        publish(&s, TINY);
        let (admin, t) = (s.token("ops", true), s.token("acme", false));
        let quota = json!({"object": {"spec": {"virtual_machines": 5}}});
        let (st, q) = s.raw(Method::PUT, &format!("{V1}/tenants/acme/quota"), Some(&admin), Some(quota)).await;
        assert_eq!(st, 200, "{q}");
        let path = format!("{V1}/virtual_machines");
        let names: Vec<String> = (0..CLIENTS).map(|i| format!("q{i}")).collect();
        let answers = futures::future::join_all(names.iter().map(|n| s.raw(Method::POST, &path, Some(&t), Some(vm(n))))).await;
        let statuses: Vec<u16> = answers.iter().map(|a| a.0).collect();
        assert_eq!(statuses.iter().filter(|st| **st == 201).count(), 5, "{statuses:?}");
        for (st, e) in answers.iter().filter(|(st, _)| *st != 201) {
            assert_eq!((*st, &e["details"][0]["field"]), (429, &json!("quota.virtual_machines")), "{e}");
        }
        assert_eq!(all_vms(&s, &t).await.len(), 5);
    }
}
