//! Template parameters: their definitions as published, their checked form
//! with the constraints their type allows, and the check of a value.

use std::fmt;

use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::fields::SpecField;
use crate::quantity::Quantity;
use crate::validation::{ValidationErrors, check_identifier};
pub use crate::value::{ParameterType, describe};
use crate::value::{ParameterValue, TypedValue, ValueError};

/// A template parameter, as written by the provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ParameterDefinition {
    /// The name tenants use in `template_parameters`.
    pub name: String,
    /// Short human title.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub title: String,
    /// Longer description, in Markdown.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// The type; when absent it comes from the mapped spec field, else from the default.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ParameterType>,
    /// Whether a tenant must set it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub required: bool,
    /// Value used when the tenant sets none, wrapped as `{"value": ...}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<ParameterValue>,
    /// Smallest value (integer, quantity), length (string) or item count (list).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub min: Option<Value>,
    /// Largest value (integer, quantity), length (string) or item count (list).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub max: Option<Value>,
    /// The only values allowed (items, for a list).
    #[serde(rename = "enum", default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Vec<Object>>))]
    pub allowed: Option<Vec<Value>>,
    /// A regular expression every string (or list item) must match, anchored at both ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// The spec field this parameter sets; defaults from the name (`vm_memory` → `memory`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, example = "memory"))]
    pub maps_to: Option<SpecField>,
}

/// A checked parameter type with its constraints: only the constraints that
/// make sense for the type can be represented.
#[derive(Debug, Clone)]
pub enum Kind {
    /// `true` or `false`.
    Bool,
    /// A whole number within bounds.
    Integer {
        /// Inclusive lower bound.
        min: Option<i64>,
        /// Inclusive upper bound.
        max: Option<i64>,
        /// The only values allowed.
        allowed: Option<Vec<i64>>,
    },
    /// Text.
    String {
        /// Minimum length in characters.
        min_len: Option<usize>,
        /// Maximum length in characters.
        max_len: Option<usize>,
        /// The only values allowed.
        allowed: Option<Vec<String>>,
        /// Anchored pattern.
        pattern: Option<Regex>,
    },
    /// A quantity within bounds.
    Quantity {
        /// Inclusive lower bound.
        min: Option<Quantity>,
        /// Inclusive upper bound.
        max: Option<Quantity>,
        /// The only values allowed.
        allowed: Option<Vec<Quantity>>,
    },
    /// A list of strings.
    List {
        /// Minimum number of items.
        min_items: Option<usize>,
        /// Maximum number of items.
        max_items: Option<usize>,
        /// The only items allowed.
        allowed: Option<Vec<String>>,
        /// Anchored pattern for every item.
        pattern: Option<Regex>,
    },
}

impl Kind {
    /// The plain type.
    pub fn parameter_type(&self) -> ParameterType {
        match self {
            Self::Bool => ParameterType::Bool,
            Self::Integer { .. } => ParameterType::Integer,
            Self::String { .. } => ParameterType::String,
            Self::Quantity { .. } => ParameterType::Quantity,
            Self::List { .. } => ParameterType::List,
        }
    }
}

/// A checked parameter.
#[derive(Debug, Clone)]
pub struct Parameter {
    /// Name tenants use.
    pub name: String,
    /// Whether a tenant must set it.
    pub required: bool,
    /// The type and its constraints.
    pub kind: Kind,
    /// The default, already checked against `kind`.
    pub default: Option<TypedValue>,
    /// The spec field it sets, if any.
    pub target: Option<SpecField>,
}

fn infer_type(value: &Value) -> Option<ParameterType> {
    match value {
        Value::Bool(_) => Some(ParameterType::Bool),
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(ParameterType::Integer),
        Value::String(s) => {
            let has_suffix = s.ends_with(|c: char| c.is_ascii_alphabetic());
            if has_suffix && Quantity::parse(s).is_ok() { Some(ParameterType::Quantity) } else { Some(ParameterType::String) }
        }
        Value::Array(items) if items.iter().all(Value::is_string) => Some(ParameterType::List),
        _ => None,
    }
}

fn as_count(v: &Value) -> Option<usize> {
    v.as_u64().and_then(|n| usize::try_from(n).ok())
}

fn compile_pattern(p: &Option<String>, path: &str, errs: &mut ValidationErrors) -> Option<Regex> {
    let p = p.as_ref()?;
    match Regex::new(&format!("^(?:{p})$")) {
        Ok(r) => Some(r),
        Err(e) => {
            errs.push(format!("{path}.pattern"), format!("is not a valid regular expression: {e}"));
            None
        }
    }
}

impl ParameterDefinition {
    pub(super) fn compile(&self, path: &str, errs: &mut ValidationErrors) -> Option<Parameter> {
        let before = errs.0.len();
        if let Err(reason) = check_identifier(&self.name) {
            errs.push(format!("{path}.name"), reason);
        }
        let target = self.maps_to.or_else(|| SpecField::well_known(&self.name));
        let ty = match (self.kind, target, &self.default) {
            // A quantity is a string on the wire (OSAC declares it `StringValue`).
            (Some(ParameterType::String), Some(field), _) if field.parameter_type() == ParameterType::Quantity => ParameterType::Quantity,
            (Some(t), _, _) => t,
            (None, Some(field), _) => field.parameter_type(),
            (None, None, Some(d)) => match d.json().ok().as_ref().and_then(infer_type) {
                Some(t) => t,
                None => {
                    errs.push(
                        format!("{path}.default.value"),
                        "cannot infer a type from this default: use a bool, an integer, a string or a list of strings, or set \"type\"",
                    );
                    return None;
                }
            },
            (None, None, None) => {
                errs.push(format!("{path}.type"), "is required when the parameter has no default");
                return None;
            }
        };
        if let Some(field) = target
            && field.parameter_type() != ty
        {
            errs.push(
                format!("{path}.type"),
                format!("is {ty}, but the parameter sets spec field {} which takes a {}", field.as_str(), field.parameter_type()),
            );
        }
        let pattern_for = |errs: &mut ValidationErrors| compile_pattern(&self.pattern, path, errs);
        let reject = |what: &str, errs: &mut ValidationErrors| {
            errs.push(format!("{path}.{what}"), format!("does not apply to a {ty} parameter"));
        };
        let kind = match ty {
            ParameterType::Bool => {
                for (set, what) in [
                    (self.min.is_some(), "min"),
                    (self.max.is_some(), "max"),
                    (self.pattern.is_some(), "pattern"),
                    (self.allowed.is_some(), "enum"),
                ] {
                    if set {
                        reject(what, errs);
                    }
                }
                Kind::Bool
            }
            ParameterType::Integer => {
                if self.pattern.is_some() {
                    reject("pattern", errs);
                }
                let int = |v: &Option<Value>, what: &str, errs: &mut ValidationErrors| {
                    v.as_ref().and_then(|v| {
                        let r = v.as_i64();
                        if r.is_none() {
                            errs.push(format!("{path}.{what}"), format!("must be an integer, got {}", describe(v)));
                        }
                        r
                    })
                };
                let min = int(&self.min, "min", errs);
                let max = int(&self.max, "max", errs);
                let allowed = self
                    .allowed
                    .as_ref()
                    .map(|vs| vs.iter().enumerate().filter_map(|(i, v)| int(&Some(v.clone()), &format!("enum[{i}]"), errs)).collect());
                Kind::Integer { min, max, allowed }
            }
            ParameterType::String | ParameterType::List => {
                let count = |v: &Option<Value>, what: &str, errs: &mut ValidationErrors| {
                    v.as_ref().and_then(|v| {
                        let r = as_count(v);
                        if r.is_none() {
                            errs.push(format!("{path}.{what}"), format!("must be a non-negative integer, got {}", describe(v)));
                        }
                        r
                    })
                };
                let lo = count(&self.min, "min", errs);
                let hi = count(&self.max, "max", errs);
                let allowed = self.allowed.as_ref().map(|vs| {
                    vs.iter()
                        .enumerate()
                        .filter_map(|(i, v)| match v.as_str() {
                            Some(s) => Some(s.to_owned()),
                            None => {
                                errs.push(format!("{path}.enum[{i}]"), format!("must be a string, got {}", describe(v)));
                                None
                            }
                        })
                        .collect()
                });
                let pattern = pattern_for(errs);
                if ty == ParameterType::String {
                    Kind::String { min_len: lo, max_len: hi, allowed, pattern }
                } else {
                    Kind::List { min_items: lo, max_items: hi, allowed, pattern }
                }
            }
            ParameterType::Quantity => {
                if self.pattern.is_some() {
                    reject("pattern", errs);
                }
                let qty = |v: &Value, what: &str, errs: &mut ValidationErrors| match TypedValue::check(ParameterType::Quantity, v) {
                    Ok(TypedValue::Quantity(q)) => Some(q),
                    Ok(_) => None,
                    Err(reason) => {
                        errs.push(format!("{path}.{what}"), reason);
                        None
                    }
                };
                let min = self.min.as_ref().and_then(|v| qty(v, "min", errs));
                let max = self.max.as_ref().and_then(|v| qty(v, "max", errs));
                let allowed = self
                    .allowed
                    .as_ref()
                    .map(|vs| vs.iter().enumerate().filter_map(|(i, v)| qty(v, &format!("enum[{i}]"), errs)).collect());
                Kind::Quantity { min, max, allowed }
            }
        };
        if let Some(reason) = bounds_inverted(&kind) {
            errs.push(format!("{path}.min"), reason);
        }
        let default = self.default.as_ref().and_then(|d| match d.json().and_then(|j| check_value(&kind, &j)) {
            Ok(v) => Some(v),
            Err(reason) => {
                errs.push(format!("{path}.default.value"), reason);
                None
            }
        });
        (errs.0.len() == before).then(|| Parameter { name: self.name.clone(), required: self.required, kind, default, target })
    }
}

fn bounds_inverted(kind: &Kind) -> Option<String> {
    match kind {
        Kind::Integer { min: Some(a), max: Some(b), .. } if a > b => Some(format!("{a} is greater than max {b}")),
        Kind::Quantity { min: Some(a), max: Some(b), .. } if a > b => Some(format!("{a} is greater than max {b}")),
        Kind::String { min_len: Some(a), max_len: Some(b), .. } | Kind::List { min_items: Some(a), max_items: Some(b), .. } if a > b => {
            Some(format!("{a} is greater than max {b}"))
        }
        _ => None,
    }
}

/// Checks `value` against a parameter's type and constraints.
pub fn check_value(kind: &Kind, value: &Value) -> Result<TypedValue, ValueError> {
    let typed = TypedValue::check(kind.parameter_type(), value)?;
    match (kind, &typed) {
        (Kind::Bool, _) => {}
        (Kind::Integer { min, max, allowed }, TypedValue::Integer(n)) => {
            if let Some(m) = min.filter(|m| n < m) {
                return Err(ValueError::Constraint(format!("must be at least {m}, got {n}")));
            }
            if let Some(m) = max.filter(|m| n > m) {
                return Err(ValueError::Constraint(format!("must be at most {m}, got {n}")));
            }
            if let Some(a) = allowed.as_ref().filter(|a| !a.contains(n)) {
                return Err(ValueError::Constraint(format!("must be one of {}; got {n}", join(a))));
            }
        }
        (Kind::Quantity { min, max, allowed }, TypedValue::Quantity(q)) => {
            if let Some(m) = min.as_ref().filter(|m| q < *m) {
                return Err(ValueError::Constraint(format!("must be at least {m}, got {q}")));
            }
            if let Some(m) = max.as_ref().filter(|m| q > *m) {
                return Err(ValueError::Constraint(format!("must be at most {m}, got {q}")));
            }
            if let Some(a) = allowed.as_ref().filter(|a| !a.contains(q)) {
                return Err(ValueError::Constraint(format!("must be one of {}; got {q}", join(a))));
            }
        }
        (Kind::String { min_len, max_len, allowed, pattern }, TypedValue::String(s)) => {
            check_text(s, *min_len, *max_len, allowed, pattern, "")?;
        }
        (Kind::List { min_items, max_items, allowed, pattern }, TypedValue::List(items)) => {
            if let Some(m) = min_items.filter(|m| items.len() < *m) {
                return Err(ValueError::Constraint(format!("must have at least {m} items, got {}", items.len())));
            }
            if let Some(m) = max_items.filter(|m| items.len() > *m) {
                return Err(ValueError::Constraint(format!("must have at most {m} items, got {}", items.len())));
            }
            for (i, item) in items.iter().enumerate() {
                check_text(item, None, None, allowed, pattern, &format!("item {i} "))?;
            }
        }
        (kind, other) => {
            let got = describe(&other.to_json());
            return Err(ValueError::Constraint(format!("internal error: a {} parameter got {got}", kind.parameter_type())));
        }
    }
    Ok(typed)
}

fn check_text(
    s: &str,
    min_len: Option<usize>,
    max_len: Option<usize>,
    allowed: &Option<Vec<String>>,
    pattern: &Option<Regex>,
    what: &str,
) -> Result<(), ValueError> {
    let len = s.chars().count();
    if let Some(m) = min_len.filter(|m| len < *m) {
        return Err(ValueError::Constraint(format!("{what}must be at least {m} characters long, got {len}")));
    }
    if let Some(m) = max_len.filter(|m| len > *m) {
        return Err(ValueError::Constraint(format!("{what}must be at most {m} characters long, got {len}")));
    }
    if let Some(a) = allowed.as_ref().filter(|a| !a.iter().any(|x| x == s)) {
        let quoted: Vec<String> = a.iter().map(|x| format!("{x:?}")).collect();
        return Err(ValueError::Constraint(format!("{what}must be one of {}; got {s:?}", quoted.join(", "))));
    }
    if let Some(p) = pattern.as_ref().filter(|p| !p.is_match(s)) {
        let shown = p.as_str().trim_start_matches("^(?:").trim_end_matches(")$");
        return Err(ValueError::Constraint(format!("{what}must match the pattern {shown}; got {s:?}")));
    }
    Ok(())
}

fn join<T: fmt::Display>(items: &[T]) -> String {
    items.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}
