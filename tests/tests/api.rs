//! The API, served by the real `vmaas-server` binary, on SQLite and on PostgreSQL.

use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::{Db, Server, on_both_databases, seed};

const V1: &str = "/api/fulfillment/v1";

on_both_databases! {
    async fn seed_examples_work_as_written(db: Db) {
        let Some(s) = Server::start(db).await else { return };
        let admin = s.token("ops", true);
        let guest = s.token("guest", false);
        let (st, t) = s.raw(Method::POST, &format!("{V1}/virtual_machine_templates"), Some(&admin), Some(seed::template())).await;
        assert_eq!(st, 201, "{t}");
        assert_eq!(t["object"]["id"], "simple_vm");
        assert_eq!(t["object"]["parameters"][1]["default"]["value"], "2Gi");

        let (st, vm) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&guest), Some(seed::vm("myvm"))).await;
        assert_eq!(st, 201, "{vm}");
        let o = &vm["object"];
        assert_eq!(o["@type"], "type.googleapis.com/fulfillment.v1.VirtualMachine");
        let id = o["id"].as_str().unwrap();
        assert!(uuid::Uuid::parse_str(id).is_ok(), "id {id} is a UUID");
        assert_eq!(o["metadata"]["name"], "myvm");
        assert_eq!(o["metadata"]["tenant"], "guest");
        assert_eq!(o["metadata"]["creators"], json!(["guest"]));
        assert!(o["metadata"]["creation_timestamp"].as_str().unwrap().ends_with('Z'));
        assert_eq!(o["spec"]["template_parameters"]["vm_memory"]["value"], "4Gi");
        assert_eq!(o["spec"]["template_parameters"]["vm_cpu_cores"]["value"], 4);
        let types: Vec<&str> = o["status"]["conditions"].as_array().unwrap().iter().map(|c| c["type"].as_str().unwrap()).collect();
        assert_eq!(types, [
            "VIRTUAL_MACHINE_CONDITION_TYPE_PROGRESSING",
            "VIRTUAL_MACHINE_CONDITION_TYPE_READY",
            "VIRTUAL_MACHINE_CONDITION_TYPE_FAILED",
            "VIRTUAL_MACHINE_CONDITION_TYPE_DEGRADED",
        ]);
        assert_eq!(o["status"]["state"], "VIRTUAL_MACHINE_STATE_PROGRESSING");

        let (st, got) = s.raw(Method::GET, &format!("{V1}/virtual_machines/{id}"), Some(&guest), None).await;
        assert_eq!(st, 200);
        assert_eq!(got["object"]["spec"], o["spec"]);
        // The none backend reports why nothing runs.
        let mut reason = Value::Null;
        for _ in 0..50 {
            let (_, got) = s.raw(Method::GET, &format!("{V1}/virtual_machines/{id}"), Some(&guest), None).await;
            reason = got["object"]["status"]["conditions"][0]["reason"].clone();
            if reason == "NoBackend" { break }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        assert_eq!(reason, "NoBackend");
    }
}

on_both_databases! {
    async fn tenants_never_see_each_other(db: Db) {
        let Some(s) = Server::start(db).await else { return };
        let admin = s.token("ops", true);
        let a = s.token("acme", false);
        let b = s.token("globex", false);
        seed::publish(&s, &admin).await;
        let (_, vm) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&a), Some(seed::vm("web"))).await;
        let id = vm["object"]["id"].as_str().unwrap().to_owned();
        // Same name in another tenant is fine.
        let (st, _) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&b), Some(seed::vm("web"))).await;
        assert_eq!(st, 201);

        for (method, body) in [(Method::GET, None), (Method::PATCH, Some(json!({"object": {"spec": {"state": "stopped"}}}))), (Method::DELETE, None)] {
            let (st, err) = s.raw(method.clone(), &format!("{V1}/virtual_machines/{id}"), Some(&b), body).await;
            assert_eq!(st, 404, "{method} {err}");
            assert_eq!(err["code"], 5);
            assert_eq!(err["message"], format!("virtual machine \"{id}\" not found"));
        }
        // A missing id gets the very same answer.
        let missing = uuid::Uuid::new_v4();
        let (st, err) = s.raw(Method::GET, &format!("{V1}/virtual_machines/{missing}"), Some(&b), None).await;
        assert_eq!(st, 404);
        assert_eq!(err["message"], format!("virtual machine \"{missing}\" not found"));

        let (_, list_b) = s.raw(Method::GET, &format!("{V1}/virtual_machines"), Some(&b), None).await;
        assert_eq!(list_b["total"], 1);
        assert_eq!(list_b["items"][0]["metadata"]["tenant"], "globex");
        let (_, list_admin) = s.raw(Method::GET, &format!("{V1}/virtual_machines"), Some(&admin), None).await;
        assert_eq!(list_admin["total"], 2);
        // The owner still has it, untouched.
        let (st, mine) = s.raw(Method::GET, &format!("{V1}/virtual_machines/{id}"), Some(&a), None).await;
        assert_eq!(st, 200);
        assert_eq!(mine["object"]["spec"]["state"], "started");
        assert!(mine["object"]["metadata"].get("deletion_timestamp").is_none());
    }
}

on_both_databases! {
    async fn authentication_and_roles(db: Db) {
        let Some(s) = Server::start(db).await else { return };
        let tenant = s.token("acme", false);
        let (st, err) = s.raw(Method::GET, &format!("{V1}/virtual_machines"), None, None).await;
        assert_eq!(st, 401);
        assert_eq!(err["code"], 16);
        assert!(err["message"].as_str().unwrap().contains("missing Authorization header"), "{err}");
        let (st, err) = s.raw(Method::GET, &format!("{V1}/virtual_machines"), Some("not.a.jwt"), None).await;
        assert_eq!(st, 401);
        assert!(err["message"].as_str().unwrap().contains("invalid bearer token"), "{err}");
        // A token signed by another server's key.
        let Some(other) = Server::start(Db::Sqlite).await else { return };
        let foreign = other.token("acme", true);
        let (st, err) = s.raw(Method::GET, &format!("{V1}/virtual_machine_templates"), Some(&foreign), None).await;
        assert_eq!(st, 401);
        assert!(err["message"].as_str().unwrap().contains("signature"), "{err}");

        for (method, path) in [
            (Method::POST, format!("{V1}/virtual_machine_templates")),
            (Method::PUT, format!("{V1}/virtual_machine_templates/simple_vm")),
            (Method::DELETE, format!("{V1}/virtual_machine_templates/simple_vm")),
        ] {
            let (st, err) = s.raw(method.clone(), &path, Some(&tenant), Some(seed::template())).await;
            assert_eq!(st, 403, "{method} {path}: {err}");
            assert_eq!(err["code"], 7);
        }
        let (st, list) = s.raw(Method::GET, &format!("{V1}/virtual_machine_templates"), Some(&tenant), None).await;
        assert_eq!(st, 200);
        assert_eq!(list["total"], 0);
    }
}

on_both_databases! {
    async fn conflicts(db: Db) {
        let Some(s) = Server::start(db).await else { return };
        let admin = s.token("ops", true);
        let t = s.token("acme", false);
        seed::publish(&s, &admin).await;
        let (st, err) = s.raw(Method::POST, &format!("{V1}/virtual_machine_templates"), Some(&admin), Some(seed::template())).await;
        assert_eq!((st, err["code"].clone()), (409, json!(6)));

        let (_, vm) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(seed::vm("db"))).await;
        let id = vm["object"]["id"].as_str().unwrap().to_owned();
        let (st, err) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(seed::vm("db"))).await;
        assert_eq!(st, 409);
        assert_eq!(err["code"], 6);
        assert_eq!(err["message"], "a virtual machine named \"db\" already exists");

        // Optimistic concurrency on metadata.version.
        let patch = |v: i64, state: &str| json!({"object": {"metadata": {"version": v}, "spec": {"state": state}}});
        let (st, p1) = s.raw(Method::PATCH, &format!("{V1}/virtual_machines/{id}"), Some(&t), Some(patch(1, "stopped"))).await;
        assert_eq!(st, 200, "{p1}");
        assert_eq!(p1["object"]["metadata"]["version"], 2);
        assert_eq!(p1["object"]["spec"]["state"], "stopped");
        let (st, err) = s.raw(Method::PATCH, &format!("{V1}/virtual_machines/{id}"), Some(&t), Some(patch(1, "started"))).await;
        assert_eq!(st, 409, "{err}");
        assert_eq!(err["code"], 10);
        assert!(err["message"].as_str().unwrap().contains("version 1 is not current (it is 2)"), "{err}");
        // The losing update changed nothing.
        let (_, now) = s.raw(Method::GET, &format!("{V1}/virtual_machines/{id}"), Some(&t), None).await;
        assert_eq!(now["object"]["spec"]["state"], "stopped");
        // Parameters change through PATCH and are re-validated.
        let (st, err) = s.raw(Method::PATCH, &format!("{V1}/virtual_machines/{id}"), Some(&t),
            Some(json!({"object": {"spec": {"template_parameters": {"vm_memory": {"value": "lots"}}}}}))).await;
        assert_eq!(st, 400, "{err}");
        assert_eq!(err["details"][0]["field"], "object.spec.template_parameters.vm_memory.value");
        let (st, err) = s.raw(Method::PATCH, &format!("{V1}/virtual_machines/{id}"), Some(&t),
            Some(json!({"object": {"spec": {"template": "other"}}}))).await;
        assert_eq!(st, 400, "{err}");
        assert_eq!(err["details"][0]["field"], "object.spec.template");

        // A template in use cannot be deleted.
        let (st, err) = s.raw(Method::DELETE, &format!("{V1}/virtual_machine_templates/simple_vm"), Some(&admin), None).await;
        assert_eq!(st, 409, "{err}");
        assert_eq!(err["code"], 9);
        assert!(err["message"].as_str().unwrap().contains("used by 1 virtual machine"), "{err}");
        // Stale template update.
        let mut upd = seed::template();
        upd["object"]["title"] = json!("Renamed");
        upd["object"]["metadata"] = json!({"version": 1});
        let (st, ok) = s.raw(Method::PUT, &format!("{V1}/virtual_machine_templates/simple_vm"), Some(&admin), Some(upd.clone())).await;
        assert_eq!(st, 200, "{ok}");
        assert_eq!(ok["object"]["metadata"]["version"], 2);
        let (st, err) = s.raw(Method::PUT, &format!("{V1}/virtual_machine_templates/simple_vm"), Some(&admin), Some(upd)).await;
        assert_eq!((st, err["code"].clone()), (409, json!(10)));
    }
}

on_both_databases! {
    async fn validation_errors_name_every_field(db: Db) {
        let Some(s) = Server::start(db).await else { return };
        let admin = s.token("ops", true);
        let t = s.token("acme", false);
        seed::publish(&s, &admin).await;
        let bad = json!({"object": {"id": "Bad_Name", "spec": {"template": "simple_vm", "template_parameters": {
            "vm_cpu_cores": {"value": "4"}, "vm_memory": {"value": "4GB"}, "vm_gpu": {"value": 1}}}}});
        let (st, err) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(bad)).await;
        assert_eq!(st, 400);
        assert_eq!(err["code"], 3);
        let pairs: Vec<Value> = err["details"].as_array().unwrap().iter().map(|d| json!({"field": d["field"], "reason": d["reason"]})).collect();
        assert_eq!(Value::Array(pairs), json!([
            {"field": "object.id", "reason": "\"Bad_Name\" must contain only lowercase letters, digits and '-'"},
            {"field": "object.spec.template_parameters.vm_cpu_cores.value", "reason": "expected an integer, got the string \"4\""},
            {"field": "object.spec.template_parameters.vm_gpu", "reason": "unknown parameter \"vm_gpu\"; valid parameters are: vm_cpu_cores, vm_disk_size, vm_memory"},
            {"field": "object.spec.template_parameters.vm_memory.value", "reason": "\"4GB\" has an unknown suffix \"GB\": use one of Ki, Mi, Gi, Ti, Pi, Ei, n, u, m, k, M, G, T, P, E"},
        ]));
        let (st, err) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t),
            Some(json!({"object": {"id": "x", "spec": {"template": "nope"}}}))).await;
        assert_eq!(st, 400);
        assert_eq!(err["details"][0]["field"], "object.spec.template");
        assert!(err["details"][0]["reason"].as_str().unwrap().contains("template \"nope\" does not exist"));
        let (st, err) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t),
            Some(json!({"object": {"id": "x", "spec": {"template": "simple_vm", "state": "sleeping"}}}))).await;
        assert_eq!(st, 400);
        assert_eq!(err["details"][0]["field"], "object.spec.state");
        assert!(err["details"][0]["reason"].as_str().unwrap().contains("unknown variant `sleeping`"), "{err}");
        let (st, err) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t),
            Some(json!({"object": {"id": "x", "spec": {"template": "simple_vm", "state": "paused"}}}))).await;
        assert_eq!((st, &err["details"][0]["field"]), (400, &json!("object.spec.state")), "{err}");
        assert!(err["details"][0]["reason"].as_str().unwrap().contains("the none backend cannot pause VMs"), "{err}");
        let (st, err) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(json!({"object": {"spec": {"template": "simple_vm"}}}))).await;
        assert_eq!(st, 400);
        assert_eq!(err["details"][0]["field"], "object.metadata.name");
        // Not JSON at all.
        let resp = reqwest::Client::new().post(format!("{}{V1}/virtual_machines", s.endpoint)).bearer_auth(&t).body("{oops").send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 400);
        let err: Value = resp.json().await.unwrap();
        assert!(err["details"][0]["reason"].as_str().unwrap().starts_with("is not valid JSON"), "{err}");
        // Bad templates from an admin: every problem at once.
        let (st, err) = s.raw(Method::POST, &format!("{V1}/virtual_machine_templates"), Some(&admin), Some(json!({"object": {
            "id": "t2", "parameters": [{"name": "vm_memory", "default": {"value": 3}}, {"name": "n", "type": "integer", "min": 5, "max": 1}]}}))).await;
        assert_eq!(st, 400);
        let fields: Vec<&str> = err["details"].as_array().unwrap().iter().map(|d| d["field"].as_str().unwrap()).collect();
        assert_eq!(fields, ["object.parameters[1].min"]);
        // Nothing was stored by any failed request.
        let (_, list) = s.raw(Method::GET, &format!("{V1}/virtual_machines"), Some(&t), None).await;
        assert_eq!(list["total"], 0);
    }
}

on_both_databases! {
    async fn restart_loses_nothing(db: Db) {
        let Some(mut s) = Server::start(db).await else { return };
        let admin = s.token("ops", true);
        let t = s.token("acme", false);
        seed::publish(&s, &admin).await;
        let mut ids = Vec::new();
        for i in 0..3 {
            let (_, vm) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(seed::vm(&format!("keep-{i}")))).await;
            ids.push(vm["object"]["id"].as_str().unwrap().to_owned());
        }
        let (_, before) = s.raw(Method::GET, &format!("{V1}/virtual_machines"), Some(&t), None).await;
        let old_endpoint = s.endpoint.clone();
        s.restart().await;
        assert_ne!(s.endpoint, "", "restarted on {} (was {old_endpoint})", s.endpoint);
        // Old tokens still work: the key is in the data directory.
        let (st, after) = s.raw(Method::GET, &format!("{V1}/virtual_machines"), Some(&t), None).await;
        assert_eq!(st, 200);
        assert_eq!(after["total"], 3);
        let spec = |v: &Value| v["items"].as_array().unwrap().iter().map(|i| (i["id"].clone(), i["spec"].clone(), i["metadata"]["creation_timestamp"].clone())).collect::<Vec<_>>();
        assert_eq!(spec(&before), spec(&after));
        let (st, tpl) = s.raw(Method::GET, &format!("{V1}/virtual_machine_templates/simple_vm"), Some(&t), None).await;
        assert_eq!(st, 200);
        assert_eq!(tpl["object"]["parameters"], seed::template()["object"]["parameters"]);
        assert!(s.log().matches("vmaas-server ready").count() == 2);
    }
}

on_both_databases! {
    async fn delete_goes_through_deleting(db: Db) {
        let Some(s) = Server::start(db).await else { return };
        let admin = s.token("ops", true);
        let t = s.token("acme", false);
        seed::publish(&s, &admin).await;
        let (_, vm) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(seed::vm("gone"))).await;
        let id = vm["object"]["id"].as_str().unwrap().to_owned();
        let (st, d) = s.raw(Method::DELETE, &format!("{V1}/virtual_machines/{id}"), Some(&t), None).await;
        assert_eq!(st, 202, "{d}");
        assert_eq!(d["object"]["status"]["state"], "VIRTUAL_MACHINE_STATE_DELETING");
        assert!(d["object"]["metadata"]["deletion_timestamp"].is_string());
        let mut last = 0;
        for _ in 0..100 {
            let (st, _) = s.raw(Method::GET, &format!("{V1}/virtual_machines/{id}"), Some(&t), None).await;
            last = st;
            if st == 404 { break }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        assert_eq!(last, 404);
        // The name is free again.
        let (st, _) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(seed::vm("gone"))).await;
        assert_eq!(st, 201);
    }
}

#[tokio::test]
async fn openapi_health_and_metrics() {
    let s = Server::start(Db::Sqlite).await.unwrap();
    let (st, doc) = s.raw(Method::GET, "/api/openapi.json", None, None).await;
    assert_eq!(st, 200);
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    for p in [
        "/api/fulfillment/v1/virtual_machines",
        "/api/fulfillment/v1/virtual_machines/{id}",
        "/api/fulfillment/v1/virtual_machine_templates",
    ] {
        assert!(doc["paths"].get(p).is_some(), "{p} in the OpenAPI document");
    }
    assert!(doc["components"]["schemas"].get("VirtualMachine").is_some());
    let mut refs = Vec::new();
    collect_refs(&doc, &mut refs);
    assert!(refs.len() > 50, "{refs:?}");
    for r in refs {
        let name = r.strip_prefix("#/components/schemas/").unwrap_or_else(|| panic!("a local schema: {r}"));
        assert!(doc["components"]["schemas"].get(name).is_some(), "{r} is defined in the document");
    }
    let (st, h) = s.raw(Method::GET, "/healthz", None, None).await;
    assert_eq!(st, 200);
    assert_eq!(h["status"], "ok");
    assert_eq!(h["database"], "sqlite");
    let t = s.token("acme", false);
    let _ = s.raw(Method::GET, &format!("{V1}/virtual_machines"), Some(&t), None).await;
    let text = reqwest::get(format!("{}/metrics", s.endpoint)).await.unwrap().text().await.unwrap();
    assert!(
        text.contains(r#"vmaas_http_requests_total{method="GET",route="/api/fulfillment/v1/virtual_machines",status="200"} 1"#),
        "{text}"
    );
    let (st, err) = s.raw(Method::GET, "/api/fulfillment/v1/nothing", Some(&t), None).await;
    assert_eq!((st, err["code"].clone()), (404, json!(12)));
}

/// Every `$ref` in an OpenAPI document.
fn collect_refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get("$ref") {
                out.push(r.clone());
            }
            m.values().for_each(|x| collect_refs(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| collect_refs(x, out)),
        _ => {}
    }
}

on_both_databases! {
    async fn template_delete_never_races_a_create_into_an_orphan(db: Db) {
        let Some(s) = Server::start(db).await else { return };
        let admin = s.token("ops", true);
        let t = s.token("acme", false);
        let mut outcomes = std::collections::BTreeMap::new();
        for round in 0..20 {
            let id = format!("racy{round}");
            let (st, body) =
                s.raw(Method::POST, &format!("{V1}/virtual_machine_templates"), Some(&admin), Some(json!({"object": {"id": id}}))).await;
            assert_eq!(st, 201, "{body}");
            let vm = json!({"object": {"metadata": {"name": format!("vm{round}")}, "spec": {"template": id}}});
            let (vms, template) = (format!("{V1}/virtual_machines"), format!("{V1}/virtual_machine_templates/{id}"));
            let create = s.raw(Method::POST, &vms, Some(&t), Some(vm));
            let delete = s.raw(Method::DELETE, &template, Some(&admin), None);
            let ((created, body), (deleted, _)) = tokio::join!(create, delete);
            assert!(!(created == 201 && deleted == 204), "round {round}: the VM was created and its template deleted: {body}");
            assert!(created == 201 || deleted == 204, "round {round}: neither happened ({created}, {deleted}): {body}");
            if created != 201 {
                assert_eq!(created, 400, "{body}");
                assert!(body["message"].as_str().unwrap_or("").contains(&id) || body.to_string().contains(&id), "{body}");
            }
            *outcomes.entry((created, deleted)).or_insert(0) += 1;
        }
        eprintln!("outcomes (create, delete): {outcomes:?}");
    }
}

on_both_databases! {
    async fn versioned_patches_retry_instead_of_failing_or_overwriting(db: Db) {
        let Some(s) = Server::start(db).await else { return };
        let admin = s.token("ops", true);
        seed::publish(&s, &admin).await;
        let t = s.token("acme", false);
        let (st, vm) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(seed::vm("contended"))).await;
        assert_eq!(st, 201, "{vm}");
        let id = vm["object"]["id"].as_str().unwrap().to_owned();
        let version = vm["object"]["metadata"]["version"].as_i64().unwrap();
        let client = s.client(&t);
        // Ten writers at once, as ten `terraform apply` runs would: every change lands, one after the other.
        let writers = (1..=10).map(|cores: i64| {
            let (client, id) = (client.clone(), id.clone());
            async move {
                // The whole map, as PATCH takes it: the seed's disk size stays (disks never shrink).
                let params = std::collections::BTreeMap::from([
                    ("vm_cpu_cores".to_owned(), serde_json::from_value(json!({"value": cores})).unwrap()),
                    ("vm_disk_size".to_owned(), serde_json::from_value(json!({"value": "30Gi"})).unwrap()),
                ]);
                let patch = vmaas_model::PatchVirtualMachine {
                    spec: vmaas_model::vm::SpecPatch { template_parameters: Some(params), ..Default::default() },
                    ..Default::default()
                };
                client.patch_vm_versioned(&id, &patch, 20).await
            }
        });
        for r in futures::future::join_all(writers).await {
            r.expect("a versioned patch retries on 409 instead of failing");
        }
        let (_, after) = s.raw(Method::GET, &format!("{V1}/virtual_machines/{id}"), Some(&t), None).await;
        assert_eq!(after["object"]["metadata"]["version"].as_i64().unwrap(), version + 10, "ten changes, none lost: {after}");
    }
}

/// grpc-gateway's JSON beside the seed's: a bare object as the body (its
/// `body: "object"`) is answered with the bare object (its `response_body:
/// "object"`), and parameter values as `google.protobuf.Any`, kept in the
/// form the request used; errors still name `object.…`.
#[tokio::test]
async fn bare_bodies_and_any_values_work_beside_the_seed_form() {
    let s = Server::start(Db::Sqlite).await.unwrap();
    let (admin, t) = (s.token("ops", true), s.token("acme", false));
    seed::publish(&s, &admin).await;
    let any = |t: &str, v: Value| json!({"@type": format!("type.googleapis.com/google.protobuf.{t}"), "value": v});
    let params = json!({"vm_cpu_cores": any("Int32Value", json!(2)), "vm_memory": any("StringValue", json!("2Gi")), "vm_disk_size": {"value": "20Gi"}});
    let bare = json!({"metadata": {"name": "bare"}, "spec": {"template": "simple_vm", "template_parameters": params}});
    let (st, vm) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(bare)).await;
    assert_eq!(st, 201, "{vm}");
    assert_eq!(vm["spec"]["template_parameters"], params, "answered bare, as written");
    let id = vm["id"].as_str().unwrap().to_owned();
    let (_, got) = s.raw(Method::GET, &format!("{V1}/virtual_machines/{id}"), Some(&t), None).await;
    assert_eq!(got["object"]["spec"]["template_parameters"]["vm_cpu_cores"], any("Int32Value", json!(2)));
    // A 64-bit integer is a string in ProtoJSON.
    let patch = json!({"spec": {"template_parameters": {"vm_cpu_cores": any("Int64Value", json!("4"))}}});
    let (st, vm) = s.raw(Method::PATCH, &format!("{V1}/virtual_machines/{id}"), Some(&t), Some(patch)).await;
    assert_eq!(st, 200, "{vm}");
    assert_eq!(vm["spec"]["template_parameters"]["vm_cpu_cores"]["value"], "4");
    let enveloped = json!({"object": {"spec": {"state": "stopped"}}});
    let (st, vm) = s.raw(Method::PATCH, &format!("{V1}/virtual_machines/{id}"), Some(&t), Some(enveloped)).await;
    assert_eq!((st, vm["object"]["spec"]["state"].as_str()), (200, Some("stopped")), "the envelope answered with one: {vm}");

    for (value, why) in [
        (any("BoolValue", json!(2)), "BoolValue cannot hold"),
        (any("Int64Value", json!("four")), "must be an integer"),
        (json!({"@type": "example.com/Cores", "value": 2}), "is not supported"),
        (any("StringValue", json!("2")), "expected an integer"),
    ] {
        let bare = json!({"metadata": {"name": "bad"}, "spec": {"template": "simple_vm", "template_parameters": {"vm_cpu_cores": value}}});
        let (st, e) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(bare)).await;
        assert_eq!((st, e["details"][0]["field"].as_str()), (400, Some("object.spec.template_parameters.vm_cpu_cores.value")), "{e}");
        assert!(e["details"][0]["reason"].as_str().unwrap().contains(why), "{e}");
        // google.rpc.Status: each detail an Any of a BadRequest.FieldViolation.
        assert_eq!(e["details"][0]["@type"], "type.googleapis.com/google.rpc.BadRequest.FieldViolation", "{e}");
        assert_eq!(e["details"][0]["description"], e["details"][0]["reason"], "{e}");
    }
    let (st, e) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(json!({"spec": {"templat": "x"}}))).await;
    assert_eq!(
        (st, e["details"][0]["field"].as_str()),
        (400, Some("object.spec.templat")),
        "a bare body's errors are named as the envelope's: {e}"
    );
    let (_, list) = s.raw(Method::GET, &format!("{V1}/virtual_machines"), Some(&t), None).await;
    assert_eq!(list["total"], 1, "nothing half-made: {list}");
}

/// Templates take OSAC's `Update`: PATCH of the fields sent, or of those an
/// `update_mask` names; checked as a whole, versioned, administrators only.
#[tokio::test]
async fn templates_are_patched_by_field_or_mask() {
    let s = Server::start(Db::Sqlite).await.unwrap();
    let (admin, t) = (s.token("ops", true), s.token("acme", false));
    seed::publish(&s, &admin).await;
    let url = format!("{V1}/virtual_machine_templates/simple_vm");
    let (_, before) = s.raw(Method::GET, &url, Some(&admin), None).await;
    let before = before["object"].clone();

    let (st, v) = s.raw(Method::PATCH, &url, Some(&admin), Some(json!({"title": "Renamed"}))).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!((v["title"].as_str(), &v["parameters"]), (Some("Renamed"), &before["parameters"]), "bare in, bare out: {v}");
    assert_eq!(v["metadata"]["version"].as_i64(), before["metadata"]["version"].as_i64().map(|n| n + 1), "{v}");

    let masked = format!("{url}?update_mask=description");
    let (st, v) = s.raw(Method::PATCH, &masked, Some(&admin), Some(json!({"object": {"title": "ignored"}}))).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!((v["object"]["title"].as_str(), v["object"].get("description")), (Some("Renamed"), None), "the mask's field cleared: {v}");

    for (body, status, field) in [
        (json!({"spec_defaults": {"memory": "lots"}}), 400, Some("object.spec_defaults.memory")),
        (json!({"titel": "x"}), 400, Some("object.titel")),
        (json!({"id": "other"}), 400, Some("object.id")),
        (json!({"title": "x", "metadata": {"version": 1}}), 409, None),
    ] {
        let (st, e) = s.raw(Method::PATCH, &url, Some(&admin), Some(body.clone())).await;
        assert_eq!((st, e["details"][0]["field"].as_str()), (status, field), "{body}: {e}");
    }
    assert_eq!(s.raw(Method::PATCH, &url, Some(&t), Some(json!({"title": "mine"}))).await.0, 403);
    let (_, after) = s.raw(Method::GET, &url, Some(&admin), None).await;
    assert_eq!(after["object"]["title"], "Renamed", "refused patches change nothing: {after}");
}
