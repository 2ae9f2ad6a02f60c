//! OSAC's metadata on every kind: labels and annotations given at create,
//! replaced on PATCH (and only when given), checked as Kubernetes checks
//! them, kept across a restart of the server, selected by `filter`; the
//! owner as both APIs name it (`tenant`, `tenants`, `creators`, `creator`);
//! networks and subnets take new labels but keep their spec. SQLite and PostgreSQL.

use reqwest::Method;
use serde_json::json;
use vmaas_tests::vms::V1;
use vmaas_tests::{Db, Server, on_both_databases};

const SEED: &str = "id: tiny\nspec_defaults:\n  memory: 128Mi\n";

on_both_databases! {
    async fn labels_are_kept_changed_checked_and_selected(db: Db) {
        let Some(mut s) = Server::start(db).await else { return };
        let a = s.token("acme", false);
        vmaas_tests::vms::publish(&s, SEED);
        let vm = |n: &str, env: &str| json!({"metadata": {"name": n, "labels": {"env": env, "app.kubernetes.io/name": "web"},
            "annotations": {"example.com/owner": "team a: ops"}}, "spec": {"template": "tiny", "state": "stopped"}});
        let (st, prod) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&a), Some(vm("p1", "prod"))).await;
        assert_eq!(st, 201, "{prod}");
        let (st, _) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&a), Some(vm("d1", "dev"))).await;
        assert_eq!(st, 201);
        let meta = &prod["metadata"];
        assert_eq!(meta["labels"], json!({"env": "prod", "app.kubernetes.io/name": "web"}));
        assert_eq!(meta["annotations"]["example.com/owner"], "team a: ops");
        assert_eq!((meta["tenant"].as_str(), &meta["tenants"]), (Some("acme"), &json!(["acme"])));
        assert_eq!(meta["creator"], meta["creators"][0]);
        let id = prod["id"].as_str().unwrap().to_owned();

        // Selected by label, through both views.
        for (path, filter) in [
            ("virtual_machines", "this.metadata.labels['env'] == 'prod'"),
            ("compute_instances", "'env' in this.metadata.labels && this.metadata.labels.env != 'dev'"),
        ] {
            let q = format!("{V1}/{path}?filter={}", urlencode(filter));
            let (st, page) = s.raw(Method::GET, &q, Some(&a), None).await;
            assert_eq!(st, 200, "{page}");
            let names: Vec<&str> = page["items"].as_array().unwrap().iter().map(|i| i["metadata"]["name"].as_str().unwrap()).collect();
            assert_eq!(names, ["p1"], "{path}");
        }

        // A PATCH replaces the labels it gives and keeps the annotations it does not.
        let (st, changed) = s.raw(Method::PATCH, &format!("{V1}/virtual_machines/{id}"), Some(&a),
            Some(json!({"metadata": {"labels": {"env": "staging"}}}))).await;
        assert_eq!(st, 200, "{changed}");
        assert_eq!(changed["metadata"]["labels"], json!({"env": "staging"}));
        assert_eq!(changed["metadata"]["annotations"]["example.com/owner"], "team a: ops");
        assert_eq!(changed["metadata"]["version"], prod["metadata"]["version"].as_i64().unwrap() + 1);

        // With an update_mask (grpc-gateway's form), only the masked fields change.
        let whole = json!({"object": {"id": id, "metadata": {"labels": {"env": "qa"}}, "spec": {"template": "tiny", "state": "running"}}});
        let (st, masked) = s.raw(Method::PATCH, &format!("{V1}/virtual_machines/{id}?update_mask=metadata.labels"), Some(&a), Some(whole)).await;
        assert_eq!(st, 200, "{masked}");
        assert_eq!(masked["object"]["metadata"]["labels"], json!({"env": "qa"}));
        assert_eq!(masked["object"]["spec"]["state"], "stopped", "the unmasked state did not change");
        let (st, masked) = s.raw(Method::PATCH, &format!("{V1}/virtual_machines/{id}?update_mask=metadata.labels"), Some(&a),
            Some(json!({"metadata": {"labels": {"env": "staging"}}}))).await;
        assert_eq!(st, 200, "{masked}");

        // Bad keys and values are named; nothing changes.
        let bad = json!({"metadata": {"labels": {"Bad Key": "x", "ok": "no spaces allowed"}}});
        let (st, err) = s.raw(Method::PATCH, &format!("{V1}/virtual_machines/{id}"), Some(&a), Some(bad)).await;
        assert_eq!(st, 400, "{err}");
        let fields: Vec<&str> = err["details"].as_array().unwrap().iter().map(|d| d["field"].as_str().unwrap()).collect();
        assert_eq!(fields, ["object.metadata.labels.Bad Key", "object.metadata.labels.ok"]);
        let (_, now) = s.raw(Method::GET, &format!("{V1}/virtual_machines/{id}"), Some(&a), None).await;
        assert_eq!(now["object"]["metadata"]["labels"], json!({"env": "staging"}));

        // Networks and subnets take labels; their spec stays.
        let (st, net) = s.raw(Method::POST, &format!("{V1}/virtual_networks"), Some(&a),
            Some(json!({"metadata": {"name": "n1", "labels": {"tier": "db"}}, "spec": {"ipv4_cidr": "10.9.0.0/16"}}))).await;
        assert_eq!(st, 201, "{net}");
        let nid = net["id"].as_str().unwrap().to_owned();
        let (st, relabelled) = s.raw(Method::PATCH, &format!("{V1}/virtual_networks/{nid}"), Some(&a),
            Some(json!({"metadata": {"labels": {"tier": "web"}}, "spec": {"ipv4_cidr": "10.9.0.0/16"}}))).await;
        assert_eq!(st, 200, "{relabelled}");
        assert_eq!(relabelled["metadata"]["labels"], json!({"tier": "web"}));
        let (st, err) = s.raw(Method::PATCH, &format!("{V1}/virtual_networks/{nid}"), Some(&a),
            Some(json!({"spec": {"ipv4_cidr": "10.8.0.0/16"}}))).await;
        assert_eq!(st, 400, "{err}");
        assert_eq!(err["details"][0]["field"], "object.spec.ipv4_cidr");

        // Kept across a restart (read back from the database).
        s.restart().await;
        let (_, after) = s.raw(Method::GET, &format!("{V1}/virtual_machines/{id}"), Some(&a), None).await;
        assert_eq!(after["object"]["metadata"]["labels"], json!({"env": "staging"}));
        assert_eq!(after["object"]["metadata"]["annotations"]["example.com/owner"], "team a: ops");
        let (_, net) = s.raw(Method::GET, &format!("{V1}/virtual_networks/{nid}"), Some(&a), None).await;
        assert_eq!(net["object"]["metadata"]["labels"], json!({"tier": "web"}));
    }
}

fn urlencode(s: &str) -> String {
    s.bytes().map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") }).collect()
}
