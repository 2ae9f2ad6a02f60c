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
    assert!(Order::parse("this.n sideways").unwrap_err().to_string().contains("FIELD desc"));
    assert!(Order::parse("'x'").unwrap_err().to_string().contains("not a field"));
}

#[test]
fn deep_long_and_wide_filters_are_refused_before_they_cost_anything() {
    let nested = format!("{}this.id == 'x'{}", "(".repeat(100_000), ")".repeat(100_000));
    let negated = format!("{}this.id == 'x'", "!".repeat(100_000));
    let wide = vec!["this.id == 'x'"; 100_000].join(" || ");
    for f in [&nested, &negated, &wide] {
        assert!(Filter::parse(f).unwrap_err().to_string().contains("more than the 4096 accepted"));
    }
    let deep = |n: usize| format!("{}this.id == 'b1'{}", "(".repeat(n), ")".repeat(n));
    assert!(Filter::parse(&deep(MAX_FILTER_DEPTH)).unwrap().matches(&vm()));
    assert!(Filter::parse(&deep(MAX_FILTER_DEPTH + 1)).unwrap_err().to_string().contains("nest more than 32 deep"));
    let nots = |n: usize| format!("{}this.id == 'b1'", "!".repeat(n));
    assert!(Filter::parse(&nots(MAX_FILTER_DEPTH)).unwrap().matches(&vm()));
    assert!(Filter::parse(&nots(MAX_FILTER_DEPTH + 1)).unwrap_err().to_string().contains("nest more than 32 deep"));
    let terms = |n: usize| vec!["x==1"; n].join("||");
    assert!(Filter::parse(&terms(MAX_FILTER_TERMS)).is_ok());
    assert!(Filter::parse(&terms(MAX_FILTER_TERMS + 1)).unwrap_err().to_string().contains("more than 256 comparisons"));
    let order = vec!["this.id"; 1000].join(",");
    assert!(Order::parse(&order).unwrap_err().to_string().contains("more than the 4096 accepted"));
}

mod fuzz {
    //! The filter parser fuzzed: any text, and text made of its own tokens,
    //! never panics and never recurses without bound; what parses
    //! evaluates. A fixed number of cases, so the time is bounded.
    use proptest::prelude::*;

    use super::super::*;
    use super::vm;

    fn config() -> ProptestConfig {
        ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() }
    }

    /// Text made of the filter language's own pieces, in any order.
    fn filter_like() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            Just("("),
            Just(")"),
            Just("!"),
            Just("&&"),
            Just("||"),
            Just("=="),
            Just("!="),
            Just("<="),
            Just(" in "),
            Just("["),
            Just("]"),
            Just(","),
            Just("."),
            Just("this"),
            Just("this.id"),
            Just("this.metadata.labels['env']"),
            Just(".startsWith("),
            Just("'b1'"),
            Just("\"x"),
            Just("-1.5"),
            Just("9e99"),
            Just("true"),
            Just("READY"),
            Just("é"),
            Just(" "),
        ];
        prop::collection::vec(piece, 0..400).prop_map(|p| p.concat())
    }

    proptest! {
        #![proptest_config(config())]

        #[test]
        fn any_text_parses_or_is_refused_without_panicking(text in ".{0,300}") {
            if let Ok(f) = Filter::parse(&text) {
                f.matches(&vm());
            }
            let _ = Order::parse(&text);
        }

        #[test]
        fn token_soup_parses_or_is_refused_without_panicking(text in filter_like()) {
            match Filter::parse(&text) {
                Ok(f) => {
                    f.matches(&vm());
                    f.matches(&serde_json::Value::Null);
                }
                Err(e) => prop_assert!(!e.is_empty()),
            }
        }
    }
}
