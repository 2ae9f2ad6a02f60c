//! What a tenant may not set is refused, never dropped (issue 52), on the
//! real server: server-owned metadata (`tenant`, `tenants`, `creator`,
//! `creators`, `version`) unlike what the object has or will have,
//! `spec.public` and other fields a disk image has no place for, a JSON
//! list as an instance type, a timestamp past the year 9999 — each a 400
//! naming the field, with nothing made; an object read back and sent again
//! passes. A `google.protobuf.Value` nested 200 or 100,000 deep in a gRPC
//! create is INVALID_ARGUMENT naming the field. Imports made on demand by
//! VM creates go through the same per-tenant limit as `POST /images`.

use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::files::FileServer;
use vmaas_tests::images::import;
use vmaas_tests::objects::post;
use vmaas_tests::osac::run_client;
use vmaas_tests::vms::{V1, publish};
use vmaas_tests::{Db, Server};

const SEED: &str = "id: tiny\nspec_defaults:\n  memory: 128Mi\n";

/// A 400 naming `field` (first of its details).
fn refused(st: u16, e: &Value, field: &str) {
    assert_eq!(st, 400, "{field}: {e}");
    let fields: Vec<&str> = e["details"].as_array().into_iter().flatten().filter_map(|d| d["field"].as_str()).collect();
    assert!(fields.iter().any(|f| f.starts_with(field)), "{field} not named: {e}");
}

async fn count(s: &Server, t: &str, path: &str) -> usize {
    let (st, page) = s.raw(Method::GET, &format!("{V1}/{path}"), Some(t), None).await;
    assert_eq!(st, 200, "{page}");
    page["items"].as_array().map_or(0, Vec::len)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fields_a_tenant_may_not_set_are_refused_naming_them() {
    let s = Server::start(Db::Sqlite).await.expect("server");
    publish(&s, SEED);
    let (t, admin) = (s.token("acme", false), s.token("ops", true));
    let vm = |meta: Value| json!({"metadata": meta, "spec": {"template": "tiny", "state": "stopped"}});
    for (meta, field) in [
        (json!({"name": "a", "tenant": "globex"}), "object.metadata.tenant"),
        (json!({"name": "b", "tenants": ["globex"]}), "object.metadata.tenants"),
        (json!({"name": "c", "creators": ["eve"]}), "object.metadata.creators"),
        (json!({"name": "d", "creator": "eve"}), "object.metadata.creator"),
        (json!({"name": "e", "version": 7}), "object.metadata.version"),
    ] {
        let (st, e) = post(&s, &t, "virtual_machines", vm(meta)).await;
        refused(st, &e, field);
    }
    let net = json!({"metadata": {"name": "n", "tenant": "globex"}, "spec": {"ipv4_cidr": "10.9.0.0/16"}});
    let (st, e) = post(&s, &t, "virtual_networks", net).await;
    refused(st, &e, "object.metadata.tenant");
    assert_eq!(count(&s, &t, "virtual_machines").await, 0, "nothing made");
    // What the object will have, sent back, passes; and so does a read-back on PATCH.
    let (st, made) =
        post(&s, &t, "virtual_machines", vm(json!({"name": "echo", "tenant": "acme", "tenants": ["acme"], "creators": ["acme"]}))).await;
    assert_eq!(st, 201, "{made}");
    let id = made["object"]["id"].as_str().unwrap();
    let mut back = made["object"].clone();
    back.as_object_mut().unwrap().remove("status");
    let (st, e) = s.raw(Method::PATCH, &format!("{V1}/virtual_machines/{id}"), Some(&t), Some(json!({"object": back}))).await;
    assert_eq!(st, 200, "{e}");
    let moved = json!({"object": {"metadata": {"tenant": "globex"}}});
    let (st, e) = s.raw(Method::PATCH, &format!("{V1}/virtual_machines/{id}"), Some(&t), Some(moved)).await;
    refused(st, &e, "object.metadata.tenant");

    // A list is not an instance type reference.
    let body = json!({"metadata": {"name": "listed"}, "spec": {"template": "tiny", "state": "stopped", "instance_type": ["a", "b"]}});
    let (st, e) = post(&s, &t, "virtual_machines", body).await;
    refused(st, &e, "object.spec.instance_type");

    // A disk image has no `public` (nor any field of its own making).
    let di = |spec: Value| json!({"metadata": {"name": "pub"}, "spec": spec});
    let (st, e) = post(&s, &t, "disk_images", di(json!({"source_ref": "https://example.invalid/a.qcow2", "public": true}))).await;
    refused(st, &e, "object.spec.public");
    let (st, e) = post(&s, &t, "disk_images", di(json!({"source_ref": "https://example.invalid/a.qcow2", "colour": "red"}))).await;
    refused(st, &e, "object.spec.colour");
    assert_eq!(count(&s, &t, "images").await, 0, "nothing imported");

    // Timestamps past the year 9999 (as RFC 3339 extends them, or not at all).
    for when in ["+99999-01-01T00:00:00Z", "99999-01-01T00:00:00Z"] {
        let it = json!({"metadata": {"name": "old.small"}, "spec": {"cores": 1, "memory_gib": 1, "state": "INSTANCE_TYPE_STATE_DEPRECATED",
            "deprecation": {"obsolescence_timestamp": when}}});
        let (st, e) = post(&s, &admin, "instance_types", it).await;
        refused(st, &e, "object.spec.deprecation");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_nested_past_the_limit_in_a_grpc_create_is_invalid_argument() {
    let s = Server::start(Db::Sqlite).await.expect("server");
    publish(&s, SEED);
    let t = s.token("acme", false);
    let out = run_client(&s, "deep_value_client.py", &["--token", &t, "200", "100000"], &["depth 200", "depth 100000"]).await;
    for depth in ["200", "100000"] {
        let line = out.lines().find(|l| l.starts_with(&format!("depth {depth} "))).unwrap_or_default();
        assert!(line.contains("code INVALID_ARGUMENT"), "{line}\n{out}");
        assert!(line.contains("template_parameters[\"x\"]"), "the field is named: {line}");
    }
    let (st, _) = s.raw(Method::GET, "/healthz", None, None).await;
    assert_eq!(st, 200, "the server keeps serving");
    assert_eq!(count(&s, &t, "virtual_machines").await, 0, "nothing made");
}

#[tokio::test(flavor = "multi_thread")]
async fn imports_made_by_vm_creates_count_against_the_import_limit() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..12 {
        std::fs::write(dir.path().join(format!("d{i}.bin")), vec![0u8; 512]).unwrap();
    }
    let web = FileServer::start(dir.path().to_owned()).await;
    let s = Server::start_qemu_with(&["--image-source-allow", "127.0.0.1"]).await;
    publish(
        &s,
        "id: pick\nparameters:\n  - {name: vm_image, type: string, default: {value: test-guest}}\nspec_defaults:\n  memory: 128Mi\n",
    );
    let t = s.token("acme", false);
    // Four imports under way (their sources stall): acme's limit.
    for i in 0..4 {
        import(&s, &t, &format!("held-{i}"), json!({"source": format!("{}/stall/d{i}.bin", web.url)})).await;
    }
    // Eight VM creates naming new URLs: each refused, naming the limit.
    for i in 4..12 {
        let url = format!("{}/stall/d{i}.bin", web.url);
        let body = json!({"metadata": {"name": format!("vm-{i}")}, "spec": {"template": "pick", "template_parameters": {"vm_image": {"value": url}}}});
        let (st, e) = post(&s, &t, "virtual_machines", body).await;
        assert_eq!(st, 429, "create {i}: {e}");
        assert!(e["message"].as_str().unwrap_or_default().contains("--image-imports-per-tenant 4"), "{e}");
    }
    let (_, images) = s.raw(Method::GET, &format!("{V1}/images"), Some(&t), None).await;
    let imported =
        images["items"].as_array().into_iter().flatten().filter(|i| i["spec"]["source"].as_str().is_some_and(|u| u.starts_with(&web.url)));
    assert_eq!(imported.count(), 4, "no import started: {images}");
    assert_eq!(count(&s, &t, "virtual_machines").await, 0, "no VM made");
}
