//! Terraform values on the wire: cty values encoded as msgpack (or JSON for
//! raw state), with unknown values as msgpack extension type 0.

use rmpv::Value;

use crate::proto::DynamicValue;

/// Why a value could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum ValueError {
    /// Bad msgpack.
    #[error("decoding a msgpack value: {0}")]
    Msgpack(String),
    /// Bad JSON.
    #[error("decoding a JSON value: {0}")]
    Json(#[from] serde_json::Error),
}

/// An unknown value ("known after apply").
pub fn unknown() -> Value {
    Value::Ext(0, vec![0])
}

/// Whether `v` is unknown (plain or refined).
pub fn is_unknown(v: &Value) -> bool {
    matches!(v, Value::Ext(0 | 12, _))
}

/// Decodes a dynamic value (msgpack, else JSON); absent is null.
pub fn decode(dv: Option<&DynamicValue>) -> Result<Value, ValueError> {
    let Some(dv) = dv else { return Ok(Value::Nil) };
    if !dv.msgpack.is_empty() {
        return rmpv::decode::read_value(&mut dv.msgpack.as_slice()).map_err(|e| ValueError::Msgpack(e.to_string()));
    }
    if !dv.json.is_empty() {
        return Ok(from_json(&serde_json::from_slice(&dv.json)?));
    }
    Ok(Value::Nil)
}

/// Encodes a value as msgpack.
pub fn encode(v: &Value) -> DynamicValue {
    let mut buf = Vec::new();
    // Writing to a Vec cannot fail.
    let _ = rmpv::encode::write_value(&mut buf, v);
    DynamicValue { msgpack: buf, json: Vec::new() }
}

/// Converts JSON (stored state) into a value.
pub fn from_json(j: &serde_json::Value) -> Value {
    match j {
        serde_json::Value::Null => Value::Nil,
        serde_json::Value::Bool(b) => Value::Boolean(*b),
        serde_json::Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => Value::from(i),
            (None, Some(f)) => Value::F64(f),
            _ => Value::Nil,
        },
        serde_json::Value::String(s) => Value::from(s.as_str()),
        serde_json::Value::Array(a) => Value::Array(a.iter().map(from_json).collect()),
        serde_json::Value::Object(o) => Value::Map(o.iter().map(|(k, v)| (Value::from(k.as_str()), from_json(v))).collect()),
    }
}

/// The attribute `key` of an object value (null if absent).
pub fn get<'a>(obj: &'a Value, key: &str) -> &'a Value {
    static NIL: Value = Value::Nil;
    match obj {
        Value::Map(m) => m.iter().find(|(k, _)| k.as_str() == Some(key)).map(|(_, v)| v).unwrap_or(&NIL),
        _ => &NIL,
    }
}

/// Sets (or adds) attribute `key` of an object value.
pub fn set(obj: &mut Value, key: &str, v: Value) {
    if let Value::Map(m) = obj {
        match m.iter_mut().find(|(k, _)| k.as_str() == Some(key)) {
            Some((_, slot)) => *slot = v,
            None => m.push((Value::from(key), v)),
        }
    }
}

/// The string in `v`, if it is a known string.
pub fn string(v: &Value) -> Option<String> {
    v.as_str().map(str::to_owned)
}

/// An object value from pairs.
pub fn object(pairs: Vec<(&str, Value)>) -> Value {
    Value::Map(pairs.into_iter().map(|(k, v)| (Value::from(k), v)).collect())
}

/// A string value, or null.
pub fn opt_string(s: Option<&str>) -> Value {
    s.map(Value::from).unwrap_or(Value::Nil)
}

/// The entries of a known map of strings.
pub fn string_map(v: &Value) -> Vec<(String, Value)> {
    match v {
        Value::Map(m) => m.iter().filter_map(|(k, v)| Some((k.as_str()?.to_owned(), v.clone()))).collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_with_unknowns() {
        let v = object(vec![
            ("id", unknown()),
            ("name", Value::from("web")),
            ("params", Value::Map(vec![(Value::from("vm_memory"), Value::from("4Gi"))])),
        ]);
        let back = decode(Some(&encode(&v))).unwrap();
        assert_eq!(back, v);
        assert!(is_unknown(get(&back, "id")));
        assert_eq!(string(get(&back, "name")).as_deref(), Some("web"));
        assert!(get(&back, "missing").is_nil());
    }

    #[test]
    fn json_state_becomes_a_value() {
        let j = serde_json::json!({"id": "x", "template_parameters": {"a": "1"}, "timeouts": null});
        let v = from_json(&j);
        assert_eq!(string(get(&v, "id")).as_deref(), Some("x"));
        assert!(get(&v, "timeouts").is_nil());
        let mut v = v;
        set(&mut v, "id", Value::from("y"));
        assert_eq!(string(get(&v, "id")).as_deref(), Some("y"));
    }
}
