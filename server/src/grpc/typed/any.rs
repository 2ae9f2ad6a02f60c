//! Template parameter values between `google.protobuf.Any` and the model's
//! [`ParameterValue`] (`{"@type", "value"}`, ProtoJSON's form of an `Any`).
//! The wrappers are read and written directly; `Value`, `ListValue` and
//! `Struct` through their descriptors (so a value nested past protobuf's
//! recursion limit is refused, not followed).

use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage, SerializeOptions};
use prost_types::Any;
use serde_json::{Number, Value};
use vmaas_model::ParameterValue;

/// The prefix of the `@type` of protobuf's well-known types.
const WELL_KNOWN: &str = "type.googleapis.com/google.protobuf.";

/// ProtoJSON as the REST API writes it: 64-bit integers as numbers.
const JSON: SerializeOptions = SerializeOptions::new().use_proto_field_name(true).stringify_64_bit_integers(false);

/// Why an `Any` is no template parameter value.
#[derive(Debug, thiserror::Error)]
pub enum AnyError {
    /// Its bytes are not a message of its type.
    #[error("cannot be read as {0}: {1}")]
    Decode(String, String),
    /// Its type is none a parameter takes.
    #[error("has type {0}: expected a google.protobuf wrapper, Value, ListValue or Struct")]
    Type(String),
}

/// The value `any` holds, with its `@type`.
pub fn to_parameter(pool: &DescriptorPool, any: &Any) -> Result<ParameterValue, AnyError> {
    let name = any.type_url.strip_prefix(WELL_KNOWN).ok_or_else(|| AnyError::Type(any.type_url.clone()))?;
    let bad = |e: &dyn std::fmt::Display| AnyError::Decode(name.to_owned(), e.to_string());
    let bytes = any.value.as_slice();
    let value = match name {
        "BoolValue" => Value::from(bool::decode(bytes).map_err(|e| bad(&e))?),
        "Int32Value" => Value::from(i32::decode(bytes).map_err(|e| bad(&e))?),
        "Int64Value" => Value::from(i64::decode(bytes).map_err(|e| bad(&e))?),
        "UInt32Value" => Value::from(u32::decode(bytes).map_err(|e| bad(&e))?),
        "UInt64Value" => Value::from(u64::decode(bytes).map_err(|e| bad(&e))?),
        "FloatValue" => float(f64::from(f32::decode(bytes).map_err(|e| bad(&e))?)),
        "DoubleValue" => float(f64::decode(bytes).map_err(|e| bad(&e))?),
        "StringValue" => Value::from(String::decode(bytes).map_err(|e| bad(&e))?),
        "Value" | "ListValue" | "Struct" => reflected(pool, name, bytes)?,
        _ => return Err(AnyError::Type(any.type_url.clone())),
    };
    Ok(ParameterValue { type_url: Some(any.type_url.clone()), value })
}

/// `p` as an `Any`: of its `@type`, else of the wrapper its value fits.
pub fn from_parameter(pool: &DescriptorPool, p: &ParameterValue) -> Any {
    let type_url = p.type_url.clone().unwrap_or_else(|| format!("{WELL_KNOWN}{}", crate::grpc::wire::wrapper_of(&p.value)));
    let v = &p.value;
    let name = type_url.strip_prefix(WELL_KNOWN).unwrap_or_default();
    let value = match name {
        "BoolValue" => v.as_bool().map(|b| b.encode_to_vec()),
        "Int32Value" => integer(v).and_then(|n| i32::try_from(n).ok()).map(|n| n.encode_to_vec()),
        "Int64Value" => integer(v).and_then(|n| i64::try_from(n).ok()).map(|n| n.encode_to_vec()),
        "UInt32Value" => integer(v).and_then(|n| u32::try_from(n).ok()).map(|n| n.encode_to_vec()),
        "UInt64Value" => integer(v).and_then(|n| u64::try_from(n).ok()).map(|n| n.encode_to_vec()),
        #[allow(clippy::cast_possible_truncation)]
        "FloatValue" => v.as_f64().map(|f| (f as f32).encode_to_vec()),
        "DoubleValue" => v.as_f64().map(|f| f.encode_to_vec()),
        "StringValue" => v.as_str().map(|s| s.to_owned().encode_to_vec()),
        _ => encoded(pool, name, v),
    };
    Any { type_url, value: value.unwrap_or_default() }
}

/// A 64-bit integer as ProtoJSON writes it: a number, or a string.
fn integer(v: &Value) -> Option<i128> {
    match v {
        Value::Number(n) => n.as_i64().map(i128::from).or_else(|| n.as_u64().map(i128::from)),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

fn float(f: f64) -> Value {
    Number::from_f64(f).map_or(Value::Null, Value::Number)
}

/// The JSON of the `google.protobuf.{name}` message `bytes`.
fn reflected(pool: &DescriptorPool, name: &str, bytes: &[u8]) -> Result<Value, AnyError> {
    let bad = |e: &dyn std::fmt::Display| AnyError::Decode(name.to_owned(), e.to_string());
    let desc = pool.get_message_by_name(&format!("google.protobuf.{name}")).ok_or_else(|| bad(&"no descriptor of it is served"))?;
    let msg = DynamicMessage::decode(desc, bytes).map_err(|e| bad(&e))?;
    msg.serialize_with_options(serde_json::value::Serializer, &JSON).map_err(|e| bad(&e))
}

/// `v` encoded as a `google.protobuf.{name}` message, if it is one.
fn encoded(pool: &DescriptorPool, name: &str, v: &Value) -> Option<Vec<u8>> {
    let desc = pool.get_message_by_name(&format!("google.protobuf.{name}"))?;
    DynamicMessage::deserialize(desc, v.clone()).ok().map(|m| m.encode_to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool() -> DescriptorPool {
        DescriptorPool::decode(crate::grpc::DESCRIPTORS).unwrap()
    }

    #[test]
    fn wrappers_and_values_go_both_ways() {
        let pool = pool();
        for (t, v) in [
            ("Int32Value", serde_json::json!(4)),
            ("Int64Value", serde_json::json!(-5)),
            ("BoolValue", serde_json::json!(true)),
            ("StringValue", serde_json::json!("2Gi")),
            ("DoubleValue", serde_json::json!(1.5)),
            ("ListValue", serde_json::json!(["a", 1.0])),
            ("Struct", serde_json::json!({"k": "v"})),
        ] {
            let p = ParameterValue { type_url: Some(format!("{WELL_KNOWN}{t}")), value: v };
            let any = from_parameter(&pool, &p);
            assert_eq!(to_parameter(&pool, &any).unwrap(), p, "{t}");
        }
    }

    #[test]
    fn the_seeds_plain_values_get_the_wrapper_they_fit() {
        let pool = pool();
        let any = from_parameter(&pool, &ParameterValue::new(3));
        assert_eq!(any.type_url, format!("{WELL_KNOWN}Int64Value"));
        assert_eq!(to_parameter(&pool, &any).unwrap().value, serde_json::json!(3));
    }

    #[test]
    fn other_types_and_bad_bytes_are_refused() {
        let pool = pool();
        let odd = Any { type_url: "type.googleapis.com/acme.Thing".into(), value: vec![] };
        assert!(matches!(to_parameter(&pool, &odd), Err(AnyError::Type(_))));
        let bad = Any { type_url: format!("{WELL_KNOWN}StringValue"), value: vec![0x0a, 0x05, b'a'] };
        assert!(matches!(to_parameter(&pool, &bad), Err(AnyError::Decode(..))));
    }
}
