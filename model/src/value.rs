//! Parameter values: on the wire as `{"value": ...}`, checked as [`TypedValue`].

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::quantity::Quantity;

/// A parameter value as written on the wire: the seed's `{"value": 4}`, or
/// a `google.protobuf.Any` in ProtoJSON as OSAC's clients send it:
/// `{"@type": "type.googleapis.com/google.protobuf.Int32Value", "value": 4}`.
///
/// It is kept exactly as written, so it is stored and returned in the form
/// the request used; [`ParameterValue::json`] is the plain value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ParameterValue {
    /// The `Any`'s type: a protobuf wrapper type (`BoolValue`,
    /// `Int32Value`, `Int64Value`, `UInt32Value`, `UInt64Value`,
    /// `FloatValue`, `DoubleValue`, `StringValue`), `Value`, `ListValue` or
    /// `Struct`; absent in the seed's form.
    #[serde(rename = "@type", default, skip_serializing_if = "Option::is_none")]
    pub type_url: Option<String>,
    /// The value: a bool, an integer, a string, a quantity string or a list of strings.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub value: Value,
}

/// The prefix of the `@type` of protobuf's well-known types.
const WELL_KNOWN: &str = "type.googleapis.com/google.protobuf.";

impl ParameterValue {
    /// Wraps a JSON value, in the seed's form.
    pub fn new(value: impl Into<Value>) -> Self {
        Self { type_url: None, value: value.into() }
    }

    /// The plain JSON value, unwrapped from its `Any` (64-bit integers come
    /// as strings in ProtoJSON), or why the `@type` and value do not agree.
    pub fn json(&self) -> Result<Value, ValueError> {
        let Some(t) = self.type_url.as_deref() else { return Ok(self.value.clone()) };
        let Some(name) = t.strip_prefix(WELL_KNOWN) else {
            return Err(ValueError::TypeUrl(t.to_owned()));
        };
        let v = &self.value;
        let ok = match name {
            "BoolValue" => v.is_boolean(),
            "Int32Value" | "UInt32Value" => v.is_i64() || v.is_u64(),
            "Int64Value" | "UInt64Value" => {
                return int64(v).ok_or_else(|| ValueError::NotInteger { name: name.to_owned(), got: describe(v) });
            }
            "FloatValue" | "DoubleValue" => v.is_number(),
            "StringValue" => v.is_string(),
            "ListValue" => v.is_array(),
            "Struct" => v.is_object(),
            "Value" => true,
            _ => return Err(ValueError::WellKnown(t.to_owned())),
        };
        if ok { Ok(v.clone()) } else { Err(ValueError::Holds { name: name.to_owned(), got: describe(v) }) }
    }
}

/// Why a parameter's value is refused: its type, or a constraint of its
/// parameter. The text is what the API's field error says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    /// An `@type` outside `google.protobuf`.
    #[error("@type {0:?} is not supported; use a {WELL_KNOWN}… wrapper type, Value, ListValue or Struct")]
    TypeUrl(String),
    /// A `google.protobuf` type that is no wrapper, `Value`, `ListValue` or `Struct`.
    #[error("@type {0:?} is not supported; use a wrapper type, Value, ListValue or Struct")]
    WellKnown(String),
    /// A 64-bit wrapper around something other than an integer.
    #[error("a {name} must be an integer, got {got}")]
    NotInteger {
        /// The wrapper.
        name: String,
        /// What it holds, described.
        got: String,
    },
    /// A wrapper around a value of another type.
    #[error("a {name} cannot hold {got}")]
    Holds {
        /// The wrapper.
        name: String,
        /// What it holds, described.
        got: String,
    },
    /// A value of another type than the parameter's.
    #[error("expected {expected}, got {got}")]
    Expected {
        /// The type, in words.
        expected: &'static str,
        /// What was given, described.
        got: String,
    },
    /// A list item that is not a string.
    #[error("item {index}: expected a string, got {got}")]
    Item {
        /// Its place.
        index: usize,
        /// What it is, described.
        got: String,
    },
    /// A quantity that does not parse.
    #[error(transparent)]
    Quantity(#[from] crate::quantity::QuantityError),
    /// A number that is no quantity.
    #[error("{0}")]
    QuantityNumber(String),
    /// A constraint of the parameter the value breaks: below its minimum,
    /// above its maximum, not among its values, not matching its pattern.
    #[error("{0}")]
    Constraint(String),
    /// A parameter the template does not declare.
    #[error("unknown parameter {name:?}; {valid}")]
    UnknownParameter {
        /// The name given.
        name: String,
        /// The parameters there are, in words.
        valid: String,
    },
}

/// The reason, as a field error takes it.
impl From<ValueError> for String {
    fn from(e: ValueError) -> String {
        e.to_string()
    }
}

/// A ProtoJSON 64-bit integer: a number, or a string of one.
fn int64(v: &Value) -> Option<Value> {
    match v {
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(v.clone()),
        Value::String(s) => s.parse::<i64>().ok().map(Value::from).or_else(|| s.parse::<u64>().ok().map(Value::from)),
        _ => None,
    }
}

/// A value checked against a parameter type.
#[derive(Debug, Clone, PartialEq)]
pub enum TypedValue {
    /// A bool.
    Bool(bool),
    /// An integer.
    Integer(i64),
    /// A string.
    String(String),
    /// A quantity, keeping its text.
    Quantity(Quantity),
    /// A list of strings.
    List(Vec<String>),
}

impl TypedValue {
    /// Checks that a JSON value has type `ty`, with a reason when it has not.
    pub fn check(ty: ParameterType, v: &Value) -> Result<Self, ValueError> {
        let wrong = |expected: &'static str| ValueError::Expected { expected, got: describe(v) };
        match ty {
            ParameterType::Bool => v.as_bool().map(Self::Bool).ok_or_else(|| wrong("a bool (true or false)")),
            ParameterType::Integer => v.as_i64().map(Self::Integer).ok_or_else(|| wrong("an integer")),
            ParameterType::String => v.as_str().map(|s| Self::String(s.to_owned())).ok_or_else(|| wrong("a string")),
            ParameterType::Quantity => match v {
                Value::String(s) => Ok(Self::Quantity(Quantity::parse(s)?)),
                Value::Number(n) if n.is_u64() => {
                    serde_json::from_value(v.clone()).map(Self::Quantity).map_err(|e| ValueError::QuantityNumber(e.to_string()))
                }
                _ => Err(wrong("a quantity such as \"4Gi\"")),
            },
            ParameterType::List => match v {
                Value::Array(items) => items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| item.as_str().map(str::to_owned).ok_or_else(|| ValueError::Item { index: i, got: describe(item) }))
                    .collect::<Result<_, _>>()
                    .map(Self::List),
                _ => Err(wrong("a list of strings")),
            },
        }
    }

    /// Converts text (a CLI flag, a Terraform string) into a value of type `ty`.
    /// Lists are comma-separated; an empty text is an empty list.
    pub fn from_text(ty: ParameterType, text: &str) -> Result<Self, ValueError> {
        let wrong = |expected: &'static str| ValueError::Expected { expected, got: format!("{text:?}") };
        match ty {
            ParameterType::Bool => match text {
                "true" | "yes" | "on" | "1" => Ok(Self::Bool(true)),
                "false" | "no" | "off" | "0" => Ok(Self::Bool(false)),
                _ => Err(wrong("a bool (true or false)")),
            },
            ParameterType::Integer => text.trim().parse().map(Self::Integer).map_err(|_| wrong("an integer")),
            ParameterType::String => Ok(Self::String(text.to_owned())),
            ParameterType::Quantity => Ok(Self::Quantity(Quantity::parse(text.trim())?)),
            ParameterType::List if text.is_empty() => Ok(Self::List(Vec::new())),
            ParameterType::List => Ok(Self::List(text.split(',').map(|s| s.trim().to_owned()).collect())),
        }
    }

    /// The value as JSON, quantities as the text written.
    pub fn to_json(&self) -> Value {
        match self {
            Self::Bool(b) => Value::Bool(*b),
            Self::Integer(n) => Value::from(*n),
            Self::String(s) => Value::String(s.clone()),
            Self::Quantity(q) => Value::String(q.as_str().to_owned()),
            Self::List(l) => Value::from(l.clone()),
        }
    }
}

/// The type of a template parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ParameterType {
    /// `true` or `false`.
    #[serde(alias = "boolean", alias = "type.googleapis.com/google.protobuf.BoolValue")]
    Bool,
    /// A whole number.
    #[serde(
        alias = "int",
        alias = "type.googleapis.com/google.protobuf.Int32Value",
        alias = "type.googleapis.com/google.protobuf.Int64Value",
        alias = "type.googleapis.com/google.protobuf.UInt32Value",
        alias = "type.googleapis.com/google.protobuf.UInt64Value"
    )]
    Integer,
    /// Any text (a quantity when it sets a quantity field).
    #[serde(alias = "type.googleapis.com/google.protobuf.StringValue")]
    String,
    /// A resource quantity such as `4Gi`.
    Quantity,
    /// A list of strings.
    #[serde(alias = "string_list", alias = "list(string)", alias = "type.googleapis.com/google.protobuf.ListValue")]
    List,
}

impl ParameterType {
    /// The type's name as written in templates.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Bool => "bool",
            Self::Integer => "integer",
            Self::String => "string",
            Self::Quantity => "quantity",
            Self::List => "list",
        }
    }
}

impl fmt::Display for ParameterType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A short description of a JSON value for error messages: `the string "4"`.
pub fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("the bool {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) if s.chars().count() > 40 => format!("a string of {} characters", s.chars().count()),
        Value::String(s) => format!("the string {s:?}"),
        Value::Array(a) => format!("a list of {} items", a.len()),
        Value::Object(_) => "an object".into(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn any(t: &str, v: Value) -> ParameterValue {
        serde_json::from_value(json!({"@type": format!("{WELL_KNOWN}{t}"), "value": v})).unwrap()
    }

    #[test]
    fn any_values_unwrap_to_their_json() {
        assert_eq!(any("Int32Value", json!(4)).json(), Ok(json!(4)));
        assert_eq!(any("Int64Value", json!("8")).json(), Ok(json!(8)));
        assert_eq!(any("StringValue", json!("4Gi")).json(), Ok(json!("4Gi")));
        assert_eq!(any("Value", json!(["a"])).json(), Ok(json!(["a"])));
        assert_eq!(ParameterValue::new(true).json(), Ok(json!(true)));
    }

    #[test]
    fn they_are_kept_as_written() {
        let written = json!({"@type": "type.googleapis.com/google.protobuf.Int64Value", "value": "8"});
        let p: ParameterValue = serde_json::from_value(written.clone()).unwrap();
        assert_eq!(serde_json::to_value(&p).unwrap(), written);
        assert_eq!(serde_json::to_value(ParameterValue::new(4)).unwrap(), json!({"value": 4}));
    }

    #[test]
    fn mismatches_say_why() {
        assert!(any("BoolValue", json!("yes")).json().unwrap_err().to_string().contains("BoolValue cannot hold"));
        assert!(any("Int64Value", json!("x")).json().unwrap_err().to_string().contains("must be an integer"));
        assert!(any("Timestamp", json!("2026-01-01T00:00:00Z")).json().unwrap_err().to_string().contains("not supported"));
        let foreign = ParameterValue { type_url: Some("example.com/Foo".into()), value: json!(1) };
        assert!(foreign.json().unwrap_err().to_string().contains("\"example.com/Foo\" is not supported"));
    }
}
