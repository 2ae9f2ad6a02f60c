//! Virtual machine templates as published by the provider (the wire format),
//! and their checked form, [`Template`], which validates a tenant's parameters
//! and resolves them into a [`ResolvedSpec`].

use std::collections::BTreeMap;
use std::fmt;

use chrono::{DateTime, Utc};
use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::quantity::Quantity;
use crate::spec::{ExposedPort, Gpu, Probe, ProbeCheck, Protocol, ReadinessProbe, ResolvedSpec, SpecDefaults};
use crate::validation::{ValidationErrors, check_identifier};
use crate::value::{ParameterValue, TypedValue};

/// The `@type` of a template in API responses.
pub const TEMPLATE_TYPE_URL: &str = "type.googleapis.com/fulfillment.v1.VirtualMachineTemplate";

/// A virtual machine template, as the provider publishes it and as the API returns it.
///
/// Only `id` is required; the seed design's example (parameters with just a
/// `name` and a `default`) is a complete template.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct VirtualMachineTemplate {
    /// Accepted and ignored on input; set on output.
    #[serde(rename = "@type", default, skip_serializing_if = "Option::is_none")]
    pub type_url: Option<String>,
    /// Identifier tenants reference, e.g. `simple_vm`.
    pub id: String,
    /// Short human title.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub title: String,
    /// Longer description, in Markdown.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// The parameters tenants may (or must) set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parameters: Vec<ParameterDefinition>,
    /// Spec values used where no parameter overrides them.
    #[serde(default, skip_serializing_if = "SpecDefaults::is_empty")]
    pub spec_defaults: SpecDefaults,
    /// Server-managed: ignored on create, compared for optimistic concurrency on update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateMetadata>,
}

impl VirtualMachineTemplate {
    /// The template as published: without the server-managed `@type` and
    /// `metadata`, which is what is compared, stored and compiled.
    pub fn published(mut self) -> Self {
        self.type_url = None;
        self.metadata = None;
        self
    }
}

/// Server-managed template metadata.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TemplateMetadata {
    /// When the template was first published.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<DateTime<Utc>>,
    /// When the template was last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_timestamp: Option<DateTime<Utc>>,
    /// Incremented on every change; send it back on update to detect lost updates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
}

/// The type of a template parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ParameterType {
    /// `true` or `false`.
    #[serde(alias = "boolean")]
    Bool,
    /// A whole number.
    #[serde(alias = "int")]
    Integer,
    /// Any text.
    String,
    /// A resource quantity such as `4Gi`.
    Quantity,
    /// A list of strings.
    #[serde(alias = "string_list", alias = "list(string)")]
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

/// The spec field a parameter sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum SpecField {
    /// Number of virtual CPU cores (integer).
    CpuCores,
    /// Guest memory (quantity).
    Memory,
    /// Boot disk size (quantity).
    DiskSize,
    /// Base image name (string).
    Image,
    /// GPU device names (list).
    Gpus,
    /// Exposed ports such as `80` or `53/udp` (list).
    ExposedPorts,
    /// SSH public keys (list).
    SshKeys,
    /// Cloud-init user data (string).
    UserData,
}

impl SpecField {
    /// The spec field a parameter named `name` sets when it says nothing else:
    /// `vm_cpu_cores`, `vm_memory`, `vm_disk_size`, `vm_image`, `vm_gpus`,
    /// `vm_exposed_ports`, `vm_ssh_keys`, `vm_user_data`.
    pub fn well_known(name: &str) -> Option<Self> {
        Some(match name {
            "vm_cpu_cores" => Self::CpuCores,
            "vm_memory" => Self::Memory,
            "vm_disk_size" => Self::DiskSize,
            "vm_image" => Self::Image,
            "vm_gpus" => Self::Gpus,
            "vm_exposed_ports" => Self::ExposedPorts,
            "vm_ssh_keys" => Self::SshKeys,
            "vm_user_data" => Self::UserData,
            _ => return None,
        })
    }

    /// The parameter type this field takes.
    pub fn parameter_type(self) -> ParameterType {
        match self {
            Self::CpuCores => ParameterType::Integer,
            Self::Memory | Self::DiskSize => ParameterType::Quantity,
            Self::Image | Self::UserData => ParameterType::String,
            Self::Gpus | Self::ExposedPorts | Self::SshKeys => ParameterType::List,
        }
    }

    /// The field's name in `spec_defaults`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::CpuCores => "cpu_cores",
            Self::Memory => "memory",
            Self::DiskSize => "disk_size",
            Self::Image => "image",
            Self::Gpus => "gpus",
            Self::ExposedPorts => "exposed_ports",
            Self::SshKeys => "ssh_keys",
            Self::UserData => "user_data",
        }
    }
}

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

/// A checked template: built only by [`Template::compile`], so every
/// `Template` has well-typed parameters, valid defaults and compiled patterns.
#[derive(Debug, Clone)]
pub struct Template {
    wire: VirtualMachineTemplate,
    parameters: Vec<Parameter>,
    base: ResolvedSpec,
}

/// The outcome of validating a tenant's parameters against a template.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// Every parameter with a value: the tenant's, else the default.
    pub values: BTreeMap<String, TypedValue>,
    /// The VM spec after parameters and defaults were applied.
    pub spec: ResolvedSpec,
}

fn infer_type(value: &Value) -> Option<ParameterType> {
    match value {
        Value::Bool(_) => Some(ParameterType::Bool),
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(ParameterType::Integer),
        Value::String(s) => {
            let has_suffix = s.ends_with(|c: char| c.is_ascii_alphabetic());
            if has_suffix && Quantity::parse(s).is_ok() {
                Some(ParameterType::Quantity)
            } else {
                Some(ParameterType::String)
            }
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
    fn compile(&self, path: &str, errs: &mut ValidationErrors) -> Option<Parameter> {
        let before = errs.0.len();
        if let Err(reason) = check_identifier(&self.name) {
            errs.push(format!("{path}.name"), reason);
        }
        let target = self.maps_to.or_else(|| SpecField::well_known(&self.name));
        let ty = match (self.kind, target, &self.default) {
            (Some(t), _, _) => t,
            (None, Some(field), _) => field.parameter_type(),
            (None, None, Some(d)) => match infer_type(&d.value) {
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
        if let Some(field) = target {
            if field.parameter_type() != ty {
                errs.push(
                    format!("{path}.type"),
                    format!("is {ty}, but the parameter sets spec field {} which takes a {}", field.as_str(), field.parameter_type()),
                );
            }
        }
        let pattern_for = |errs: &mut ValidationErrors| compile_pattern(&self.pattern, path, errs);
        let reject = |what: &str, errs: &mut ValidationErrors| {
            errs.push(format!("{path}.{what}"), format!("does not apply to a {ty} parameter"));
        };
        let kind = match ty {
            ParameterType::Bool => {
                for (set, what) in [(self.min.is_some(), "min"), (self.max.is_some(), "max"), (self.pattern.is_some(), "pattern"), (self.allowed.is_some(), "enum")] {
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
                let allowed = self.allowed.as_ref().map(|vs| {
                    vs.iter()
                        .enumerate()
                        .filter_map(|(i, v)| int(&Some(v.clone()), &format!("enum[{i}]"), errs))
                        .collect()
                });
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
        let default = self.default.as_ref().and_then(|d| match check_value(&kind, &d.value) {
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

/// Checks `value` against a parameter's type and constraints.
pub fn check_value(kind: &Kind, value: &Value) -> Result<TypedValue, String> {
    let typed = TypedValue::check(kind.parameter_type(), value)?;
    match (kind, &typed) {
        (Kind::Bool, _) => {}
        (Kind::Integer { min, max, allowed }, TypedValue::Integer(n)) => {
            if let Some(m) = min.filter(|m| n < m) {
                return Err(format!("must be at least {m}, got {n}"));
            }
            if let Some(m) = max.filter(|m| n > m) {
                return Err(format!("must be at most {m}, got {n}"));
            }
            if let Some(a) = allowed.as_ref().filter(|a| !a.contains(n)) {
                return Err(format!("must be one of {}; got {n}", join(a)));
            }
        }
        (Kind::Quantity { min, max, allowed }, TypedValue::Quantity(q)) => {
            if let Some(m) = min.as_ref().filter(|m| q < *m) {
                return Err(format!("must be at least {m}, got {q}"));
            }
            if let Some(m) = max.as_ref().filter(|m| q > *m) {
                return Err(format!("must be at most {m}, got {q}"));
            }
            if let Some(a) = allowed.as_ref().filter(|a| !a.contains(q)) {
                return Err(format!("must be one of {}; got {q}", join(a)));
            }
        }
        (Kind::String { min_len, max_len, allowed, pattern }, TypedValue::String(s)) => check_text(s, *min_len, *max_len, allowed, pattern, "")?,
        (Kind::List { min_items, max_items, allowed, pattern }, TypedValue::List(items)) => {
            if let Some(m) = min_items.filter(|m| items.len() < *m) {
                return Err(format!("must have at least {m} items, got {}", items.len()));
            }
            if let Some(m) = max_items.filter(|m| items.len() > *m) {
                return Err(format!("must have at most {m} items, got {}", items.len()));
            }
            for (i, item) in items.iter().enumerate() {
                check_text(item, None, None, allowed, pattern, &format!("item {i} "))?;
            }
        }
        (kind, other) => return Err(format!("internal error: a {} parameter got {}", kind.parameter_type(), describe(&other.to_json()))),
    }
    Ok(typed)
}

fn check_text(s: &str, min_len: Option<usize>, max_len: Option<usize>, allowed: &Option<Vec<String>>, pattern: &Option<Regex>, what: &str) -> Result<(), String> {
    let len = s.chars().count();
    if let Some(m) = min_len.filter(|m| len < *m) {
        return Err(format!("{what}must be at least {m} characters long, got {len}"));
    }
    if let Some(m) = max_len.filter(|m| len > *m) {
        return Err(format!("{what}must be at most {m} characters long, got {len}"));
    }
    if let Some(a) = allowed.as_ref().filter(|a| !a.iter().any(|x| x == s)) {
        let quoted: Vec<String> = a.iter().map(|x| format!("{x:?}")).collect();
        return Err(format!("{what}must be one of {}; got {s:?}", quoted.join(", ")));
    }
    if let Some(p) = pattern.as_ref().filter(|p| !p.is_match(s)) {
        let shown = p.as_str().trim_start_matches("^(?:").trim_end_matches(")$");
        return Err(format!("{what}must match the pattern {shown}; got {s:?}"));
    }
    Ok(())
}

fn join<T: fmt::Display>(items: &[T]) -> String {
    items.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

impl Template {
    /// Checks a template as published and compiles it. Reports every problem,
    /// each with its field path (`parameters[1].default.value`).
    pub fn compile(wire: VirtualMachineTemplate) -> Result<Self, ValidationErrors> {
        let mut errs = ValidationErrors::default();
        if let Err(reason) = check_identifier(&wire.id) {
            errs.push("id", reason);
        }
        let mut parameters = Vec::with_capacity(wire.parameters.len());
        let mut seen = BTreeMap::new();
        let mut targets = BTreeMap::new();
        for (i, p) in wire.parameters.iter().enumerate() {
            let path = format!("parameters[{i}]");
            if let Some(first) = seen.insert(p.name.as_str(), i) {
                errs.push(format!("{path}.name"), format!("duplicates parameters[{first}].name {:?}", p.name));
            }
            if let Some(param) = p.compile(&path, &mut errs) {
                if let Some(t) = param.target {
                    if let Some(first) = targets.insert(t, i) {
                        errs.push(format!("{path}.maps_to"), format!("spec field {} is already set by parameters[{first}]", t.as_str()));
                    }
                }
                parameters.push(param);
            }
        }
        let base = match wire.spec_defaults.compile() {
            Ok(b) => Some(b),
            Err(e) => {
                errs.extend(e);
                None
            }
        };
        match base {
            Some(base) if errs.is_empty() => Ok(Self { wire, parameters, base }),
            _ => Err(errs),
        }
    }

    /// The template's identifier.
    pub fn id(&self) -> &str {
        &self.wire.id
    }

    /// The template as published.
    pub fn wire(&self) -> &VirtualMachineTemplate {
        &self.wire
    }

    /// The checked parameters, in the published order.
    pub fn parameters(&self) -> &[Parameter] {
        &self.parameters
    }

    /// The parameter called `name`.
    pub fn parameter(&self, name: &str) -> Option<&Parameter> {
        self.parameters.iter().find(|p| p.name == name)
    }

    fn valid_names(&self) -> String {
        if self.parameters.is_empty() {
            return "this template takes no parameters".into();
        }
        let mut names: Vec<&str> = self.parameters.iter().map(|p| p.name.as_str()).collect();
        names.sort_unstable();
        format!("valid parameters are: {}", names.join(", "))
    }

    /// Validates a tenant's parameters, reporting every problem at once under
    /// `prefix` (e.g. `spec.template_parameters`), then applies the defaults
    /// and resolves the VM spec.
    pub fn resolve(&self, given: &BTreeMap<String, ParameterValue>, prefix: &str) -> Result<Resolved, ValidationErrors> {
        let mut errs = ValidationErrors::default();
        for name in given.keys() {
            if self.parameter(name).is_none() {
                errs.push(format!("{prefix}.{name}"), format!("unknown parameter {name:?}; {}", self.valid_names()));
            }
        }
        let mut values = BTreeMap::new();
        for p in &self.parameters {
            match given.get(&p.name) {
                Some(v) => match check_value(&p.kind, &v.value) {
                    Ok(t) => {
                        values.insert(p.name.clone(), t);
                    }
                    Err(reason) => errs.push(format!("{prefix}.{}.value", p.name), reason),
                },
                None if p.required => errs.push(format!("{prefix}.{}", p.name), format!("required parameter is missing (a {})", p.kind.parameter_type())),
                None => {
                    if let Some(d) = &p.default {
                        values.insert(p.name.clone(), d.clone());
                    }
                }
            }
        }
        if !errs.is_empty() {
            errs.0.sort_by(|a, b| a.field.cmp(&b.field));
            return Err(errs);
        }
        let mut spec = self.base.clone();
        for p in &self.parameters {
            if let (Some(target), Some(v)) = (p.target, values.get(&p.name)) {
                let path = format!("{prefix}.{}.value", p.name);
                if let Err(reason) = spec.set(target, v) {
                    errs.push(path, reason);
                }
            }
        }
        if let Err(e) = spec.check() {
            for fe in e.0 {
                // Name the parameter that set the field, where there is one.
                let field = self
                    .parameters
                    .iter()
                    .find(|p| p.target.is_some_and(|t| fe.field == format!("spec.{}", t.as_str())) && values.contains_key(&p.name))
                    .map(|p| format!("{prefix}.{}.value", p.name))
                    .unwrap_or(fe.field);
                errs.push(field, fe.reason);
            }
        }
        errs.into_result(Resolved { values, spec })
    }

    /// Converts a parameter given as text (the CLI's `-p key=value`, a
    /// Terraform map of strings) into the JSON value of the declared type.
    pub fn value_from_text(&self, name: &str, text: &str) -> Result<Value, String> {
        let p = self.parameter(name).ok_or_else(|| format!("unknown parameter {name:?}; {}", self.valid_names()))?;
        TypedValue::from_text(p.kind.parameter_type(), text).map(|t| t.to_json())
    }
}

impl SpecDefaults {
    fn compile(&self) -> Result<ResolvedSpec, ValidationErrors> {
        let mut spec = ResolvedSpec::default();
        let mut errs = ValidationErrors::default();
        if let Some(c) = self.cpu_cores {
            spec.cpu_cores = c;
        }
        if let Some(m) = &self.memory {
            spec.memory = m.clone();
        }
        if let Some(d) = &self.disk_size {
            spec.disk_size = d.clone();
        }
        if let Some(i) = &self.image {
            spec.image = i.clone();
        }
        spec.gpus = self.gpus.clone();
        spec.exposed_ports = self.exposed_ports.clone();
        spec.ssh_keys = self.ssh_keys.clone();
        spec.user_data = self.user_data.clone();
        if let Some(p) = &self.readiness_probe {
            match p.compile("spec_defaults.readiness_probe") {
                Ok(p) => spec.readiness_probe = Some(p),
                Err(e) => errs.extend(e),
            }
        }
        if let Err(e) = spec.check() {
            for fe in e.0 {
                errs.push(fe.field.replacen("spec.", "spec_defaults.", 1), fe.reason);
            }
        }
        errs.into_result(spec)
    }
}

impl ReadinessProbe {
    fn compile(&self, path: &str) -> Result<Probe, ValidationErrors> {
        let mut errs = ValidationErrors::default();
        let check = match (&self.tcp, &self.http) {
            (Some(t), None) => Some(ProbeCheck::Tcp { port: t.port }),
            (None, Some(h)) => {
                if !h.path.starts_with('/') {
                    errs.push(format!("{path}.http.path"), format!("must start with '/', got {:?}", h.path));
                }
                Some(ProbeCheck::Http { port: h.port, path: h.path.clone() })
            }
            (None, None) => {
                errs.push(path, "must set exactly one of tcp or http");
                None
            }
            (Some(_), Some(_)) => {
                errs.push(path, "must set exactly one of tcp or http, not both");
                None
            }
        };
        for (v, what) in [(self.period_seconds, "period_seconds"), (self.timeout_seconds, "timeout_seconds")] {
            if v == Some(0) {
                errs.push(format!("{path}.{what}"), "must be at least 1");
            }
        }
        match check {
            Some(check) if errs.is_empty() => Ok(Probe {
                check,
                period_seconds: self.period_seconds.unwrap_or(1),
                timeout_seconds: self.timeout_seconds.unwrap_or(300),
            }),
            _ => Err(errs),
        }
    }
}

impl ResolvedSpec {
    /// Sets one spec field from a checked parameter value.
    fn set(&mut self, field: SpecField, v: &TypedValue) -> Result<(), String> {
        match (field, v) {
            (SpecField::CpuCores, TypedValue::Integer(n)) => {
                self.cpu_cores = u32::try_from(*n).map_err(|_| format!("must be between 1 and {}, got {n}", u32::MAX))?;
            }
            (SpecField::Memory, TypedValue::Quantity(q)) => self.memory = q.clone(),
            (SpecField::DiskSize, TypedValue::Quantity(q)) => self.disk_size = q.clone(),
            (SpecField::Image, TypedValue::String(s)) => self.image = s.clone(),
            (SpecField::UserData, TypedValue::String(s)) => self.user_data = Some(s.clone()),
            (SpecField::SshKeys, TypedValue::List(l)) => self.ssh_keys = l.clone(),
            (SpecField::Gpus, TypedValue::List(l)) => {
                self.gpus = l.iter().enumerate().map(|(i, d)| Gpu { name: format!("gpu{i}"), device_name: d.clone() }).collect();
            }
            (SpecField::ExposedPorts, TypedValue::List(l)) => {
                self.exposed_ports = l.iter().map(|s| ExposedPort::parse(s)).collect::<Result<_, _>>()?;
            }
            (f, v) => return Err(format!("spec field {} cannot take {}", f.as_str(), describe(&v.to_json()))),
        }
        Ok(())
    }
}

impl ExposedPort {
    /// Parses `80`, `80/tcp` or `53/udp`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let (port, proto) = s.split_once('/').unwrap_or((s, "tcp"));
        let port: u16 = port.parse().ok().filter(|p| *p > 0).ok_or_else(|| format!("{s:?} is not a port: expected 1-65535 with an optional /tcp or /udp"))?;
        let protocol = match proto {
            "tcp" | "TCP" => Protocol::Tcp,
            "udp" | "UDP" => Protocol::Udp,
            other => return Err(format!("{s:?} has protocol {other:?}: expected tcp or udp")),
        };
        Ok(Self { port, protocol, name: None })
    }
}
