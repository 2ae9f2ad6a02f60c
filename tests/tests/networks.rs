//! Virtual networks through the real `vmaas-server`, on SQLite and on PostgreSQL.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::{Db, Server, on_both_databases, vms};

const NETS: &str = "/api/fulfillment/v1/virtual_networks";

fn network(name: &str, cidr: &str) -> Value {
    json!({"object": {"metadata": {"name": name}, "spec": {"ipv4_cidr": cidr}}})
}

on_both_databases! {
    async fn networks_are_per_tenant_validated_and_deleted(db: Db) {
        let Some(s) = Server::start(db).await else { return };
        let acme = s.token("acme", false);
        let other = s.token("other", false);
        let (st, n) = s.raw(Method::POST, NETS, Some(&acme), Some(network("lab", "10.10.0.0/16"))).await;
        assert_eq!(st, 201, "{n}");
        let o = &n["object"];
        assert_eq!(o["@type"], "type.googleapis.com/osac.public.v1.VirtualNetwork");
        assert_eq!(o["spec"]["ipv4_cidr"], "10.10.0.0/16");
        assert_eq!(o["status"]["state"], "VIRTUAL_NETWORK_STATE_PENDING");
        let id = o["id"].as_str().unwrap().to_owned();

        // This server runs no backend that can set networks up: it says so.
        let failed = vms::wait_state(&s, &acme, &format!("{NETS}/{id}"), "VIRTUAL_NETWORK_STATE_FAILED", 10).await;
        assert!(failed["status"]["message"].as_str().unwrap().contains("the none backend does not run virtual networks"), "{failed}");

        // Bad input names the field and the reason; nothing is made.
        let (st, e) = s.raw(Method::POST, NETS, Some(&acme), Some(network("bad", "10.10.0.1/16"))).await;
        assert_eq!(st, 400, "{e}");
        assert_eq!(e["details"][0]["field"], "object.spec.ipv4_cidr");
        assert!(e["details"][0]["reason"].as_str().unwrap().contains("host bits set: the network is 10.10.0.0/16"), "{e}");
        let (st, e) = s.raw(Method::POST, NETS, Some(&acme), Some(json!({"object": {"metadata": {"name": "x"}, "spec": {"ipv4": "10.0.0.0/8"}}}))).await;
        assert_eq!(st, 400, "{e}");
        assert!(e.to_string().contains("ipv4"), "{e}");
        // A network class this backend does not offer is refused by name.
        let classed = json!({"object": {"metadata": {"name": "phys"}, "spec": {"ipv4_cidr": "10.12.0.0/16", "network_class": "lab"}}});
        let (st, e) = s.raw(Method::POST, NETS, Some(&acme), Some(classed)).await;
        assert_eq!((st, &e["details"][0]["field"]), (400, &json!("object.spec.network_class")), "{e}");
        assert!(e["details"][0]["reason"].as_str().unwrap().contains("not offered by the none backend (it offers none)"), "{e}");
        let (st, _) = s.raw(Method::POST, NETS, Some(&acme), Some(network("lab", "10.11.0.0/16"))).await;
        assert_eq!(st, 409, "the name is taken");

        // Another tenant sees nothing and can touch nothing.
        let (st, _) = s.raw(Method::GET, &format!("{NETS}/{id}"), Some(&other), None).await;
        assert_eq!(st, 404);
        let (st, _) = s.raw(Method::DELETE, &format!("{NETS}/{id}"), Some(&other), None).await;
        assert_eq!(st, 404);
        let (_, list) = s.raw(Method::GET, NETS, Some(&other), None).await;
        assert_eq!(list["total"], 0);
        let (st, list) = s.raw(Method::GET, &format!("{NETS}?state=failed&name=lab"), Some(&acme), None).await;
        assert_eq!(st, 200, "{list}");
        assert_eq!(list["total"], 1, "{list}");
        let (st, e) = s.raw(Method::GET, &format!("{NETS}?state=sleepy"), Some(&acme), None).await;
        assert_eq!(st, 400, "{e}");

        let (st, d) = s.raw(Method::DELETE, &format!("{NETS}/{id}"), Some(&acme), None).await;
        assert_eq!(st, 202, "{d}");
        assert!(d["object"]["metadata"]["deletion_timestamp"].is_string());
        let deadline = Instant::now() + Duration::from_secs(10);
        while s.raw(Method::GET, &format!("{NETS}/{id}"), Some(&acme), None).await.0 != 404 {
            assert!(Instant::now() < deadline, "not deleted:\n{}", s.log());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let (st, _) = s.raw(Method::POST, NETS, Some(&acme), Some(network("lab", "10.10.0.0/16"))).await;
        assert_eq!(st, 201, "the name is free again");
    }
}
