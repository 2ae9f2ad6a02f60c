//! The kubevirt backend's serial console: KubeVirt's `console` subresource,
//! served by a played virt-api behind the real kube-apiserver's aggregation
//! layer (an `APIService`; `vmaas_tests::virt_api`), in a network namespace
//! the test makes (the aggregator refuses loopback endpoints). Through the
//! vmaas API, a console session is typed into and read back, shared by two
//! viewers, logged, refused to another tenant and to a stopped VM. The
//! graphical console is the `vnc` subresource, which the played virt-api
//! serves from a real QEMU's display (SeaBIOS on a VGA), as virt-api does
//! from the QEMU that runs the VMI. Two replicas on PostgreSQL: a newer
//! connection of an OSAC `client_id` through one evicts the older through
//! the other.

use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use reqwest::Method;
use serde_json::Value;
use tokio_tungstenite::tungstenite::Message;
use vmaas_tests::Server;
use vmaas_tests::k8s::Cluster;
use vmaas_tests::kubevirt::{env_on, the_vm};
use vmaas_tests::vms::{self, V1};

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A console WebSocket of VM `id` through a new session.
async fn open(s: &Server, t: &str, id: &str) -> Ws {
    let (st, session) = s.raw(Method::POST, &format!("{V1}/virtual_machines/{id}/console_sessions"), Some(t), None).await;
    assert_eq!(st, 201, "{session}");
    let url = format!("{}{}", s.endpoint.replace("http://", "ws://"), session["url"].as_str().unwrap());
    match tokio_tungstenite::connect_async(url.as_str()).await {
        Ok((ws, _)) => ws,
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => {
            panic!("console refused: {} {}\n{}", r.status(), String::from_utf8_lossy(r.body().as_deref().unwrap_or_default()), s.log())
        }
        Err(e) => panic!("console: {e}"),
    }
}

/// Reads `ws` until what it printed contains `want`; all it printed.
async fn read_until(ws: &mut Ws, want: &str) -> String {
    let mut seen = String::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !seen.contains(want) {
        assert!(Instant::now() < deadline, "no {want:?} on the console; saw: {seen:?}");
        if let Ok(Some(Ok(m))) = tokio::time::timeout(Duration::from_secs(1), ws.next()).await {
            seen.push_str(&String::from_utf8_lossy(&m.into_data()));
        }
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_is_virt_apis_subresource_through_the_aggregator() {
    let mut k = Cluster::start_aggregated().await;
    vmaas_tests::virt_api::serve(&mut k).await;
    let (k, _kubevirt, s) = env_on(k).await;
    let t = s.token("acme", false);
    let id = vms::create(&s, &t, "shell", "tiny").await;
    vms::wait_ready(&s, &t, &id).await;
    let kv = the_vm(&k, &id).await;
    let vmi = format!("{}/{}", kv["metadata"]["namespace"].as_str().unwrap(), kv["metadata"]["name"].as_str().unwrap());

    // The greeting names the VMI: the console is that VMI's, through the aggregator.
    let mut ws = open(&s, &t, &id).await;
    read_until(&mut ws, &format!("{vmi} ttyS0")).await;
    ws.send(Message::Text("root\r".into())).await.unwrap();
    read_until(&mut ws, "root\r\nPassword: ").await;

    // A second viewer shares the line: it gets what was printed, then what is typed by the first.
    let mut second = open(&s, &t, &id).await;
    read_until(&mut second, "Password: ").await;
    ws.send(Message::Binary(b"hunter2\r".to_vec().into())).await.unwrap();
    read_until(&mut second, "hunter2\r\nPassword: ").await;

    // The log is what the console printed; another tenant gets nothing.
    let log = String::from_utf8_lossy(&s.cli(&t, &["vm", "logs", "shell"]).stdout).into_owned();
    assert!(log.contains(&format!("{vmi} ttyS0")) && log.contains("hunter2"), "{log:?}");
    let other = s.token("globex", false);
    let (st, _) = s.raw(Method::POST, &format!("{V1}/virtual_machines/{id}/console_sessions"), Some(&other), None).await;
    assert_eq!(st, 404);
    drop((ws, second));

    // Pausing is virt-api's `pause` through the aggregator: the VMI is held
    // (KubeVirt's Paused condition), PAUSED in both views, and resumes as
    // the same VMI.
    let vmi_path = vmaas_tests::k8s::KubeApi::path_of(&kv, "virtualmachineinstances");
    let uid = k.request(Method::GET, &vmi_path, None, None).await.1["metadata"]["uid"].clone();
    let out = s.cli(&t, &["vm", "pause", "shell", "--wait", "--timeout", "60s"]);
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stderr), s.log());
    let held = k.request(Method::GET, &vmi_path, None, None).await.1;
    let paused = held["status"]["conditions"].as_array().into_iter().flatten().any(|c| c["type"] == "Paused" && c["status"] == "True");
    assert!(paused, "KubeVirt holds the VMI: {held:#}");
    let (_, ci) = s.raw(Method::GET, &format!("{V1}/compute_instances/{id}"), Some(&t), None).await;
    assert_eq!(ci["object"]["status"]["state"], "COMPUTE_INSTANCE_STATE_PAUSED", "{ci}");
    let out = s.cli(&t, &["vm", "resume", "shell", "--wait", "--timeout", "60s"]);
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stderr), s.log());
    let resumed = k.request(Method::GET, &vmi_path, None, None).await.1;
    assert_eq!(resumed["metadata"]["uid"], uid, "the same VMI goes on");
    assert!(!resumed["status"]["conditions"].to_string().contains("Paused"), "{resumed:#}");

    // A stopped VM has no VMI, so no console: a clear error, not a hang.
    let (st, body) = refused_once_stopped(&s, &t, &id, None).await;
    assert_eq!(st, 409, "a failed precondition");
    assert!(body["message"].as_str().unwrap_or_default().contains("not running"), "{body}");
}

/// Stops VM `id`, then opens sessions (of `kind`, serial when `None`)
/// until the console's WebSocket refuses: its status and error body.
async fn refused_once_stopped(s: &Server, t: &str, id: &str, kind: Option<Value>) -> (u16, Value) {
    let stop = serde_json::json!({"object": {"spec": {"state": "stopped"}}});
    let (st, b) = s.raw(Method::PATCH, &format!("{V1}/virtual_machines/{id}"), Some(t), Some(stop)).await;
    assert_eq!(st, 200, "{b}");
    vms::wait_state(s, t, &format!("{V1}/virtual_machines/{id}"), "VIRTUAL_MACHINE_STATE_STOPPED", 30).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (st, session) = s.raw(Method::POST, &format!("{V1}/virtual_machines/{id}/console_sessions"), Some(t), kind.clone()).await;
        assert_eq!(st, 201, "{session}");
        let url = format!("{}{}", s.endpoint.replace("http://", "ws://"), session["url"].as_str().unwrap());
        match tokio_tungstenite::connect_async(url.as_str()).await {
            Err(tokio_tungstenite::tungstenite::Error::Http(r)) => {
                let body: Value = serde_json::from_slice(r.body().as_deref().unwrap_or_default()).unwrap_or_default();
                return (r.status().as_u16(), body);
            }
            _ => assert!(Instant::now() < deadline, "the console of a stopped VM still opens"),
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// A QEMU with a VGA and nothing to boot (SeaBIOS says so on its screen),
/// its display on a VNC socket: what runs a VMI, for the played virt-api.
struct Qemu {
    dir: tempfile::TempDir,
}

impl Qemu {
    fn start(name: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (sock, pid) = (dir.path().join("vnc.sock"), dir.path().join("qemu.pid"));
        let status = std::process::Command::new("qemu-system-x86_64")
            .args(["-name", name, "-machine", "pc", "-accel", "tcg", "-m", "64M", "-nodefaults", "-display", "none", "-device", "VGA"])
            .arg("-vnc")
            .arg(format!("unix:{}", sock.display()))
            .args(["-daemonize", "-pidfile"])
            .arg(&pid)
            .status()
            .expect("qemu-system-x86_64");
        assert!(status.success());
        Self { dir }
    }

    fn socket(&self) -> std::path::PathBuf {
        self.dir.path().join("vnc.sock")
    }
}

impl Drop for Qemu {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(self.dir.path().join("qemu.pid")) {
            let _ = std::process::Command::new("kill").arg(pid.trim()).status();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_display_is_virt_apis_vnc_subresource_through_the_aggregator() {
    let mut k = Cluster::start_aggregated().await;
    vmaas_tests::virt_api::serve(&mut k).await;
    let (k, _kubevirt, s) = env_on(k).await;
    let t = s.token("acme", false);
    let id = vms::create(&s, &t, "desk", "tiny").await;
    vms::wait_ready(&s, &t, &id).await;
    let kv = the_vm(&k, &id).await;
    let vmi = format!("{}/{}", kv["metadata"]["namespace"].as_str().unwrap(), kv["metadata"]["name"].as_str().unwrap());
    let qemu = Qemu::start(&format!("launcher-{}", kv["metadata"]["name"].as_str().unwrap()));
    vmaas_tests::virt_api::show(&vmi, qemu.socket());

    // Through vmaas, the aggregator and virt-api: the VMI's QEMU's screen.
    let c = vmaas_client::Client::new(&s.endpoint, Some(t.clone())).unwrap();
    let mut rfb = vmaas_tests::rfb::Rfb::connect(&c.console_url(&c.display_session(&id).await.unwrap())).await;
    assert!(rfb.name.contains("launcher-desk"), "the VMI's QEMU: {:?}", rfb.name);
    let deadline = Instant::now() + Duration::from_secs(30);
    while rfb.ink().await < 200 {
        assert!(Instant::now() < deadline, "SeaBIOS's text never showed");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let other = vmaas_client::Client::new(&s.endpoint, Some(s.token("globex", false))).unwrap();
    assert!(other.display_session(&id).await.is_err(), "another tenant gets no session");
    drop(rfb);

    // A stopped VM has no VMI, so no display: a clear error.
    let (st, body) = refused_once_stopped(&s, &t, &id, Some(serde_json::json!({"type": "CONSOLE_TYPE_VNC"}))).await;
    assert!(body["message"].as_str().unwrap_or_default().contains("not running"), "{st} {body}");
}

/// A console WebSocket of VM `id` through `s`, from an OSAC session with
/// `client_id`.
async fn open_as_client(s: &Server, t: &str, id: &str, client_id: &str) -> Ws {
    let body = serde_json::json!({"resource_id": id, "client_id": client_id});
    let (st, session) = s.raw(Method::POST, &format!("{V1}/console_sessions"), Some(t), Some(body)).await;
    assert_eq!(st, 201, "{session}");
    let url = format!("{}{}", s.endpoint.replace("http://", "ws://"), session["url"].as_str().unwrap());
    tokio_tungstenite::connect_async(url.as_str()).await.unwrap_or_else(|e| panic!("console: {e}\n{}", s.log())).0
}

/// [`open_as_client`] through a replica that may not have listed the
/// cluster's VMIs yet (its watches start with it): a 409 (the VM is not
/// running, for it) is tried again, for up to 30 s.
async fn open_when_listed(s: &Server, t: &str, id: &str, client_id: &str) -> Ws {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let body = serde_json::json!({"resource_id": id, "client_id": client_id});
        let (st, session) = s.raw(Method::POST, &format!("{V1}/console_sessions"), Some(t), Some(body)).await;
        assert_eq!(st, 201, "{session}");
        let url = format!("{}{}", s.endpoint.replace("http://", "ws://"), session["url"].as_str().unwrap());
        match tokio_tungstenite::connect_async(url.as_str()).await {
            Ok((ws, _)) => return ws,
            Err(e) if e.to_string().contains("409") && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            Err(e) => panic!("console: {e}\n{}", s.log()),
        }
    }
}

/// How `ws` ends within `within`: the close frame's reason (`None`: still open).
async fn closed_within(ws: &mut Ws, within: Duration) -> Option<String> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        match tokio::time::timeout(Duration::from_millis(200), ws.next()).await {
            Ok(Some(Ok(Message::Close(frame)))) => return Some(frame.map(|f| f.reason.to_string()).unwrap_or_default()),
            Ok(None | Some(Err(_))) => return Some(String::new()),
            Ok(Some(Ok(_))) | Err(_) => {}
        }
    }
    None
}

/// OSAC's `client_id` across two replicas on one PostgreSQL: a connection
/// through replica b evicts the same client's older connection through
/// replica a (within a's next look, 2 s); another client's stays open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_connection_of_a_client_evicts_its_older_one_on_another_replica() {
    let mut k = Cluster::start_aggregated().await;
    vmaas_tests::virt_api::serve(&mut k).await;
    k.namespace(vmaas_tests::kubevirt::IMAGES).await;
    vmaas_tests::kubevirt::data_source(&k, "test-guest").await;
    let _kubevirt = vmaas_tests::kubevirt::Controllers::start(&k).await;
    let kubeconfig = vmaas_tests::chart::server_kubeconfig(&k).await;
    let args = ["--backend", "kubevirt", "--kubeconfig", kubeconfig.to_str().unwrap(), "--default-image", "test-guest"];
    let Some(a) = Server::start_with(vmaas_tests::Db::Postgres, &args).await else { return };
    let b = Server::replica_of(&a).await;
    // A replica that could not reach the cluster at its start serves its
    // consoles once it has listed it (until then the VM is not running for
    // it): ready, as `/readyz` says.
    let deadline = Instant::now() + Duration::from_secs(60);
    while b.raw(Method::GET, "/readyz", None, None).await.0 != 200 {
        assert!(Instant::now() < deadline, "replica b never ready:\n{}", b.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    while b.raw(Method::GET, &format!("{V1}/virtual_machines"), Some(&a.token("acme", false)), None).await.0 != 200 {
        assert!(Instant::now() < deadline, "replica b never answers:\n{}", b.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    vms::publish(&a, vms::TINY);
    let t = a.token("acme", false);
    let id = vms::create(&a, &t, "shared", "tiny").await;
    vms::wait_ready(&a, &t, &id).await;

    let mut older = open_as_client(&a, &t, &id, "osac-cli-1").await;
    let mut other = open_as_client(&a, &t, &id, "osac-cli-2").await;
    read_until(&mut older, "ttyS0").await;
    let mut newer = open_when_listed(&b, &t, &id, "osac-cli-1").await;
    let reason = closed_within(&mut older, Duration::from_secs(6)).await;
    assert!(reason.as_deref().is_some_and(|r| r.contains("client_id")), "the older connection closed, saying why: {reason:?}\n{}", a.log());
    newer.send(Message::Text("root\r".into())).await.unwrap();
    read_until(&mut newer, "Password: ").await;
    assert_eq!(closed_within(&mut other, Duration::from_secs(3)).await, None, "another client's connection stays open");
    other.send(Message::Text("root\r".into())).await.unwrap();
    read_until(&mut other, "root\r\nPassword: ").await;
}
