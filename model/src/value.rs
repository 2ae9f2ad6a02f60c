//! Parameter values: on the wire as `{"value": ...}`, checked as [`TypedValue`].

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::quantity::Quantity;
use crate::template::{ParameterType, describe};

/// A parameter value as written on the wire: `{"value": 4}`.
///
/// The JSON value is kept exactly as written, so it is stored and returned unchanged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ParameterValue {
    /// The value: a bool, an integer, a string, a quantity string or a list of strings.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub value: Value,
}

impl ParameterValue {
    /// Wraps a JSON value.
    pub fn new(value: impl Into<Value>) -> Self {
        Self { value: value.into() }
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
    pub fn check(ty: ParameterType, v: &Value) -> Result<Self, String> {
        let wrong = |expected: &str| format!("expected {expected}, got {}", describe(v));
        match ty {
            ParameterType::Bool => v.as_bool().map(Self::Bool).ok_or_else(|| wrong("a bool (true or false)")),
            ParameterType::Integer => v.as_i64().map(Self::Integer).ok_or_else(|| wrong("an integer")),
            ParameterType::String => v.as_str().map(|s| Self::String(s.to_owned())).ok_or_else(|| wrong("a string")),
            ParameterType::Quantity => match v {
                Value::String(s) => Quantity::parse(s).map(Self::Quantity).map_err(|e| e.to_string()),
                Value::Number(n) if n.is_u64() => serde_json::from_value(v.clone()).map(Self::Quantity).map_err(|e| e.to_string()),
                _ => Err(wrong("a quantity such as \"4Gi\"")),
            },
            ParameterType::List => match v {
                Value::Array(items) => items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| {
                        item.as_str().map(str::to_owned).ok_or_else(|| format!("item {i}: expected a string, got {}", describe(item)))
                    })
                    .collect::<Result<_, _>>()
                    .map(Self::List),
                _ => Err(wrong("a list of strings")),
            },
        }
    }

    /// Converts text (a CLI flag, a Terraform string) into a value of type `ty`.
    /// Lists are comma-separated; an empty text is an empty list.
    pub fn from_text(ty: ParameterType, text: &str) -> Result<Self, String> {
        match ty {
            ParameterType::Bool => match text {
                "true" | "yes" | "on" | "1" => Ok(Self::Bool(true)),
                "false" | "no" | "off" | "0" => Ok(Self::Bool(false)),
                _ => Err(format!("expected a bool (true or false), got {text:?}")),
            },
            ParameterType::Integer => text.trim().parse().map(Self::Integer).map_err(|_| format!("expected an integer, got {text:?}")),
            ParameterType::String => Ok(Self::String(text.to_owned())),
            ParameterType::Quantity => Quantity::parse(text.trim()).map(Self::Quantity).map_err(|e| e.to_string()),
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
