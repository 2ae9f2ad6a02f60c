//! One attribute of a kind described for Terraform ([`Field`]): its type,
//! what changing it does, where it sits in the API's JSON, and the
//! conversions between Terraform's values and the API's.

use rmpv::Value;
use serde_json::{Map, Value as Json};

use crate::schema::STRING;
use crate::value::{self, get, object};

/// The type of an attribute.
#[derive(Debug, Clone, Copy)]
pub enum Ty {
    /// A string.
    Str,
    /// A whole number.
    Int,
    /// A boolean.
    Bool,
    /// A list of strings.
    StrList,
    /// Any JSON value, as a string: a string as it is, anything else as
    /// JSON text (`3`, `true`, `jsonencode([…])`).
    Json,
    /// Nested blocks of these scalar attributes (name, type, doc).
    Blocks(&'static [(&'static str, Ty, &'static str)]),
    /// A string the server never answers (a password): sensitive in plans
    /// and state, kept as written; an imported object has none.
    Secret,
    /// A [`Ty::Secret`] given write-only: only the apply that needs it sees
    /// it, never a plan or the state (OpenTofu and Terraform 1.11 on).
    WriteOnly,
}

impl Ty {
    pub(crate) fn cty(self) -> &'static str {
        match self {
            Ty::Str | Ty::Json | Ty::Secret | Ty::WriteOnly => STRING,
            Ty::Int => "\"number\"",
            Ty::Bool => "\"bool\"",
            Ty::StrList => "[\"list\",\"string\"]",
            Ty::Blocks(_) => "",
        }
    }

    /// Given by the user only, never read back: not in data sources.
    pub(crate) fn input_only(self) -> bool {
        matches!(self, Ty::Secret | Ty::WriteOnly)
    }
}

/// What changing an attribute does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// A required input; a change replaces the object.
    Replace,
    /// An optional input; a change replaces the object.
    ReplaceOptional,
    /// An optional input the server fills in when absent (optional and
    /// computed: an import, or a config that leaves it out, keeps the
    /// server's value); a change replaces the object.
    ReplaceDefaulted,
    /// An input changed in place with a PATCH of its spec field.
    Patch,
    /// An optional input the server fills in when absent, changed in place
    /// with a PATCH (optional and computed, as [`Change::ReplaceDefaulted`]).
    PatchDefaulted,
    /// The server's: computed.
    Output,
}

impl Change {
    /// Changed in place by a PATCH.
    pub(crate) fn patches(self) -> bool {
        matches!(self, Change::Patch | Change::PatchDefaulted)
    }

    /// Filled in by the server when the configuration leaves it out.
    pub(crate) fn defaulted(self) -> bool {
        matches!(self, Change::ReplaceDefaulted | Change::PatchDefaulted)
    }
}

/// One attribute.
#[derive(Debug, Clone, Copy)]
pub struct Field {
    /// The attribute's name.
    pub name: &'static str,
    /// Its type.
    pub ty: Ty,
    /// What a change does.
    pub change: Change,
    /// Where it is in the API's object, e.g. `/spec/ipv4_cidr`.
    pub json: &'static str,
    /// Its description.
    pub doc: &'static str,
}

pub(crate) fn scalar_to_json(v: &Value, ty: Ty) -> Option<Json> {
    match (ty, v) {
        (_, Value::Nil) => None,
        (Ty::Str | Ty::Secret | Ty::WriteOnly, v) => v.as_str().map(Json::from),
        (Ty::Int, v) => v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)).map(Json::from),
        (Ty::Bool, v) => v.as_bool().map(Json::from),
        (Ty::Json, v) => {
            v.as_str().map(|t| serde_json::from_str::<Json>(t).ok().filter(|j| !j.is_string()).unwrap_or_else(|| Json::from(t)))
        }
        (Ty::StrList, Value::Array(items)) => Some(Json::Array(items.iter().filter_map(|i| i.as_str().map(Json::from)).collect())),
        (Ty::Blocks(attrs), Value::Array(items)) => Some(Json::Array(
            items
                .iter()
                .map(|item| {
                    let m: Map<String, Json> =
                        attrs.iter().filter_map(|(n, t, _)| Some(((*n).to_owned(), scalar_to_json(get(item, n), *t)?))).collect();
                    Json::Object(m)
                })
                .collect(),
        )),
        _ => None,
    }
}

pub(crate) fn json_to_value(j: Option<&Json>, ty: Ty) -> Value {
    if ty.input_only() {
        return Value::Nil;
    }
    let Some(j) = j.filter(|j| !j.is_null()) else {
        return match ty {
            Ty::StrList | Ty::Blocks(_) => Value::Array(Vec::new()),
            _ => Value::Nil,
        };
    };
    match ty {
        Ty::Blocks(attrs) => Value::Array(
            j.as_array()
                .into_iter()
                .flatten()
                .map(|item| object(attrs.iter().map(|(n, t, _)| (*n, json_to_value(item.get(*n), *t))).collect()))
                .collect(),
        ),
        Ty::Json => Value::String(j.as_str().map_or_else(|| j.to_string(), str::to_owned).into()),
        // OSAC's typed reference (`{"id"}` or `{"name"}`): what it names.
        Ty::Str if j.is_object() => match vmaas_model::reference::key(j) {
            Ok(Some(k)) => Value::String(k.into()),
            _ => Value::Nil,
        },
        _ => value::from_json(j),
    }
}

/// Sets `pointer` (e.g. `/spec/pool`) in `root` to `v`.
pub(crate) fn put(root: &mut Json, pointer: &str, v: Json) {
    let mut at = root;
    let parts: Vec<&str> = pointer.trim_start_matches('/').split('/').collect();
    for (i, p) in parts.iter().enumerate() {
        if !at.is_object() {
            *at = Json::Object(Map::new());
        }
        let Json::Object(m) = at else { return };
        if i + 1 == parts.len() {
            m.insert((*p).to_owned(), v);
            return;
        }
        at = m.entry((*p).to_owned()).or_insert_with(|| Json::Object(Map::new()));
    }
}
