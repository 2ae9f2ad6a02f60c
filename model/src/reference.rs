//! OSAC's typed references (`osac.public.v1` as of a446890594): another
//! object named by `{id, name}` (plus `project` and `shared` on the full
//! references, which vmaas, having no projects, accepts and ignores). In
//! JSON a reference is `{"name": "small"}` where it used to be `"small"`;
//! both are read, and answers carry the typed form with both names.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

/// The kinds of object a view refers to by what the object it shows holds
/// (an id, or an image's name as given).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Referred {
    /// A subnet, by id.
    Subnet,
    /// A security group, by id.
    SecurityGroup,
    /// An image, by name or id as the VM was given it.
    Image,
}

/// What the objects referred to are called: `(kind, key)` → `(id, name)`.
/// One not in it is answered with what is held.
pub type Names = HashMap<(Referred, String), (String, String)>;

/// Fields a reference may carry.
const FIELDS: [&str; 4] = ["id", "name", "project", "shared"];

/// Why a value is not a reference.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceError {
    /// An object with a field no reference has.
    #[error("has no field {0:?}: a reference is {{\"id\": …}} or {{\"name\": …}}")]
    Field(String),
    /// `id` or `name` not a string.
    #[error("{field} must be a string, got {got}")]
    NotText {
        /// The field.
        field: &'static str,
        /// What it holds.
        got: String,
    },
    /// Neither an object nor a string.
    #[error("must be a reference ({{\"name\": …}} or a string), got {0}")]
    Shape(String),
}

/// The reason, as a field error takes it.
impl From<ReferenceError> for String {
    fn from(e: ReferenceError) -> String {
        e.to_string()
    }
}

/// What reference `v` names: its id, else its name; `None` when it names
/// nothing (null, `""`, `{}` or empty fields). A plain string is the old
/// form. The reason, when it is not a reference at all.
pub fn key(v: &Value) -> Result<Option<String>, ReferenceError> {
    match v {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s.clone()).filter(|s| !s.is_empty())),
        Value::Object(m) => {
            if let Some(other) = m.keys().find(|k| !FIELDS.contains(&k.as_str())) {
                return Err(ReferenceError::Field(other.clone()));
            }
            let text = |field: &'static str| match m.get(field) {
                None | Some(Value::Null) => Ok(""),
                Some(Value::String(s)) => Ok(s.as_str()),
                Some(other) => Err(ReferenceError::NotText { field, got: other.to_string() }),
            };
            let (id, name) = (text("id")?, text("name")?);
            Ok(Some(if id.is_empty() { name } else { id }.to_owned()).filter(|k| !k.is_empty()))
        }
        other => Err(ReferenceError::Shape(other.to_string())),
    }
}

/// The typed reference to an object whose id is `id` and name `name`
/// (an empty one is left out).
pub fn typed(id: &str, name: &str) -> Value {
    let mut m = Map::new();
    for (k, v) in [("id", id), ("name", name)] {
        if !v.is_empty() {
            m.insert(k.into(), json!(v));
        }
    }
    Value::Object(m)
}

/// The typed reference to what a field holds: `{"id": …}` for a UUID (an
/// object's id), else `{"name": …}` (a name, as a pool's or one sent in a
/// request); `{}` for nothing.
pub fn held(key: &str) -> Value {
    if uuid::Uuid::parse_str(key).is_ok() { typed(key, "") } else { typed("", key) }
}

/// A reference field held as a string, for `#[serde(with = "crate::reference::key")]`:
/// written in OSAC's typed form, read from a typed reference or a string.
pub mod key {
    pub use super::{de_key as deserialize, ser_key as serialize};
}

/// An optional reference field held as a string, for
/// `#[serde(default, skip_serializing_if = "Option::is_none", with = "crate::reference::opt_key")]`.
pub mod opt_key {
    pub use super::{de_opt_key as deserialize, ser_opt_key as serialize};
}

/// Writes a reference field held as a string in OSAC's typed form
/// ([`held`]). For `#[serde(serialize_with)]`, beside [`de_key`].
pub fn ser_key<S: serde::Serializer>(key: &str, s: S) -> Result<S::Ok, S::Error> {
    serde::Serialize::serialize(&held(key), s)
}

/// [`ser_key`] for an optional field.
pub fn ser_opt_key<S: serde::Serializer>(key: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    match key {
        Some(k) => ser_key(k, s),
        None => s.serialize_none(),
    }
}

/// Reads a reference field held as a string: a plain string, or a typed
/// reference (its id, else its name). For `#[serde(deserialize_with)]`.
pub fn de_key<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let v = <Value as serde::Deserialize>::deserialize(d)?;
    key(&v).map(Option::unwrap_or_default).map_err(serde::de::Error::custom)
}

/// [`de_key`] for an optional field (`None` when it names nothing).
pub fn de_opt_key<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let v = <Value as serde::Deserialize>::deserialize(d)?;
    key(&v).map_err(serde::de::Error::custom)
}

/// The typed reference to the `kind` object held as `key`, named as `names` says.
pub fn to(names: &Names, kind: Referred, key: &str) -> Value {
    let (id, name) = named(names, kind, key);
    typed(&id, &name)
}

/// The id and name of the `kind` object held as `key`, as `names` says;
/// one not in it is what is held (an image's name, another kind's id).
pub fn named(names: &Names, kind: Referred, key: &str) -> (String, String) {
    match names.get(&(kind, key.to_owned())) {
        Some((id, name)) => (id.clone(), name.clone()),
        None if kind == Referred::Image => (String::new(), key.to_owned()),
        None => (key.to_owned(), String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms_are_read_and_the_id_wins() {
        assert_eq!(key(&json!("small")), Ok(Some("small".into())));
        assert_eq!(key(&json!({"name": "small"})), Ok(Some("small".into())));
        assert_eq!(key(&json!({"id": "a1", "name": "small", "project": "", "shared": true})), Ok(Some("a1".into())));
        for nothing in [json!(null), json!(""), json!({}), json!({"id": "", "name": null})] {
            assert_eq!(key(&nothing), Ok(None), "{nothing}");
        }
    }

    #[test]
    fn what_is_not_a_reference_says_why() {
        assert!(key(&json!({"nmae": "x"})).unwrap_err().to_string().contains("\"nmae\""));
        assert!(key(&json!({"name": 3})).unwrap_err().to_string().contains("name must be a string"));
        assert!(key(&json!(7)).unwrap_err().to_string().contains("must be a reference"));
    }

    #[test]
    fn string_fields_read_either_form() {
        #[derive(serde::Deserialize)]
        struct Spec {
            #[serde(deserialize_with = "de_key")]
            network: String,
            #[serde(default, deserialize_with = "de_opt_key")]
            vm: Option<String>,
        }
        let s: Spec = serde_json::from_value(json!({"network": {"name": "net"}, "vm": "web"})).unwrap();
        assert_eq!((s.network.as_str(), s.vm.as_deref()), ("net", Some("web")));
        let s: Spec = serde_json::from_value(json!({"network": "n1"})).unwrap();
        assert_eq!((s.network.as_str(), s.vm), ("n1", None));
        assert!(serde_json::from_value::<Spec>(json!({"network": {"nmae": "x"}})).is_err());
    }

    #[test]
    fn answers_carry_what_is_known() {
        assert_eq!(typed("a1", "small"), json!({"id": "a1", "name": "small"}));
        assert_eq!(typed("", "small"), json!({"name": "small"}));
    }
}
