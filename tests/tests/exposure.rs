//! External IPs and load balancers, end to end with real guests, through
//! the `vmaas` CLI: an external IP answers with its VM's page on its
//! loopback address and follows a re-attachment without a restart; a load
//! balancer spreads connections over two VMs and skips one that is
//! stopped; what is in use cannot be deleted; bad input is a 400 naming
//! the field. Every connection goes to a loopback address.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use vmaas_tests::Server;
use vmaas_tests::vms::{TINY, V1, publish};

/// The test guest's name from the page on `addr` port 80, if it answers.
async fn page_of(addr: &str) -> Option<String> {
    let fetch = async {
        let mut c = tokio::net::TcpStream::connect((addr, 80)).await.ok()?;
        c.write_all(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n").await.ok()?;
        let mut body = String::new();
        c.read_to_string(&mut body).await.ok()?;
        let start = body.find("test guest ")? + "test guest ".len();
        Some(body[start..].chars().take_while(char::is_ascii_alphanumeric).collect::<String>())
    };
    tokio::time::timeout(Duration::from_secs(5), fetch).await.ok().flatten()
}

/// Waits (at most 60 s) until `addr` serves the page of `name`.
async fn until_page(s: &Server, addr: &str, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while page_of(addr).await.as_deref() != Some(name) {
        assert!(Instant::now() < deadline, "{addr} never served {name}'s page\n{}", s.log());
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Waits (at most 60 s) until GET `path` satisfies `ok`; returns the object.
async fn until(s: &Server, t: &str, path: &str, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, v) = s.raw(Method::GET, &format!("{V1}/{path}"), Some(t), None).await;
        if ok(&v["object"]) {
            return v["object"].clone();
        }
        assert!(Instant::now() < deadline, "{path}: never {what}: {v}\n{}", s.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `vmaas vm create NAME -t tiny --subnet S…` for each of `subnets`, waited for; its id.
fn vm(s: &Server, t: &str, name: &str, subnets: &[&str]) -> String {
    let mut args = vec!["vm", "create", name, "-t", "tiny", "--wait", "--timeout", "5m"];
    args.extend(subnets.iter().flat_map(|n| ["--subnet", n]));
    let v = s.cli_json(t, &args);
    v["id"].as_str().or(v["object"]["id"].as_str()).unwrap().to_owned()
}

async fn refused(s: &Server, t: &str, method: Method, path: &str, body: Option<Value>, status: u16) -> String {
    let (st, v) = s.raw(method, &format!("{V1}/{path}"), Some(t), body).await;
    assert_eq!(st, status, "{path}: {v}");
    v.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn external_ips_follow_their_attachment_and_balancers_skip_stopped_targets() {
    let s = Server::start_qemu().await;
    publish(&s, TINY);
    let t = s.token("acme", false);
    s.cli_json(&t, &["network", "create", "lab", "--cidr", "10.40.0.0/16"]);
    s.cli_json(&t, &["subnet", "create", "front", "--network", "lab", "--cidr", "10.40.1.0/24"]);
    s.cli_json(&t, &["subnet", "create", "back", "--network", "lab", "--cidr", "10.40.2.0/24"]);
    let web1 = vm(&s, &t, "web1", &["front"]);
    let web2 = vm(&s, &t, "web2", &["front", "back,ip=10.40.2.9"]);
    // Every NIC's address is in the status, in order; the first is internalIP.
    let ips = until(&s, &t, &format!("virtual_machines/{web2}"), "listing both NICs", |v| v["status"]["internalIPs"].is_array()).await;
    assert_eq!(ips["status"]["internalIPs"], json!(["10.40.1.3", "10.40.2.9"]), "{ips}");
    assert_eq!(ips["status"]["internalIP"], "10.40.1.3");

    // An external IP answers with web1's page, then with web2's once moved.
    let pools = s.cli_json(&t, &["external-ip", "pools"]);
    assert_eq!(pools["items"][0]["id"], "default", "{pools}");
    assert!(pools["items"][0]["spec"].get("cidrs").is_none(), "tenants do not see the ranges: {pools}");
    let ip = s.cli_json(&t, &["external-ip", "create", "pub"]);
    let (ip_id, addr) = (ip["id"].as_str().unwrap().to_owned(), ip["status"]["address"].as_str().unwrap().to_owned());
    assert_eq!(ip["status"]["state"], "EXTERNAL_IP_STATE_ALLOCATED");
    let att = s.cli_json(&t, &["external-ip", "attach", "pub", "--vm", "web1"]);
    assert_eq!(att["spec"]["compute_instance"], json!({"id": web1}), "OSAC's typed reference: {att}");
    until_page(&s, &addr, "web1").await;
    until(&s, &t, &format!("virtual_machines/{web1}"), "showing the external IP", |v| v["status"]["externalIP"] == addr.as_str()).await;
    until(&s, &t, &format!("external_ips/{ip_id}"), "attached", |v| v["status"]["attached"] == true).await;
    let busy = refused(&s, &t, Method::DELETE, &format!("external_ips/{ip_id}"), None, 409).await;
    assert!(busy.contains("external IP attachment") && busy.contains("pub"), "{busy}");
    s.cli_json(&t, &["external-ip", "attach", "pub", "--vm", "web2"]);
    until_page(&s, &addr, "web2").await;
    until(&s, &t, &format!("virtual_machines/{web2}"), "showing the external IP", |v| v["status"]["externalIP"] == addr.as_str()).await;
    let web1_now =
        until(&s, &t, &format!("virtual_machines/{web1}"), "back on its own address", |v| v["status"]["externalIP"] != addr.as_str()).await;
    assert_ne!(page_of(web1_now["status"]["externalIP"].as_str().unwrap()).await, None, "web1 still answers on its own address");
    s.cli_json(&t, &["external-ip", "detach", "pub"]);
    until(&s, &t, &format!("external_ips/{ip_id}"), "detached", |v| v["status"]["attached"] == false).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while page_of(&addr).await.is_some() {
        assert!(Instant::now() < deadline, "{addr} still answers after the detach");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    // A load balancer spreads over both, and skips web2 once it is stopped.
    let lb =
        s.cli_json(&t, &["load-balancer", "create", "lb", "--subnet", "front", "--target", "web1", "--target", "web2", "--port", "80"]);
    let (lb_id, lb_addr) = (lb["id"].as_str().unwrap().to_owned(), lb["status"]["address"].as_str().unwrap().to_owned());
    assert_ne!(lb_addr, addr);
    until(&s, &t, &format!("load_balancers/{lb_id}"), "READY with two healthy targets", |v| {
        v["status"]["state"] == "LOAD_BALANCER_STATE_READY" && v["status"]["healthy_targets"].as_array().map(Vec::len) == Some(2)
    })
    .await;
    let mut seen = BTreeSet::new();
    for _ in 0..8 {
        seen.extend(page_of(&lb_addr).await);
    }
    assert_eq!(seen, BTreeSet::from(["web1".to_owned(), "web2".to_owned()]), "connections are spread over both");
    let out = s.cli(&t, &["vm", "stop", "web2", "--wait", "--timeout", "2m"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    until(&s, &t, &format!("load_balancers/{lb_id}"), "down to web1", |v| v["status"]["healthy_targets"] == json!([web1])).await;
    for _ in 0..6 {
        assert_eq!(page_of(&lb_addr).await.as_deref(), Some("web1"), "a stopped target gets no connection");
    }

    // In use: the subnet counts its users and cannot go. Bad input: 400s naming the field.
    let front = format!("subnets/{}", lb["spec"]["subnet"].as_str().unwrap());
    until(&s, &t, &front, "counting two VMs and the load balancer", |v| v["status"]["users"] == 3).await;
    let busy = refused(&s, &t, Method::DELETE, &format!("subnets/{}", lb["spec"]["subnet"].as_str().unwrap()), None, 409).await;
    assert!(busy.contains("2 virtual machine(s): web1, web2; 1 load balancer(s): lb"), "{busy}");
    let bad = |spec: Value| Some(json!({"object": {"metadata": {"name": "bad"}, "spec": spec}}));
    let m = json!([{"protocol": "PROTOCOL_TCP", "external_port": 80, "internal_port": 80}]);
    let e =
        refused(&s, &t, Method::POST, "load_balancers", bad(json!({"subnet": "back", "targets": ["web1"], "port_mappings": m})), 400).await;
    assert!(e.contains("object.spec.targets[0]") && e.contains("no NIC on subnet"), "{e}");
    let ports = json!([{"external_port": 0, "internal_port": 70000}]);
    let e = refused(&s, &t, Method::POST, "load_balancers", bad(json!({"subnet": "front", "port_mappings": ports})), 400).await;
    assert!(e.contains("object.spec.port_mappings[0].external_port") && e.contains("object.spec.port_mappings[0].internal_port"), "{e}");
    let e = refused(&s, &t, Method::POST, "external_ips", bad(json!({"pool": "nope"})), 400).await;
    assert!(e.contains("object.spec.pool"), "{e}");
    let e = refused(&s, &t, Method::POST, "external_ip_attachments", bad(json!({"external_ip": "pub", "compute_instance": "ghost"})), 400)
        .await;
    assert!(e.contains("object.spec.compute_instance") && e.contains("ghost"), "{e}");

    // Another tenant sees none of it and cannot use it.
    let other = s.token("globex", false);
    refused(&s, &other, Method::GET, &format!("load_balancers/{lb_id}"), None, 404).await;
    let e = refused(&s, &other, Method::POST, "external_ip_attachments", bad(json!({"external_ip": ip_id, "compute_instance": web1})), 400)
        .await;
    assert!(e.contains("object.spec.external_ip"), "{e}");

    // Deleting the load balancer frees its address; the IP can go once detached.
    s.cli_json(&t, &["load-balancer", "delete", "lb"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while page_of(&lb_addr).await.is_some() {
        assert!(Instant::now() < deadline, "{lb_addr} still answers after the delete");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    s.cli_json(&t, &["external-ip", "delete", "pub"]);
    until(&s, &t, &front, "counting the two VMs only", |v| v["status"]["users"] == 2).await;
}

/// Traffic to an external IP and through a load balancer enters a VM on a
/// subnet through its subnet NIC, where its security groups apply: a group
/// without port 80 closes both paths (the balancer's probe finds the target
/// unhealthy), and a rule added live opens both, without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn security_groups_guard_external_ips_and_load_balancers() {
    let s = Server::start_qemu().await;
    publish(&s, TINY);
    let t = s.token("acme", false);
    s.cli_json(&t, &["network", "create", "lab", "--cidr", "10.41.0.0/16"]);
    s.cli_json(&t, &["subnet", "create", "front", "--network", "lab", "--cidr", "10.41.1.0/24"]);
    s.cli_json(&t, &["security-group", "create", "guarded", "--network", "lab", "--ingress", "tcp:22", "--egress", "all"]);
    let web = vm(&s, &t, "web", &["front,sg=guarded"]);
    let ip = s.cli_json(&t, &["external-ip", "create", "pub"]);
    let addr = ip["status"]["address"].as_str().unwrap().to_owned();
    s.cli_json(&t, &["external-ip", "attach", "pub", "--vm", "web"]);
    until(&s, &t, &format!("virtual_machines/{web}"), "showing the external IP", |v| v["status"]["externalIP"] == addr.as_str()).await;
    let lb = s.cli_json(&t, &["load-balancer", "create", "lb", "--subnet", "front", "--target", "web", "--port", "80"]);
    let (lb_id, lb_addr) = (lb["id"].as_str().unwrap().to_owned(), lb["status"]["address"].as_str().unwrap().to_owned());
    until(&s, &t, &format!("load_balancers/{lb_id}"), "probed, web unhealthy", |v| {
        v["status"]["state"].is_string() && v["status"]["healthy_targets"] == json!([])
    })
    .await;
    // Port 80 is not allowed: neither path answers (the guest's page is served on 80).
    for _ in 0..3 {
        assert_eq!(page_of(&addr).await, None, "the external IP passed a security group without port 80");
        assert_eq!(page_of(&lb_addr).await, None, "the load balancer passed a security group without port 80");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // A rule added live opens both.
    s.cli_json(&t, &["security-group", "set-rules", "guarded", "--ingress", "tcp:22", "--ingress", "tcp:80", "--egress", "all"]);
    until_page(&s, &addr, "web").await;
    until(&s, &t, &format!("load_balancers/{lb_id}"), "web healthy", |v| v["status"]["healthy_targets"] == json!([web])).await;
    until_page(&s, &lb_addr, "web").await;
}

/// An external IP is never given an address another process of the host
/// holds (a second server, a demo beside a test run): it is skipped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_another_process_holds_is_never_handed_out() {
    let s = Server::start_qemu().await;
    let (admin, t) = (s.token("ops", true), s.token("acme", false));
    let (_, pools) = s.raw(Method::GET, &format!("{V1}/external_ip_pools"), Some(&admin), None).await;
    let cidr = pools["items"][0]["spec"]["cidrs"][0].as_str().unwrap().to_owned();
    let network: std::net::Ipv4Addr = cidr.split('/').next().unwrap().parse().unwrap();
    let first = std::net::Ipv4Addr::from(u32::from(network) + 1);
    let held = std::net::TcpListener::bind((first, 0)).unwrap();
    let body = json!({"object": {"metadata": {"name": "pub"}, "spec": {}}});
    let (st, ip) = s.raw(Method::POST, &format!("{V1}/external_ips"), Some(&t), Some(body)).await;
    assert_eq!(st, 201, "{ip}");
    assert_eq!(ip["object"]["status"]["address"], std::net::Ipv4Addr::from(u32::from(first) + 1).to_string(), "{first} is held: {ip}");
    drop(held);
    let body = json!({"object": {"metadata": {"name": "next"}, "spec": {}}});
    let (_, ip) = s.raw(Method::POST, &format!("{V1}/external_ips"), Some(&t), Some(body)).await;
    assert_eq!(ip["object"]["status"]["address"], first.to_string(), "free again once let go: {ip}");
}
