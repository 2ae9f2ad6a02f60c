use serde_json::{Value, json};

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
        "this.status.cores >= 4 && this.status.cores < 8.5",
        "this.metadata.creation_timestamp > timestamp('2026-11-01T00:00:00Z')",
        "this.metadata.creation_timestamp == timestamp('2026-11-23T11:00:00+01:00')",
        "this.metadata.creation_timestamp - duration('1h') < timestamp('2026-11-23T09:30:00Z')",
        "this.metadata.name == 'x' || this.spec.template == 'tiny'",
        "!has(this.metadata.deletion_timestamp)",
        "has(this.metadata.labels.env) && this.metadata.labels.env == 'prod'",
        "this.metadata.labels.exists(k, k == 'env')",
        "this.metadata.creators.all(c, c.size() > 2)",
        "'alice' in this.metadata.creators",
        "size(this.metadata.name) == 5",
        "this.nothing == 1 || this.id == 'b1'",
        "this.status.cores * 2 == 8",
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
        "this.metadata.creation_timestamp > '2026-11-01T00:00:00Z'",
        "has(this.metadata.deletion_timestamp)",
        "this.nothing == 1 && true",
        "!(this.nothing == 1)",
        "this.id",
    ] {
        assert!(!passes(f), "{f}");
    }
}

#[test]
fn bad_filters_say_where() {
    for f in ["this.metadata.name ==", "this.id in ['a' 'b']", "(this.id == 'a'", "this.id == 'a", "this.id = 'a'", "this.id == 'a' this"] {
        let e = Filter::parse(f).unwrap_err();
        assert!(matches!(e, QueryError::Syntax(_)), "{f}: {e:?}");
        assert!(e.to_string().starts_with("1:"), "{f}: {e}");
    }
}

#[test]
fn macros_range_over_the_object_only_and_never_nest() {
    for f in [
        "[1, 2, 3].exists(x, x == 2)",
        "this.metadata.creators.exists(c, this.metadata.creators.all(d, d == c))",
        "this.metadata.creators.map(c, c).exists(c, true)",
    ] {
        let e = Filter::parse(f).unwrap_err();
        assert!(matches!(e, QueryError::Macro(_)), "{f}: {e:?}");
        assert!(e.to_string().contains("must range over the object's own fields"), "{f}: {e}");
    }
}

#[test]
fn enum_names_are_strings_but_a_macros_variables_are_not() {
    assert!(passes("this.status.state in [VIRTUAL_MACHINE_STATE_READY, VIRTUAL_MACHINE_STATE_STOPPED]"));
    assert!(passes("this.metadata.creators.exists(X, X == 'alice')"));
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
    let nots = |n: usize| format!("{}(this.id == 'b1')", "!(".repeat(n)) + &")".repeat(n);
    assert!(Filter::parse(&nots(MAX_FILTER_DEPTH - 1)).unwrap().matches(&vm()) == (MAX_FILTER_DEPTH % 2 == 1));
    assert_eq!(Filter::parse(&nots(MAX_FILTER_DEPTH + 1)).unwrap_err(), QueryError::TooDeep);
    // Within a tokio worker's stack (2 MiB), the longest chains parse or are refused.
    let chains = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(|| {
            [
                "!".repeat(4000) + "true",
                "-".repeat(4000) + "1 == 1",
                "a".to_owned() + &".b".repeat(2000),
                "1".to_owned() + &"+1".repeat(2000),
            ]
            .map(|f| Filter::parse(&f).map(|f| f.matches(&vm())))
        })
        .unwrap()
        .join()
        .unwrap();
    // The parser folds repeated `!` and `-`; long selections and sums are too deep.
    assert_eq!(chains, [Ok(true), Ok(true), Err(QueryError::TooDeep), Err(QueryError::TooDeep)]);
    let terms = |n: usize| vec!["x==1"; n].join("||");
    assert!(Filter::parse(&terms(MAX_FILTER_TERMS)).is_ok());
    assert!(Filter::parse(&terms(MAX_FILTER_TERMS + 1)).unwrap_err().to_string().contains("more than 256 operators and calls"));
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
                Err(e) => prop_assert!(!e.to_string().is_empty()),
            }
        }
    }
}
