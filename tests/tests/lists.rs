//! Lists: paging, `filter` (CEL) and `order`, on both databases; the
//! filters the store narrows by itself are paged and counted there.

use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::{Db, Server, on_both_databases, seed};

const V1: &str = "/api/fulfillment/v1";

on_both_databases! {
    async fn pagination_and_filters(db: Db) {
        let Some(s) = Server::start(db).await else { return };
        let admin = s.token("ops", true);
        let t = s.token("acme", false);
        seed::publish(&s, &admin).await;
        // Another tenant's stopped VM, with the same label: never in acme's lists.
        let other = s.token("globex", false);
        let mut theirs = seed::vm("vm-00");
        theirs["object"]["spec"]["state"] = json!("stopped");
        theirs["object"]["metadata"]["labels"] = json!({"tier": "a"});
        assert_eq!(s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&other), Some(theirs)).await.0, 201);
        for i in 0..25 {
            let mut body = seed::vm(&format!("vm-{i:02}"));
            if i % 5 == 0 { body["object"]["spec"]["state"] = json!("stopped"); }
            body["object"]["metadata"]["labels"] = json!({"tier": if i % 2 == 0 { "a" } else { "b" }});
            let (st, _) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(body)).await;
            assert_eq!(st, 201);
        }
        narrowed_filters_page_and_count(&s, &t).await;
        let mut names = Vec::new();
        for (offset, size) in [(0, 10), (10, 10), (20, 5), (30, 0)] {
            let (st, page) = s.raw(Method::GET, &format!("{V1}/virtual_machines?offset={offset}&limit=10"), Some(&t), None).await;
            assert_eq!(st, 200);
            assert_eq!(page["size"], size);
            assert_eq!(page["total"], 25);
            names.extend(page["items"].as_array().unwrap().iter().map(|v| v["metadata"]["name"].as_str().unwrap().to_owned()));
        }
        let want: Vec<String> = (0..25).map(|i| format!("vm-{i:02}")).collect();
        assert_eq!(names, want, "every VM once, oldest first");
        let (_, one) = s.raw(Method::GET, &format!("{V1}/virtual_machines?name=vm-07"), Some(&t), None).await;
        assert_eq!((one["total"].clone(), one["items"][0]["metadata"]["name"].clone()), (json!(1), json!("vm-07")));
        // Wait for the reconciler to mark the stopped ones STOPPED, then filter on state.
        let mut stopped = json!(0);
        for _ in 0..100 {
            let (_, p) = s.raw(Method::GET, &format!("{V1}/virtual_machines?state=stopped"), Some(&t), None).await;
            stopped = p["total"].clone();
            if stopped == 5 { break }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        assert_eq!(stopped, 5);
        for _ in 0..100 {
            let (_, p) = s.raw(Method::GET, &format!("{V1}/virtual_machines?state=stopped"), Some(&other), None).await;
            if p["total"] == 1 { break }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        state_filters_page_and_count(&s, &t).await;
        let (_, p) = s.raw(Method::GET, &format!("{V1}/virtual_machines?state=VIRTUAL_MACHINE_STATE_PROGRESSING&limit=3"), Some(&t), None).await;
        assert_eq!((p["total"].clone(), p["size"].clone()), (json!(20), json!(3)));
        for (q, field) in [("limit=0", "limit"), ("limit=5000", "limit"), ("offset=-1", "offset"), ("state=sleepy", "state")] {
            let (st, err) = s.raw(Method::GET, &format!("{V1}/virtual_machines?{q}"), Some(&t), None).await;
            assert_eq!(st, 400, "{q}");
            assert_eq!(err["details"][0]["field"], field, "{q}: {err}");
        }
    }

}

/// Filters the store narrows by itself (names, prefixes, labels,
/// creation times), paged and counted there, and one it only narrows.
async fn narrowed_filters_page_and_count(s: &Server, t: &str) {
    let get = |filter: &str, page: &str| {
        let q = format!("{V1}/virtual_machines?filter={}&{page}", urlencoding(filter));
        async move { s.raw(Method::GET, &q, Some(t), None).await }
    };
    let names =
        |v: &Value| v["items"].as_array().unwrap().iter().map(|i| i["metadata"]["name"].as_str().unwrap().to_owned()).collect::<Vec<_>>();
    let named = "this.metadata.name in ['vm-03', 'vm-04', 'vm-20', 'nope']";
    let (st, p) = get(named, "limit=2").await;
    assert_eq!((st, names(&p), &p["total"]), (200, vec!["vm-03".to_owned(), "vm-04".to_owned()], &json!(3)), "{p}");
    let (_, p) = get(named, "limit=2&offset=2").await;
    assert_eq!((names(&p), &p["total"]), (vec!["vm-20".to_owned()], &json!(3)), "{p}");
    for (filter, total) in [
        ("this.metadata.name.startsWith('vm-1')", 10),
        ("this.metadata.labels.tier == 'a' && this.metadata.name.startsWith('vm-0')", 5),
        ("'tier' in this.metadata.labels", 25),
        ("has(this.metadata.labels.nope)", 0),
        ("this.metadata.name.startsWith('vm-1') && this.spec.state == 'stopped'", 2),
    ] {
        let (st, p) = get(filter, "limit=3").await;
        assert_eq!((st, &p["total"], p["size"].as_u64()), (200, &json!(total), Some(total.min(3))), "{filter}: {p}");
    }
    let (_, ten) = get("this.metadata.name == 'vm-10'", "").await;
    let created = ten["items"][0]["metadata"]["creation_timestamp"].as_str().unwrap().to_owned();
    let (_, p) = get(&format!("this.metadata.creation_timestamp >= timestamp('{created}')"), "limit=1").await;
    assert_eq!((names(&p), &p["total"]), (vec!["vm-10".to_owned()], &json!(15)), "{p}");
    let (_, p) = get(&format!("this.metadata.creation_timestamp < timestamp('{created}')"), "offset=9").await;
    assert_eq!((names(&p), &p["total"]), (vec!["vm-09".to_owned()], &json!(10)), "{p}");
}

/// Filters on `status.state` (alone, with labels, with `state=`), which the
/// store reads through its index of states; and the compute instances'
/// view, whose states are its own, filtered on them.
async fn state_filters_page_and_count(s: &Server, t: &str) {
    let get = |path: &str, filter: &str, page: &str| {
        let q = format!("{V1}/{path}?filter={}&{page}", urlencoding(filter));
        async move { s.raw(Method::GET, &q, Some(t), None).await }
    };
    let names =
        |v: &Value| v["items"].as_array().unwrap().iter().map(|i| i["metadata"]["name"].as_str().unwrap().to_owned()).collect::<Vec<_>>();
    let stopped = "this.status.state == 'VIRTUAL_MACHINE_STATE_STOPPED'";
    let (st, p) = get("virtual_machines", stopped, "limit=2&offset=1").await;
    assert_eq!((st, names(&p), &p["total"]), (200, vec!["vm-05".to_owned(), "vm-10".to_owned()], &json!(5)), "{p}");
    for (path, filter, page, total) in [
        ("virtual_machines", "this.status.state in ['VIRTUAL_MACHINE_STATE_STOPPED', 'X'] && this.metadata.labels.tier == 'a'", "", 3),
        ("virtual_machines", "this.status.state == 'VIRTUAL_MACHINE_STATE_PROGRESSING'", "", 20),
        ("virtual_machines", "this.status.state == 'VIRTUAL_MACHINE_STATE_PROGRESSING'", "state=stopped", 0),
        ("virtual_machines", stopped, "state=stopped", 5),
        ("virtual_machines", "this.status.state == 'STOPPED'", "", 0),
        ("compute_instances", "this.status.state == 'COMPUTE_INSTANCE_STATE_STOPPED'", "", 5),
        ("compute_instances", stopped, "", 0),
    ] {
        let (st, p) = get(path, filter, page).await;
        assert_eq!((st, &p["total"]), (200, &json!(total)), "{path} {filter} {page}: {p}");
        assert_eq!(p["items"].as_array().map(Vec::len), Some(total.min(100)), "{path} {filter}: {p}");
    }
}

/// OSAC's `filter` (CEL) and `order` on lists, within what the caller may see.
#[tokio::test]
async fn lists_take_cel_filters_and_orders() {
    let s = Server::start(Db::Sqlite).await.unwrap();
    let (admin, t, other) = (s.token("ops", true), s.token("acme", false), s.token("globex", false));
    seed::publish(&s, &admin).await;
    for (token, name) in [(&t, "a-web"), (&t, "b-web"), (&t, "c-db"), (&other, "d-web")] {
        let (st, v) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(token), Some(seed::vm(name))).await;
        assert_eq!(st, 201, "{v}");
    }
    let list = |path: String, token: String| {
        let s = &s;
        async move { s.raw(Method::GET, &path, Some(&token), None).await }
    };
    let names =
        |v: &Value| v["items"].as_array().unwrap().iter().map(|i| i["metadata"]["name"].as_str().unwrap().to_owned()).collect::<Vec<_>>();
    let q = |f: &str, o: &str, extra: &str| format!("{V1}/virtual_machines?filter={}&order={}{extra}", urlencoding(f), urlencoding(o));

    let (st, v) = list(q("this.metadata.name.endsWith('web')", "this.metadata.name desc", ""), t.clone()).await;
    assert_eq!((st, names(&v), v["total"].as_u64()), (200, vec!["b-web".to_owned(), "a-web".to_owned()], Some(2)), "{v}");
    let (_, v) = list(q("this.metadata.name.endsWith('web')", "this.metadata.name desc", "&limit=1&offset=1"), t.clone()).await;
    assert_eq!((names(&v), v["total"].as_u64(), v["size"].as_u64()), (vec!["a-web".to_owned()], Some(2), Some(1)), "{v}");
    let (_, v) = list(q("this.metadata.name == 'c-db' || this.metadata.name == 'd-web'", "", ""), t.clone()).await;
    assert_eq!(names(&v), vec!["c-db".to_owned()], "another tenant's VM never passes: {v}");
    let (_, v) =
        list(q("this.spec.template_parameters.vm_cpu_cores.value >= 4 && this.spec.state == 'started'", "this.id", ""), admin.clone())
            .await;
    assert_eq!(v["total"], 4, "{v}");
    // Times compare as times, and CEL's macros and has() work over the object.
    let (_, all) = list(q("", "", ""), t.clone()).await;
    let (_, v) = list(q("this.metadata.creation_timestamp > timestamp('2000-01-01T00:00:00+02:00')", "", ""), t.clone()).await;
    assert_eq!((v["total"].as_u64(), all["total"].as_u64().is_some_and(|n| n > 0)), (all["total"].as_u64(), true), "{v}");
    let (_, v) = list(q("this.metadata.creation_timestamp < timestamp('2000-01-01T00:00:00Z') - duration('1h')", "", ""), t.clone()).await;
    assert_eq!(v["total"], 0, "{v}");
    let (_, v) = list(q("!has(this.metadata.deletion_timestamp) && this.metadata.name.endsWith('web')", "", ""), t.clone()).await;
    assert_eq!(v["total"], 2, "{v}");
    let (st, e) = list(q("[1, 2].exists(x, x == 1)", "", ""), t.clone()).await;
    assert_eq!((st, e["details"][0]["field"].as_str()), (400, Some("filter")), "{e}");
    let (st, e) = list(q("this.metadata.name = 'x'", "", ""), t.clone()).await;
    assert_eq!((st, e["details"][0]["field"].as_str()), (400, Some("filter")), "{e}");
    let (st, e) = list(q("", "this.metadata.name sideways", ""), t.clone()).await;
    assert_eq!((st, e["details"][0]["field"].as_str()), (400, Some("order")), "{e}");

    let (_, v) = list(format!("{V1}/virtual_machine_templates?filter={}", urlencoding("this.id == 'simple_vm'")), t.clone()).await;
    assert_eq!(v["total"], 1, "{v}");
    for cidr in ["10.1.0.0/16", "10.2.0.0/16"] {
        let body = json!({"object": {"metadata": {"name": format!("n{}", &cidr[3..4])}, "spec": {"ipv4_cidr": cidr}}});
        let (st, v) = s.raw(Method::POST, &format!("{V1}/virtual_networks"), Some(&t), Some(body)).await;
        assert_eq!(st, 201, "{v}");
    }
    let (_, v) = list(format!("{V1}/virtual_networks?filter={}", urlencoding("this.spec.ipv4_cidr.startsWith('10.2.')")), t.clone()).await;
    assert_eq!(names(&v), vec!["n2".to_owned()], "{v}");
}

fn urlencoding(s: &str) -> String {
    s.bytes()
        .map(|b| if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}
