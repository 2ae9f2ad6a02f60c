//! cel-spec's conformance cases for what the filter documents (logic,
//! comparisons, `in`, strings, timestamps, map fields and `has`), as
//! `scripts/cel-cases.py` extracted them from cel-spec's
//! `tests/simple/testdata` (the commit is the file's first line): each
//! expression, parsed and evaluated as a filter is, has the value cel-spec
//! gives it, or fails where cel-spec says it fails.

use cel::Value;
use serde_json::{Value as Json, json};

use super::Filter;

const CASES: &str = include_str!("../../tests/cel-spec/cases.jsonl");

/// Whether `got` is the value the case names.
fn is_expected(case: &Json, got: &Result<Value, cel::ExecutionError>) -> bool {
    match (got, case) {
        (Err(_), c) => c.get("error").is_some(),
        (Ok(Value::Bool(b)), c) => c.get("bool") == Some(&json!(b)),
        (Ok(Value::Int(i)), c) => c.get("int64") == Some(&json!(i)),
        (Ok(Value::UInt(u)), c) => c.get("uint64") == Some(&json!(u)),
        (Ok(Value::Float(f)), c) => c.get("double").and_then(Json::as_f64) == Some(*f),
        (Ok(Value::String(s)), c) => c.get("string").and_then(Json::as_str) == Some(s.as_str()),
        (Ok(Value::Null), c) => c.get("null").is_some(),
        _ => false,
    }
}

#[test]
fn every_documented_cel_spec_case_has_its_value() {
    let mut lines = CASES.lines();
    let source: Json = serde_json::from_str(lines.next().unwrap_or_default()).unwrap_or_default();
    assert!(source["commit"].as_str().is_some_and(|c| c.len() == 40), "the cases name their cel-spec commit");
    let (mut passed, mut failed) = (0, Vec::new());
    for line in lines {
        let case: Json = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        let expr = case["expr"].as_str().unwrap_or_default();
        let got = Filter::parse(expr).map(|f| f.evaluate(&Json::Null));
        match got {
            Ok(got) if is_expected(&case, &got) => passed += 1,
            other => failed.push(format!("{}: {expr} gave {other:?}", case["case"])),
        }
    }
    assert!(failed.is_empty(), "{} passed, {} failed:\n{}", passed, failed.len(), failed.join("\n"));
    assert!(passed >= 250, "only {passed} cases ran");
}
