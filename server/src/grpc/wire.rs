//! What the gateway and the typed services share about protobuf's wire
//! forms: the wrapper type a JSON value fits, and whether an update mask's
//! path names a field of a message.

use prost_reflect::{Kind, MessageDescriptor};
use serde_json::Value;

/// The wrapper type whose JSON form `v` is.
pub fn wrapper_of(v: &Value) -> &'static str {
    match v {
        Value::Bool(_) => "BoolValue",
        Value::Number(n) if n.is_i64() || n.is_u64() => "Int64Value",
        Value::Number(_) => "DoubleValue",
        Value::String(_) => "StringValue",
        Value::Array(_) => "ListValue",
        Value::Object(_) => "Struct",
        Value::Null => "Value",
    }
}

/// Why an update mask's path names no field.
#[derive(Debug, thiserror::Error)]
pub enum MaskPathError {
    /// The message has no field of that name.
    #[error("{message} has no field {field}")]
    NoField { message: String, field: String },
    /// The path goes on past a field that is not a message.
    #[error("{0} has no fields")]
    NotAMessage(String),
}

/// Whether `steps` names a field of `desc` (maps end the walk: their keys are data).
pub fn check_path(desc: MessageDescriptor, steps: &[&str]) -> Result<(), MaskPathError> {
    let Some((first, rest)) = steps.split_first() else { return Ok(()) };
    let field = desc
        .get_field_by_name(first)
        .ok_or_else(|| MaskPathError::NoField { message: desc.name().to_owned(), field: (*first).to_owned() })?;
    match (field.kind(), rest.is_empty()) {
        (_, true) => Ok(()),
        (Kind::Message(m), false) if !field.is_map() && !field.is_list() => check_path(m, rest),
        _ if field.is_map() => Ok(()),
        _ => Err(MaskPathError::NotAMessage((*first).to_owned())),
    }
}
