//! The API tried as a hostile tenant would, on the real server (API only,
//! loopback): a filter nested or long enough to overflow a stack is a 400
//! naming `filter` on REST, the event stream and gRPC, and JSON nested
//! 100,000 deep is a 400, and the server keeps serving; an `update_mask`
//! naming no field is a 400 naming it; load balancers count against the external-IP quota; names are
//! looked up in the caller's tenant first, so a name another tenant also
//! uses never hides or reaches its object (REST, CLI), and an
//! administrator's references never cross into a tenant; images keep and
//! check their labels like every other kind.

use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::objects::post;
use vmaas_tests::tf::python;
use vmaas_tests::vms::{TINY, V1, publish};
use vmaas_tests::{Db, Server};

async fn made(s: &Server, t: &str, path: &str, body: Value) -> Value {
    let (st, v) = post(s, t, path, body).await;
    assert_eq!(st, 201, "{path}: {v}");
    v["object"].clone()
}

fn nested(depth: usize) -> String {
    format!("{}this.id == 'x'{}", "(".repeat(depth), ")".repeat(depth))
}

/// Percent-encodes a query value.
fn encoded(text: &str) -> String {
    text.bytes().map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") }).collect()
}

/// Calls gRPC `List` of compute instances and `Events.Watch` with a filter
/// nested `depth` deep, from Python's grpcio; the status code of each.
fn grpc_with_filter(s: &Server, token: &str, depth: usize) -> String {
    let script = r#"
import grpc, sys
target, token, depth = sys.argv[1], sys.argv[2], int(sys.argv[3])
text = ("(" * depth + "this.id == 'x'" + ")" * depth).encode()
def field(number, value):
    out, n = bytes([number << 3 | 2]), len(value)
    while n >= 0x80:
        out += bytes([n & 0x7f | 0x80]); n >>= 7
    return out + bytes([n]) + value
ch = grpc.insecure_channel(target, options=[("grpc.max_send_message_length", 8 << 20)])
md = [("authorization", "Bearer " + token)]
ident = lambda b: b
for method, number, stream in [("/osac.public.v1.ComputeInstances/List", 3, False), ("/osac.public.v1.Events/Watch", 1, True)]:
    call = (ch.unary_stream if stream else ch.unary_unary)(method, request_serializer=ident, response_deserializer=ident)
    try:
        r = call(field(number, text), metadata=md, timeout=20)
        if stream:
            next(iter(r))
        print(method, "OK")
    except grpc.RpcError as e:
        print(method, e.code().name, e.details())
"#;
    let out = std::process::Command::new(python())
        .arg("-c")
        .arg(script)
        .arg(s.endpoint.trim_start_matches("http://"))
        .arg(token)
        .arg(depth.to_string())
        .output()
        .expect("python");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn filters_that_would_overflow_the_stack_are_refused_and_the_server_keeps_serving() {
    let s = Server::start(Db::Sqlite).await.expect("sqlite");
    let t = s.token("acme", false);
    // Deep nesting (1,000 and 10,000 levels), a 1,000-term chain, 2,000
    // selections in a row: 400 naming `filter`.
    let wide = vec!["this.id == 'x'"; 1000].join(" || ");
    let long = format!("this{} == 1", ".a".repeat(2000));
    for f in [nested(1000), nested(10_000), wide, long] {
        for path in [format!("{V1}/virtual_machines?filter="), "/api/events/v1/events?filter=".to_owned()] {
            let (st, e) = s.raw(Method::GET, &format!("{path}{}", encoded(&f)), Some(&t), None).await;
            assert!(st == 400, "{path} with {} bytes: {st} {e}", f.len());
            if st == 400 {
                assert_eq!(e["details"][0]["field"], "filter", "{e}");
            }
        }
    }
    // 100,000 nested parentheses over gRPC: INVALID_ARGUMENT, both calls.
    let out = grpc_with_filter(&s, &t, 100_000);
    assert_eq!(out.matches("INVALID_ARGUMENT").count(), 2, "{out}\n{}", s.log());
    assert!(out.contains("filter"), "{out}");
    // 3,000 '!' fold into none (CEL's parser pairs them): an answer, not a crash.
    let bang = format!("{}this.id == 'x'", "!".repeat(3000));
    let (st, v) = s.raw(Method::GET, &format!("{V1}/virtual_machines?filter={}", encoded(&bang)), Some(&t), None).await;
    assert_eq!((st, &v["total"]), (200, &json!(0)), "{v}");
    // A filter within the limits still works, and the server is alive.
    let (st, v) = s.raw(Method::GET, &format!("{V1}/virtual_machines?filter={}", encoded(&nested(30))), Some(&t), None).await;
    assert_eq!((st, &v["total"]), (200, &json!(0)), "{v}");
    assert_eq!(s.raw(Method::GET, "/healthz", None, None).await.0, 200);
    assert!(!s.log().contains("overflowed its stack"), "{}", s.log());
}

#[tokio::test(flavor = "multi_thread")]
async fn load_balancers_count_against_the_external_ip_quota() {
    let s = Server::start(Db::Sqlite).await.expect("sqlite");
    let (t, admin) = (s.token("acme", false), s.token("ops", true));
    let (st, q) =
        s.raw(Method::PUT, &format!("{V1}/tenants/acme/quota"), Some(&admin), Some(json!({"object": {"spec": {"external_ips": 2}}}))).await;
    assert_eq!(st, 200, "{q}");
    made(&s, &t, "virtual_networks", json!({"metadata": {"name": "lab"}, "spec": {"ipv4_cidr": "10.40.0.0/16"}})).await;
    made(&s, &t, "subnets", json!({"metadata": {"name": "front"}, "spec": {"virtual_network": "lab", "ipv4_cidr": "10.40.1.0/24"}})).await;
    let lb = |name: &str| json!({"metadata": {"name": name}, "spec": {"subnet": "front", "port_mappings": [{"external_port": 80, "internal_port": 80}]}});
    made(&s, &t, "external_ips", json!({"metadata": {"name": "one"}, "spec": {}})).await;
    made(&s, &t, "load_balancers", lb("lb1")).await;
    for (path, body) in [("external_ips", json!({"metadata": {"name": "two"}, "spec": {}})), ("load_balancers", lb("lb2"))] {
        let (st, e) = post(&s, &t, path, body).await;
        assert_eq!((st, e["details"][0]["field"].as_str()), (429, Some("quota.external_ips")), "{path}: {e}");
        assert!(e["details"][0]["reason"].as_str().unwrap().contains("may have 2 external_ips; it holds 2"), "{e}");
    }
    let (_, usage) = s.raw(Method::GET, &format!("{V1}/tenants/acme/quota"), Some(&t), None).await;
    assert_eq!(usage["object"]["status"]["usage"]["external_ips"], 2, "{usage}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_name_two_tenants_use_reaches_only_the_caller_s_own_object() {
    let s = Server::start(Db::Sqlite).await.expect("sqlite");
    publish(&s, TINY);
    let (a, b, admin) = (s.token("acme", false), s.token("globex", false), s.token("ops", true));
    let mut ids = Vec::new();
    for t in [&a, &b] {
        let img = made(&s, t, "images", json!({"metadata": {"name": "squat"}, "spec": {}})).await;
        made(&s, t, "virtual_networks", json!({"metadata": {"name": "net"}, "spec": {"ipv4_cidr": "10.50.0.0/16"}})).await;
        let sub =
            made(&s, t, "subnets", json!({"metadata": {"name": "sub"}, "spec": {"virtual_network": "net", "ipv4_cidr": "10.50.1.0/24"}}))
                .await;
        let vol = made(&s, t, "volumes", json!({"metadata": {"name": "data"}, "spec": {"size": "64Mi"}})).await;
        let ip = made(&s, t, "external_ips", json!({"metadata": {"name": "pub"}, "spec": {}})).await;
        let id = |v: &Value| v["id"].as_str().unwrap().to_owned();
        ids.push((id(&img), id(&sub), id(&vol), id(&ip)));
    }
    // globex deletes "its" squat by name over REST, then acme by the CLI: each its own.
    let (st, gone) = s.raw(Method::DELETE, &format!("{V1}/images/squat"), Some(&b), None).await;
    assert_eq!((st, gone["object"]["id"].as_str()), (202, Some(ids[1].0.as_str())), "{gone}");
    let (st, kept) = s.raw(Method::GET, &format!("{V1}/images/{}", ids[0].0), Some(&a), None).await;
    assert_eq!((st, kept["object"]["metadata"].get("deletion_timestamp")), (200, None), "{kept}");
    let out = s.cli(&a, &["image", "delete", "squat"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (_, mine) = s.raw(Method::GET, &format!("{V1}/images/{}", ids[0].0), Some(&a), None).await;
    assert!(mine["object"]["metadata"].get("deletion_timestamp").is_some() || mine["code"] == 5, "{mine}");

    // An administrator's name that two tenants hold is ambiguous: 409 naming them.
    for t in [&a, &b] {
        made(&s, t, "images", json!({"metadata": {"name": "shared-name"}, "spec": {}})).await;
    }
    let (st, e) = s.raw(Method::DELETE, &format!("{V1}/images/shared-name"), Some(&admin), None).await;
    assert_eq!(st, 409, "{e}");
    let m = e["message"].as_str().unwrap();
    assert!(m.contains("acme") && m.contains("globex") && m.contains("id"), "{m}");

    // References in creates resolve in the creator's tenant only: globex's
    // names reach globex's objects, and an administrator's reach none of
    // the tenants' (by name or by id).
    let vm = made(
        &s,
        &b,
        "virtual_machines",
        json!({"metadata": {"name": "vm"}, "spec": {"template": "tiny", "network_attachments": [{"subnet": "sub"}]}}),
    )
    .await;
    assert_eq!(vm["spec"]["network_attachments"][0]["subnet"], ids[1].1.as_str(), "{vm}");
    let att = made(
        &s,
        &b,
        "external_ip_attachments",
        json!({"metadata": {"name": "att"}, "spec": {"external_ip": "pub", "compute_instance": "vm"}}),
    )
    .await;
    assert_eq!(att["spec"]["external_ip"]["id"], ids[1].3.as_str(), "{att}");
    for (path, body, field) in [
        (
            "subnets",
            json!({"metadata": {"name": "x"}, "spec": {"virtual_network": "net", "ipv4_cidr": "10.50.2.0/24"}}),
            "object.spec.virtual_network",
        ),
        (
            "load_balancers",
            json!({"metadata": {"name": "x"}, "spec": {"subnet": ids[0].1, "port_mappings": [{"external_port": 80, "internal_port": 80}]}}),
            "object.spec.subnet",
        ),
        (
            "volume_attachments",
            json!({"metadata": {"name": "x"}, "spec": {"volume": ids[0].2, "compute_instance": "vm"}}),
            "object.spec.volume",
        ),
    ] {
        let (st, e) = post(&s, &admin, path, body).await;
        assert_eq!((st, e["details"][0]["field"].as_str()), (400, Some(field)), "{path}: {e}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn images_keep_and_check_their_labels_like_every_kind() {
    let s = Server::start(Db::Sqlite).await.expect("sqlite");
    let t = s.token("acme", false);
    let img = made(
        &s,
        &t,
        "images",
        json!({"metadata": {"name": "labelled", "labels": {"env": "prod"}, "annotations": {"note": "kept"}}, "spec": {}}),
    )
    .await;
    assert_eq!((&img["metadata"]["labels"]["env"], &img["metadata"]["annotations"]["note"]), (&json!("prod"), &json!("kept")), "{img}");
    let (_, read) = s.raw(Method::GET, &format!("{V1}/images/{}", img["id"].as_str().unwrap()), Some(&t), None).await;
    assert_eq!(read["object"]["metadata"]["labels"]["env"], "prod", "{read}");
    let big = "x".repeat(300 << 10);
    for (metadata, field) in [
        (json!({"name": "bad-key", "labels": {"bad key!": "v"}}), "object.metadata.labels"),
        (json!({"name": "big", "annotations": {"note": big}}), "object.metadata.annotations"),
    ] {
        let (st, e) = post(&s, &t, "images", json!({"metadata": metadata, "spec": {}})).await;
        assert_eq!(st, 400, "{e}");
        assert!(e["details"][0]["field"].as_str().unwrap_or_default().starts_with(field), "{e}");
    }
    let (_, list) = s.raw(Method::GET, &format!("{V1}/images"), Some(&t), None).await;
    assert!(!list.to_string().contains("bad-key") && !list.to_string().contains("\"big\""), "nothing half-made: {list}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_update_mask_naming_no_field_is_refused_as_grpc_refuses_it() {
    let s = Server::start(Db::Sqlite).await.expect("sqlite");
    publish(&s, TINY);
    let t = s.token("acme", false);
    let vm = made(&s, &t, "virtual_machines", json!({"metadata": {"name": "vm"}, "spec": {"template": "tiny"}})).await;
    let vol = made(&s, &t, "volumes", json!({"metadata": {"name": "data"}, "spec": {"size": "64Mi"}})).await;
    for (path, body) in [
        (format!("virtual_machines/{}", vm["id"].as_str().unwrap()), json!({"object": {"spec": {"state": "stopped"}}})),
        (format!("volumes/{}", vol["id"].as_str().unwrap()), json!({"object": {"spec": {"size": "96Mi"}}})),
    ] {
        let (st, e) = s.raw(Method::PATCH, &format!("{V1}/{path}?update_mask=spec.colour"), Some(&t), Some(body.clone())).await;
        assert_eq!((st, e["details"][0]["field"].as_str()), (400, Some("object.spec.colour")), "{path}: {e}");
        let (_, now) = s.raw(Method::GET, &format!("{V1}/{path}"), Some(&t), None).await;
        assert_eq!(now["object"]["metadata"]["version"], 1, "nothing changed: {now}");
    }
    let path = format!("{V1}/virtual_machines/{}?update_mask=spec.state", vm["id"].as_str().unwrap());
    let (st, v) = s.raw(Method::PATCH, &path, Some(&t), Some(json!({"object": {"spec": {"state": "stopped"}}}))).await;
    assert_eq!((st, v["object"]["spec"]["state"].as_str()), (200, Some("stopped")), "{v}");
}

#[tokio::test(flavor = "multi_thread")]
async fn deeply_nested_json_is_refused_and_the_server_keeps_serving() {
    let s = Server::start(Db::Sqlite).await.expect("sqlite");
    publish(&s, TINY);
    let t = s.token("acme", false);
    // 100,000 nested arrays and objects (200 KB and 600 KB, under the body limit).
    let arrays = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
    let objects = format!("{}1{}", r#"{"a":"#.repeat(100_000), "}".repeat(100_000));
    let bodies =
        [format!(r#"{{"object": {arrays}}}"#), format!(r#"{{"object": {objects}}}"#), format!(r#"{{"x": {arrays}}}"#), arrays.clone()];
    for body in bodies {
        let rsp = reqwest::Client::new()
            .post(format!("{}{V1}/virtual_machines", s.endpoint))
            .bearer_auth(&t)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(rsp.status(), 400);
        let e: Value = rsp.json().await.unwrap();
        assert!(!e["details"][0]["field"].as_str().unwrap_or_default().is_empty(), "{e}");
    }
    assert_eq!(s.raw(Method::GET, "/healthz", None, None).await.0, 200);
    assert_eq!(s.raw(Method::GET, &format!("{V1}/virtual_machines"), Some(&t), None).await.1["total"], 0, "nothing half-made");
}
