//! An object's JSON as CEL values: numbers as `int` where they are whole
//! (else `double`), and RFC 3339 text in time fields as `timestamp`.

use std::collections::HashMap;
use std::sync::Arc;

use cel::Value;
use cel::objects::{Key, Map};
use chrono::DateTime;
use serde_json::Value as Json;

/// Whether a field of this name holds a time: `…_timestamp`, `…_at`, `…_time`.
fn is_time_field(key: &str) -> bool {
    key.ends_with("_timestamp") || key.ends_with("_at") || key.ends_with("_time") || key == "timestamp"
}

/// `json` as a CEL value; `key` is the name of the field holding it.
pub(super) fn to_cel(json: &Json, key: Option<&str>) -> Value {
    match json {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Value::Int(i),
            (None, Some(u)) => Value::UInt(u),
            _ => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Json::String(s) => match key.filter(|k| is_time_field(k)).and_then(|_| DateTime::parse_from_rfc3339(s).ok()) {
            Some(t) => Value::Timestamp(t),
            None => Value::String(Arc::new(s.clone())),
        },
        Json::Array(items) => Value::List(Arc::new(items.iter().map(|i| to_cel(i, None)).collect())),
        Json::Object(fields) => {
            let map: HashMap<Key, Value> = fields.iter().map(|(k, v)| (Key::String(Arc::new(k.clone())), to_cel(v, Some(k)))).collect();
            Value::Map(Map { map: Arc::new(map) })
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn times_become_timestamps_and_whole_numbers_ints() {
        let v = to_cel(&json!({"creation_timestamp": "2026-11-23T10:00:00Z", "name": "2026-11-23T10:00:00Z", "n": 4, "x": 1.5}), None);
        let Value::Map(m) = v else { panic!("not a map: {v:?}") };
        let get = |k: &str| m.map.get(&Key::String(Arc::new(k.into()))).cloned();
        assert!(matches!(get("creation_timestamp"), Some(Value::Timestamp(_))));
        assert!(matches!(get("name"), Some(Value::String(_))));
        assert_eq!(get("n"), Some(Value::Int(4)));
        assert_eq!(get("x"), Some(Value::Float(1.5)));
    }
}
