//! Subnets through the real `vmaas-server`, on SQLite and on PostgreSQL:
//! placed inside their network and overlapping no sibling, per tenant,
//! counted as users of their network; and with the qemu backend, each a
//! running segment of the switch.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::{Db, Server, on_both_databases, vms};

const NETS: &str = "/api/fulfillment/v1/virtual_networks";
const SUBNETS: &str = "/api/fulfillment/v1/subnets";

fn subnet(name: &str, network: &str, cidr: &str) -> Value {
    json!({"object": {"metadata": {"name": name}, "spec": {"virtual_network": network, "ipv4_cidr": cidr}}})
}

async fn create(s: &Server, token: &str, path: &str, body: Value) -> (u16, Value) {
    s.raw(Method::POST, path, Some(token), Some(body)).await
}

/// A 400 whose first detail names `field` with a reason containing `reason`.
fn assert_refused(st: u16, e: &Value, field: &str, reason: &str) {
    assert_eq!(st, 400, "{e}");
    assert_eq!(e["details"][0]["field"], field, "{e}");
    assert!(e["details"][0]["reason"].as_str().unwrap_or("").contains(reason), "{e}");
}

on_both_databases! {
    async fn subnets_are_placed_in_their_network_and_counted_as_its_users(db: Db) {
        let Some(s) = Server::start(db).await else { return };
        let (acme, other) = (s.token("acme", false), s.token("other", false));
        let (st, n) = create(&s, &acme, NETS, json!({"object": {"metadata": {"name": "lab"}, "spec": {"ipv4_cidr": "10.10.0.0/16"}}})).await;
        assert_eq!(st, 201, "{n}");
        let net = n["object"]["id"].as_str().unwrap().to_owned();

        // By the network's name; stored with its id.
        let (st, sn) = create(&s, &acme, SUBNETS, subnet("front", "lab", "10.10.1.0/24")).await;
        assert_eq!(st, 201, "{sn}");
        let o = &sn["object"];
        assert_eq!(o["@type"], "type.googleapis.com/osac.public.v1.Subnet");
        assert_eq!((o["spec"]["virtual_network"]["id"].as_str(), o["status"]["state"].as_str()), (Some(net.as_str()), Some("SUBNET_STATE_PENDING")));
        let front = o["id"].as_str().unwrap().to_owned();
        let failed = vms::wait_state(&s, &acme, &format!("{SUBNETS}/{front}"), "SUBNET_STATE_FAILED", 10).await;
        assert!(failed["status"]["message"].as_str().unwrap().contains("does not run subnets"), "{failed}");

        // Bad placements name the field and the reason; nothing is made.
        let (st, e) = create(&s, &acme, SUBNETS, subnet("outside", &net, "10.11.0.0/24")).await;
        assert_refused(st, &e, "object.spec.ipv4_cidr", "is not inside the network's 10.10.0.0/16");
        let (st, e) = create(&s, &acme, SUBNETS, subnet("overlap", &net, "10.10.0.0/20")).await;
        assert_refused(st, &e, "object.spec.ipv4_cidr", "overlaps subnet \"front\" (10.10.1.0/24)");
        let (st, e) = create(&s, &acme, SUBNETS, subnet("nowhere", "no-such-net", "10.10.2.0/24")).await;
        assert_refused(st, &e, "object.spec.virtual_network", "you have no virtual network \"no-such-net\"");
        let (st, e) = create(&s, &acme, SUBNETS, json!({"object": {"metadata": {"name": "x"}, "spec": {"virtual_network": "lab"}}})).await;
        assert_refused(st, &e, "object.spec.ipv4_cidr", "is required");
        let (st, page) = s.raw(Method::GET, SUBNETS, Some(&acme), None).await;
        assert_eq!((st, page["total"].as_u64()), (200, Some(1)), "{page}");

        // Another tenant can neither see nor use acme's network or subnet.
        let (st, e) = create(&s, &other, SUBNETS, subnet("steal", &net, "10.10.9.0/24")).await;
        assert_refused(st, &e, "object.spec.virtual_network", "you have no virtual network");
        let (st, _) = s.raw(Method::GET, &format!("{SUBNETS}/{front}"), Some(&other), None).await;
        assert_eq!(st, 404);
        let (st, _) = s.raw(Method::DELETE, &format!("{SUBNETS}/{front}"), Some(&other), None).await;
        assert_eq!(st, 404);

        // The network is in use while it has a subnet.
        let (st, e) = s.raw(Method::DELETE, &format!("{NETS}/{net}"), Some(&acme), None).await;
        assert_eq!(st, 409, "{e}");
        assert_eq!(e["code"], 9, "FAILED_PRECONDITION: {e}");
        assert!(e["message"].as_str().unwrap().contains("is used by 1 subnet(s): front"), "{e}");
        let (st, _) = s.raw(Method::DELETE, &format!("{SUBNETS}/{front}"), Some(&acme), None).await;
        assert_eq!(st, 202);
        let deadline = Instant::now() + Duration::from_secs(10);
        while s.raw(Method::GET, &format!("{SUBNETS}/{front}"), Some(&acme), None).await.0 != 404 {
            assert!(Instant::now() < deadline, "the subnet was not removed\n{}", s.log());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let (st, e) = s.raw(Method::DELETE, &format!("{NETS}/{net}"), Some(&acme), None).await;
        assert_eq!(st, 202, "free once its subnet is gone: {e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_qemu_backend_a_subnet_is_a_running_segment() {
    let mut s = Server::start_qemu().await;
    let t = s.token("acme", false);
    let (st, n) = create(&s, &t, NETS, json!({"object": {"metadata": {"name": "lab"}, "spec": {"ipv4_cidr": "10.20.0.0/16"}}})).await;
    assert_eq!(st, 201, "{n}");
    let (st, sn) = create(&s, &t, SUBNETS, subnet("front", "lab", "10.20.1.0/24")).await;
    assert_eq!(st, 201, "{sn}");
    let id = sn["object"]["id"].as_str().unwrap().to_owned();
    vms::wait_state(&s, &t, &format!("{SUBNETS}/{id}"), "SUBNET_STATE_READY", 10).await;
    assert!(s.log().contains("subnet segment running"), "{}", s.log());
    assert!(s.data_dir.join("subnets").join(&id).join("subnet.json").exists());
    // After a restart the segment runs again (the reconciler's first sweep).
    s.restart().await;
    let deadline = Instant::now() + Duration::from_secs(15);
    while s.log().matches("subnet segment running").count() < 2 {
        assert!(Instant::now() < deadline, "{}", s.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    vms::wait_state(&s, &t, &format!("{SUBNETS}/{id}"), "SUBNET_STATE_READY", 10).await;
}

const SGS: &str = "/api/fulfillment/v1/security_groups";

on_both_databases! {
    async fn security_groups_are_checked_replaced_and_per_tenant(db: Db) {
        let Some(s) = Server::start(db).await else { return };
        let (acme, other) = (s.token("acme", false), s.token("other", false));
        let (st, n) = create(&s, &acme, NETS, json!({"object": {"metadata": {"name": "lab"}, "spec": {"ipv4_cidr": "10.10.0.0/16"}}})).await;
        assert_eq!(st, 201, "{n}");
        let net = n["object"]["id"].as_str().unwrap().to_owned();
        let web = json!({"object": {"metadata": {"name": "web"}, "spec": {"virtual_network": "lab",
            "ingress": [{"protocol": "PROTOCOL_TCP", "port_from": 80, "port_to": 443, "ipv4_cidr": "10.10.1.0/24"}]}}});
        let (st, g) = create(&s, &acme, SGS, web).await;
        assert_eq!(st, 201, "{g}");
        let o = &g["object"];
        assert_eq!(o["@type"], "type.googleapis.com/osac.public.v1.SecurityGroup");
        assert_eq!(o["spec"]["virtual_network"], json!({"id": net}), "stored as the network's id, answered as OSAC's typed reference");
        let id = o["id"].as_str().unwrap().to_owned();
        vms::wait_state(&s, &acme, &format!("{SGS}/{id}"), "SECURITY_GROUP_STATE_READY", 10).await;

        // Bad rules name the field and the reason.
        let bad = json!({"object": {"metadata": {"name": "bad"}, "spec": {"virtual_network": "lab",
            "ingress": [{"protocol": "PROTOCOL_TCP", "port_from": 70000}], "egress": [{"protocol": "PROTOCOL_ICMP", "port_from": 1}]}}});
        let (st, e) = create(&s, &acme, SGS, bad).await;
        assert_refused(st, &e, "object.spec.ingress[0].port_from", "70000 is not a port");
        assert_eq!(e["details"][1]["field"], "object.spec.egress[0].port_from", "{e}");
        let (st, e) = create(&s, &acme, SGS, json!({"object": {"metadata": {"name": "x"}, "spec": {"virtual_network": "nope"}}})).await;
        assert_refused(st, &e, "object.spec.virtual_network", "you have no virtual network");

        // PATCH replaces the rules; a stale version is refused.
        let patch = json!({"object": {"metadata": {"version": 1}, "spec": {"ingress": [{"protocol": "PROTOCOL_ICMP"}]}}});
        let (st, v) = s.raw(Method::PATCH, &format!("{SGS}/{id}"), Some(&acme), Some(patch.clone())).await;
        assert_eq!(st, 200, "{v}");
        assert_eq!(v["object"]["spec"]["ingress"], json!([{"protocol": "PROTOCOL_ICMP"}]));
        assert_eq!(v["object"]["metadata"]["version"], 2);
        let (st, e) = s.raw(Method::PATCH, &format!("{SGS}/{id}"), Some(&acme), Some(patch)).await;
        assert_eq!(st, 409, "stale: {e}");
        let bad_patch = json!({"object": {"spec": {"egress": [{"protocol": "PROTOCOL_UDP", "port_from": 9, "port_to": 8}]}}});
        let (st, e) = s.raw(Method::PATCH, &format!("{SGS}/{id}"), Some(&acme), Some(bad_patch)).await;
        assert_refused(st, &e, "object.spec.egress[0].port_to", "below port_from");

        // Another tenant sees and changes nothing; the network is in use.
        for m in [Method::GET, Method::DELETE] {
            assert_eq!(s.raw(m, &format!("{SGS}/{id}"), Some(&other), None).await.0, 404);
        }
        let (st, e) = s.raw(Method::DELETE, &format!("{NETS}/{net}"), Some(&acme), None).await;
        assert!(st == 409 && e["message"].as_str().unwrap().contains("security group(s): web"), "{st} {e}");
        let (st, _) = s.raw(Method::DELETE, &format!("{SGS}/{id}"), Some(&acme), None).await;
        assert_eq!(st, 202);
    }
}
