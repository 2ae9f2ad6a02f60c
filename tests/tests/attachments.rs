//! VMs with NICs on subnets, end to end with real guests: created through
//! the `vmaas` CLI (`--subnet NAME[,ip=ADDR][,sg=GROUP]`), addressed by the
//! server's IPAM (or as asked), and connected by the user-space switch: two
//! VMs on one subnet fetch each other's page through `vmaas vm console`; a
//! VM on another network with the same range reaches nothing of theirs; a
//! security group without the port blocks it and a rule added opens it,
//! without a restart; the guests' NICs come back on their ports (loopback
//! TCP, the numbers kept) after the server is killed and started again; a
//! subnet or group in use cannot be deleted. Every address a guest is
//! asked to reach is on its own subnet.

use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::Server;
use vmaas_tests::vms::{self, TINY, V1, get, publish};

async fn post(s: &Server, t: &str, path: &str, body: Value) -> Value {
    let (st, v) = s.raw(Method::POST, &format!("{V1}/{path}"), Some(t), Some(body)).await;
    assert_eq!(st, 201, "{v}");
    v
}

/// A network and a subnet of it, made with the CLI, READY.
async fn subnet(s: &Server, t: &str, network: &str, name: &str, cidr: &str) -> String {
    s.cli_json(t, &["network", "create", network, "--cidr", "10.30.0.0/16"]);
    let sn = s.cli_json(t, &["subnet", "create", name, "--network", network, "--cidr", cidr]);
    let id = sn["id"].as_str().unwrap().to_owned();
    vms::wait_state(s, t, &format!("{V1}/subnets/{id}"), "SUBNET_STATE_READY", 15).await;
    id
}

/// `vmaas vm create NAME -t tiny --subnet SPEC --wait`; returns the VM's id.
fn create(s: &Server, t: &str, name: &str, subnet: &str) -> String {
    let out = s.cli(t, &["vm", "create", name, "-t", "tiny", "--subnet", subnet, "--wait", "--timeout", "5m", "-o", "json"]);
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stderr), s.log());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    v["id"].as_str().or(v["object"]["id"].as_str()).unwrap().to_owned()
}

/// Runs `line` on VM `name`'s console through the CLI, reading until the
/// guest is quiet for 7 s (longer than any timeout the lines use); returns
/// what it printed.
fn console(s: &Server, t: &str, name: &str, line: &str) -> String {
    let out = s.cli_with_stdin(t, &["vm", "console", name, "--batch", "--idle", "7s"], format!("{line}\n").as_bytes());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Fetches `ip`'s page from VM `from`, a few times (the first ARP may be slow); true if it named `host`.
fn fetches(s: &Server, t: &str, from: &str, ip: &str, host: &str) -> bool {
    let cmd = format!("timeout 5 wget -O- http://{ip}/ 2>/dev/null | sed -n 's/.*test guest \\([a-z]*\\)<.*/PAGE-OF-\\1/p'");
    (0..3).any(|_| console(s, t, from, &cmd).contains(&format!("PAGE-OF-{host}")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vms_on_one_subnet_reach_each_other_and_nothing_else() {
    let mut s = Server::start_qemu().await;
    publish(&s, TINY);
    let t = s.token("acme", false);
    let front = subnet(&s, &t, "lab", "front", "10.30.1.0/24").await;
    subnet(&s, &t, "other", "back", "10.30.1.0/24").await;

    let icmp = s.cli_json(&t, &["security-group", "create", "icmp-only", "--network", "lab", "--ingress", "icmp"]);
    assert_eq!(icmp["spec"]["ingress"], json!([{"protocol": "PROTOCOL_ICMP"}]));
    let icmp = icmp["id"].as_str().unwrap().to_owned();
    post(&s, &t, "security_groups", json!({"object": {"metadata": {"name": "elsewhere"}, "spec": {"virtual_network": "other"}}})).await;

    let a = create(&s, &t, "alpha", "front");
    let b = create(&s, &t, "beta", "front,ip=10.30.1.50");
    let c = create(&s, &t, "gamma", "back");
    create(&s, &t, "delta", "front,ip=10.30.1.60,sg=icmp-only");
    let (_, va) = get(&s, &t, &a).await;
    let (_, vb) = get(&s, &t, &b).await;
    let (_, vc) = get(&s, &t, &c).await;
    // The server's IPAM: the first VM address (after the gateway .1), or the one asked for.
    assert_eq!(va["object"]["status"]["internalIP"], "10.30.1.2", "{va}");
    assert_eq!(va["object"]["spec"]["network_attachments"][0], json!({"subnet": front, "ip_address": "10.30.1.2"}));
    assert_eq!(vb["object"]["status"]["internalIP"], "10.30.1.50", "{vb}");
    assert_eq!(vc["object"]["status"]["internalIP"], "10.30.1.2", "another network: the same address is free there");

    assert!(fetches(&s, &t, "alpha", "10.30.1.50", "beta"), "alpha cannot reach beta on their subnet\n{}", s.log());
    assert!(fetches(&s, &t, "beta", "10.30.1.2", "alpha"), "beta cannot reach alpha");
    let isolated =
        console(&s, &t, "gamma", "timeout 5 wget -O- http://10.30.1.50/ >/dev/null 2>&1 && echo REACH\"ED\" || echo ISO\"LATED\"");
    assert!(isolated.contains("ISOLATED") && !isolated.contains("REACHED"), "gamma reached another network: {isolated}");

    // delta's group lets ICMP in, not HTTP; a rule added opens HTTP at once.
    let ping = console(&s, &t, "alpha", "ping -c 1 -W 3 10.30.1.60 >/dev/null && echo PING\"OK\"");
    assert!(ping.contains("PINGOK"), "ICMP is allowed: {ping}");
    let blocked = console(&s, &t, "alpha", "timeout 5 wget -O- http://10.30.1.60/ >/dev/null 2>&1 && echo REACH\"ED\" || echo BLOCK\"ED\"");
    assert!(blocked.contains("BLOCKED") && !blocked.contains("REACHED"), "HTTP must be blocked: {blocked}");
    let v = s.cli_json(&t, &["security-group", "set-rules", "icmp-only", "--ingress", "icmp", "--ingress", "tcp:80@10.30.1.0/24"]);
    assert_eq!(v["spec"]["ingress"][1], json!({"protocol": "PROTOCOL_TCP", "port_from": 80, "ipv4_cidr": "10.30.1.0/24"}), "{v}");
    assert!(fetches(&s, &t, "alpha", "10.30.1.60", "delta"), "the added rule did not open HTTP\n{}", s.log());

    // A crashed server serves every NIC again on its port; the running QEMUs reconnect.
    let state: Value = serde_json::from_slice(&std::fs::read(s.data_dir.join(format!("vms/{a}/vm.json"))).unwrap()).unwrap();
    let port = state["nic_ports"][0].as_u64().expect("alpha's NIC port is kept in its state file");
    s.kill9().await;
    s.relaunch().await;
    vms::wait_ready(&s, &t, &a).await;
    assert!(fetches(&s, &t, "alpha", "10.30.1.50", "beta"), "alpha's NIC did not come back after a restart\n{}", s.log());
    let state: Value = serde_json::from_slice(&std::fs::read(s.data_dir.join(format!("vms/{a}/vm.json"))).unwrap()).unwrap();
    assert_eq!(state["nic_ports"][0].as_u64(), Some(port), "served on the same port");

    // Bad attachments name the field and the reason; nothing is made.
    for (spec, field, reason) in [
        (json!([{"subnet": "front", "ip_address": "10.30.1.50"}]), "object.spec.network_attachments[0].ip_address", "is taken"),
        (json!([{"subnet": "front", "ip_address": "10.30.2.9"}]), "object.spec.network_attachments[0].ip_address", "is not a VM address"),
        (json!([{"subnet": "nope"}]), "object.spec.network_attachments[0].subnet", "you have no subnet"),
        (
            json!([{"subnet": "front", "security_groups": ["web"]}]),
            "object.spec.network_attachments[0].security_groups[0]",
            "you have no security group",
        ),
        (
            json!([{"subnet": "front", "security_groups": ["elsewhere"]}]),
            "object.spec.network_attachments[0].security_groups[0]",
            "is for another virtual network",
        ),
        (json!([{"subnet": "front"}, {"subnet": "front"}]), "object.spec.network_attachments[1].subnet", "already has a NIC"),
    ] {
        let body = json!({"object": {"metadata": {"name": "bad"}, "spec": {"template": "tiny", "network_attachments": spec}}});
        let (st, e) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(body)).await;
        assert_eq!(st, 400, "{e}");
        assert_eq!(e["details"][0]["field"], field, "{e}");
        assert!(e["details"][0]["reason"].as_str().unwrap().contains(reason), "{e}");
    }
    let (_, page) = s.raw(Method::GET, &format!("{V1}/virtual_machines"), Some(&t), None).await;
    assert_eq!(page["total"], 4, "nothing half-made");

    // Another tenant cannot attach to acme's subnet.
    let other = s.token("globex", false);
    let body = json!({"object": {"metadata": {"name": "spy"}, "spec": {"template": "tiny", "network_attachments": [{"subnet": front}]}}});
    let (st, e) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&other), Some(body)).await;
    assert_eq!((st, e["details"][0]["field"].as_str()), (400, Some("object.spec.network_attachments[0].subnet")), "{e}");

    // A subnet in use cannot be deleted; the refusal names its VMs (the CLI says so too).
    let out = s.cli(&t, &["subnet", "delete", "front"]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("is used by 3 virtual machine(s)"), "{out:?}");
    let (st, e) = s.raw(Method::DELETE, &format!("{V1}/subnets/{front}"), Some(&t), None).await;
    assert_eq!(st, 409, "{e}");
    let msg = e["message"].as_str().unwrap();
    assert!(msg.contains("is used by 3 virtual machine(s)") && msg.contains("alpha") && msg.contains("beta"), "{e}");
    let (st, e) = s.raw(Method::DELETE, &format!("{V1}/security_groups/{icmp}"), Some(&t), None).await;
    assert_eq!(st, 409, "a group in use: {e}");
    assert!(e["message"].as_str().unwrap().contains("delta"), "{e}");
}
