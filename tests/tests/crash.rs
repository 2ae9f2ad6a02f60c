//! The crash test: a bounded create/start/stop/delete workload on real
//! QEMU guests, with the server killed (`kill -9`) at a random point of
//! every step and started again; then nothing may be lost, duplicated or
//! orphaned. The seed is printed; `VMAAS_CRASH_SEED=N` replays a run.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use vmaas_tests::vms::{TINY, V1, publish, state};
use vmaas_tests::{Server, qemu_pids};

/// A small deterministic generator, so a failing run can be replayed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Create,
    Stop,
    Start,
    Delete,
}

/// What the tenant was told: a VM exists, started or not.
type Model = BTreeMap<String, bool>;

async fn send(endpoint: String, token: String, op: Op, name: String, id: Option<String>) -> Option<u16> {
    let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().ok()?;
    let vms = format!("{endpoint}{V1}/virtual_machines");
    let (token, name, id) = (token.as_str(), name.as_str(), id.as_deref());
    let req = match (op, id) {
        (Op::Create, _) => http.post(&vms).json(&json!({"object": {"metadata": {"name": name}, "spec": {"template": "tiny"}}})),
        (Op::Delete, Some(id)) => http.delete(format!("{vms}/{id}")),
        (Op::Stop | Op::Start, Some(id)) => {
            let power = if op == Op::Stop { "stopped" } else { "started" };
            http.patch(format!("{vms}/{id}")).json(&json!({"object": {"spec": {"state": power}}}))
        }
        _ => return None,
    };
    req.bearer_auth(token).send().await.ok().map(|r| r.status().as_u16())
}

/// The VM named `name` as the server has it, if it exists (and is not being deleted).
async fn lookup(s: &Server, token: &str, name: &str) -> Option<Value> {
    let (_, page) = s.raw(reqwest::Method::GET, &format!("{V1}/virtual_machines?name={name}"), Some(token), None).await;
    page["items"].as_array()?.first().filter(|v| v["metadata"]["deletion_timestamp"].is_null()).cloned()
}

fn pick(rng: &mut Rng, exists: Option<bool>) -> Op {
    match exists {
        None => Op::Create,
        Some(started) => match rng.below(3) {
            0 => Op::Delete,
            _ if started => Op::Stop,
            _ => Op::Start,
        },
    }
}

async fn settled(s: &Server, token: &str, model: &Model) -> bool {
    let (_, page) = s.raw(reqwest::Method::GET, &format!("{V1}/virtual_machines?limit=100"), Some(token), None).await;
    let items = page["items"].as_array().cloned().unwrap_or_default();
    items.len() == model.len()
        && items.iter().all(|v| {
            let want = if model.get(v["metadata"]["name"].as_str().unwrap_or("")) == Some(&true) { "READY" } else { "STOPPED" };
            state(v) == format!("VIRTUAL_MACHINE_STATE_{want}")
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_at_random_points_loses_duplicates_and_orphans_nothing() {
    let seed = std::env::var("VMAAS_CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64 | 1).unwrap_or(7)
    });
    eprintln!("crash test seed: VMAAS_CRASH_SEED={seed}");
    let mut rng = Rng(seed);
    let mut s = Server::start_qemu().await;
    publish(&s, TINY);
    let t = s.token("acme", false);
    let mut model = Model::new();
    for step in 0..8 {
        let name = format!("c{}", rng.below(3));
        let current = lookup(&s, &t, &name).await;
        let op = pick(&mut rng, current.as_ref().map(|v| v["spec"]["state"] != "stopped"));
        let id = current.as_ref().and_then(|v| v["id"].as_str()).map(str::to_owned);
        // Sometimes while the API still works on the request, sometimes while the guest boots.
        let delay = Duration::from_millis(if rng.below(3) == 0 { rng.below(30) } else { rng.below(1500) });
        // The request runs on its own; the server dies at the chosen moment, answered or not.
        let request = tokio::spawn(send(s.endpoint.clone(), t.clone(), op, name.clone(), id));
        tokio::time::sleep(delay).await;
        s.kill9().await;
        let answer = request.await.ok().flatten();
        eprintln!("step {step}: {op:?} {name} after {delay:?}: answer {answer:?}");
        s.relaunch().await;
        // Whatever was answered before the crash must have stuck; whatever was
        // not may or may not have: the server's view decides.
        let now = lookup(&s, &t, &name).await;
        match (op, answer) {
            (Op::Create, Some(201)) | (Op::Start, Some(200)) => {
                assert_eq!(now.as_ref().map(|v| v["spec"]["state"] != "stopped"), Some(true), "{op:?} {name} was lost");
            }
            (Op::Stop, Some(200)) => {
                assert_eq!(now.as_ref().map(|v| v["spec"]["state"] == "stopped"), Some(true), "stop of {name} was lost");
            }
            (Op::Delete, Some(202)) => assert!(now.is_none(), "the deletion of {name} was lost"),
            _ => {}
        }
        match now {
            Some(v) => model.insert(name, v["spec"]["state"] != "stopped"),
            None => model.remove(&name),
        };
    }
    let deadline = Instant::now() + Duration::from_secs(180);
    while !settled(&s, &t, &model).await {
        if Instant::now() > deadline {
            let (_, page) = s.raw(reqwest::Method::GET, &format!("{V1}/virtual_machines?limit=100"), Some(&t), None).await;
            panic!("the VMs did not settle to {model:?}\nthe VMs: {page:#}\n{}", s.log());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Nothing duplicated or orphaned: one QEMU per started VM, none else, and a directory per VM only.
    let (_, page) = s.raw(reqwest::Method::GET, &format!("{V1}/virtual_machines?limit=100"), Some(&t), None).await;
    let mut ids = BTreeSet::new();
    for v in page["items"].as_array().unwrap() {
        let id = v["id"].as_str().unwrap().to_owned();
        let started = model[v["metadata"]["name"].as_str().unwrap()];
        assert_eq!(qemu_pids(&id).len(), usize::from(started), "QEMUs of {id}");
        ids.insert(id);
    }
    let all_guests = qemu_pids(&s.data_dir.display().to_string()).len();
    assert_eq!(all_guests, model.values().filter(|started| **started).count(), "no orphaned guest");
    let dirs: BTreeSet<String> = std::fs::read_dir(s.data_dir.join("vms"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("vm.json").exists())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(dirs, ids, "a directory for each VM, none for deleted ones");
    let admin = s.token("ops", true);
    let (_, health) = s.raw(reqwest::Method::GET, "/healthz", Some(&admin), None).await;
    assert_eq!((&health["quarantine"], &health["quarantined"]), (&json!([]), &json!(0)), "{health:#}");
}
