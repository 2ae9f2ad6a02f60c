use serde_json::json;

use super::*;

fn vm() -> Value {
    json!({
        "id": "b1",
        "metadata": {"name": "web-1", "creation_timestamp": "2026-11-23T10:00:00Z", "labels": {"env": "prod"}, "creators": ["alice"]},
        "spec": {"state": "started", "template": "tiny"},
        "status": {"state": "VIRTUAL_MACHINE_STATE_READY", "cores": 4}
    })
}

fn passes(f: &str) -> bool {
    Filter::parse(f).unwrap_or_else(|e| panic!("{f}: {e}")).matches(&vm())
}

#[test]
fn osac_filters_select_what_they_say() {
    for f in [
        "this.metadata.name == 'web-1'",
        "this.id in ['a', 'b1']",
        "this.status.state == VIRTUAL_MACHINE_STATE_READY",
        "this.metadata.name.startsWith(\"web\") && !(this.spec.state == 'stopped')",
        "'env' in this.metadata.labels",
        "this.metadata.labels['env'] == 'prod'",
        "this.metadata.creators.contains('alice')",
        "this.status.cores >= 4 && this.status.cores < 8.5",
        "this.metadata.creation_timestamp > '2026-11-01T00:00:00Z'",
        "this.metadata.name == 'x' || this.spec.template == 'tiny'",
        "this.metadata.deletion_timestamp == null",
        "metadata.name.endsWith('-1')",
    ] {
        assert!(passes(f), "{f}");
    }
    for f in [
        "this.metadata.name == 'web-2'",
        "this.id in []",
        "!('env' in this.metadata.labels)",
        "this.status.cores > 'a'",
        "this.nothing.here == 'x'",
        "this.spec.state != 'started'",
    ] {
        assert!(!passes(f), "{f}");
    }
}

#[test]
fn bad_filters_say_where() {
    for (f, says) in [
        ("this.metadata.name ==", "at the end"),
        ("this.id in ['a' 'b']", "expected \",\""),
        ("(this.id == 'a'", "expected \")\""),
        ("this.id == 'a", "not closed"),
        ("this.id = 'a'", "unexpected '='"),
        ("this.id == 'a' this", "unexpected before"),
    ] {
        let e = Filter::parse(f).unwrap_err();
        assert!(e.contains(says), "{f}: {e}");
    }
}

#[test]
fn orders_sort_by_their_keys() {
    let mut items = [json!({"id": "a", "n": 2}), json!({"id": "b", "n": 1}), json!({"id": "c", "n": 2})];
    let o = Order::parse("this.n desc, this.id").unwrap();
    items.sort_by(|a, b| o.compare(a, b));
    let ids: Vec<&str> = items.iter().map(|i| i["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["a", "c", "b"]);
    assert!(Order::parse("this.n sideways").unwrap_err().contains("FIELD desc"));
    assert!(Order::parse("'x'").unwrap_err().contains("not a field"));
}
