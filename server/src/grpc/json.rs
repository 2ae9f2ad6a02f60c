//! Between protobuf messages and the REST API's JSON: a request's body
//! (only the fields an `update_mask` names, when it names some), and a REST
//! answer read into the method's response. Template parameter values in the
//! seed's plain form (`{"value": 4}`) are given the `@type` of the wrapper
//! that holds them, so that every `google.protobuf.Any` is one protobuf can read;
//! a reference a REST answer holds as a plain string (an id, or a pool's
//! name) is given OSAC's typed form (`{"id": …}`, or `{"name": …}` for what
//! is not an id).

use prost_reflect::{DeserializeOptions, DynamicMessage, Kind, MessageDescriptor, ReflectMessage, SerializeOptions, Value as Field};
use serde_json::{Map, Value};
use tonic::Status;

/// Request JSON as the REST API reads it: field names as in the `.proto`
/// files, numbers as numbers, defaults left out.
const TO_REST: SerializeOptions =
    SerializeOptions::new().use_proto_field_name(true).skip_default_fields(true).stringify_64_bit_integers(false);

/// The same, with defaults: a masked field set to its default is sent.
const TO_REST_ALL: SerializeOptions = TO_REST.skip_default_fields(false);

/// REST answers carry fields some views do not declare.
const FROM_REST: DeserializeOptions = DeserializeOptions::new().deny_unknown_fields(false);

/// `msg` as the JSON the REST API reads. A message that cannot be
/// rendered (a `google.protobuf.Value` nested past protobuf's recursion
/// limit inside an `Any`, an `Any` of an unknown type) is the client's:
/// INVALID_ARGUMENT naming the field.
pub fn to_rest(msg: &DynamicMessage, all: bool) -> Result<Value, Status> {
    to_rest_at(msg, all, None)
}

/// [`to_rest`] of the request's field `at`, which paths in errors start with.
fn to_rest_at(msg: &DynamicMessage, all: bool, at: Option<&str>) -> Result<Value, Status> {
    let options = if all { &TO_REST_ALL } else { &TO_REST };
    msg.serialize_with_options(serde_json::value::Serializer, options).map_err(|e| {
        let inner = unrenderable(msg, options);
        let path = match (at, inner) {
            (Some(at), Some(inner)) => format!("{at}.{inner}"),
            (Some(at), None) => at.to_owned(),
            (None, Some(inner)) => inner,
            (None, None) => msg.descriptor().name().to_owned(),
        };
        Status::invalid_argument(format!("{path}: cannot be read: {e}"))
    })
}

/// The path of the innermost field of `msg` that cannot be rendered, if
/// one of its fields is the cause (only walked on the error path; a
/// decoded message nests at most protobuf's recursion limit deep).
fn unrenderable(msg: &DynamicMessage, options: &SerializeOptions) -> Option<String> {
    let fails = |m: &DynamicMessage| m.serialize_with_options(serde_json::value::Serializer, options).is_err();
    let inner = |name: String, m: &DynamicMessage| -> Option<String> {
        if !fails(m) {
            return None;
        }
        let any = m.descriptor().full_name() == "google.protobuf.Any";
        Some(match unrenderable(m, options).filter(|_| !any) {
            Some(rest) => format!("{name}.{rest}"),
            None => name,
        })
    };
    for (field, value) in msg.fields() {
        let found = match value {
            Field::Message(m) => inner(field.name().to_owned(), m),
            Field::List(items) => items.iter().enumerate().find_map(|(i, v)| inner(format!("{}[{i}]", field.name()), v.as_message()?)),
            Field::Map(entries) => entries.iter().find_map(|(k, v)| inner(format!("{}[{}]", field.name(), map_key(k)), v.as_message()?)),
            _ => None,
        };
        if found.is_some() {
            return found;
        }
    }
    None
}

/// A map key as a path shows it.
fn map_key(k: &prost_reflect::MapKey) -> String {
    match k {
        prost_reflect::MapKey::String(s) => format!("{s:?}"),
        other => format!("{other:?}"),
    }
}

/// The body of a request whose rule sends `field` (`*`: all of it).
pub fn request_body(req: &DynamicMessage, field: &str) -> Result<Vec<u8>, Status> {
    let value = if field == "*" {
        to_rest(req, false)?
    } else {
        let object = req.get_field_by_name(field).and_then(|v| v.as_message().cloned());
        let object = object.ok_or_else(|| Status::invalid_argument(format!("{field}: is required")))?;
        match update_mask(req) {
            Some(paths) => masked(&object, &paths, field)?,
            None => to_rest_at(&object, false, Some(field))?,
        }
    };
    serde_json::to_vec(&value).map_err(|e| Status::internal(e.to_string()))
}

/// The paths of the request's `update_mask`, if it names any.
fn update_mask(req: &DynamicMessage) -> Option<Vec<String>> {
    let mask = req.get_field_by_name("update_mask")?;
    let paths = mask.as_message()?.get_field_by_name("paths")?;
    let list: Vec<String> = paths.as_list()?.iter().filter_map(|p| p.as_str().map(str::to_owned)).collect();
    (!list.is_empty()).then_some(list)
}

/// Only the fields `paths` name of `object` (with `id` and a set
/// `metadata.version`, which say what is changed), defaults included.
fn masked(object: &DynamicMessage, paths: &[String], field: &str) -> Result<Value, Status> {
    for path in paths {
        let steps: Vec<&str> = path.split('.').collect();
        super::wire::check_path(object.descriptor(), &steps)
            .map_err(|reason| Status::invalid_argument(format!("update_mask: {path}: {reason}")))?;
    }
    let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
    Ok(vmaas_model::mask::masked(&to_rest_at(object, true, Some(field))?, &paths))
}

/// The response `desc` made of a REST answer: its body fills the field
/// `response_body` names, or the whole response.
pub fn response(desc: MessageDescriptor, response_body: Option<&str>, bytes: &[u8]) -> Result<DynamicMessage, Status> {
    let mut value: Value = if bytes.iter().all(u8::is_ascii_whitespace) {
        Value::Object(Map::new())
    } else {
        serde_json::from_slice(bytes).map_err(|e| Status::internal(format!("the REST answer is not JSON: {e}")))?
    };
    let Some(field) = response_body else {
        return from_rest(desc, value);
    };
    if let Some(inner) = value.get_mut(field).map(Value::take) {
        value = inner;
    }
    let fd = desc.get_field_by_name(field).ok_or_else(|| Status::internal(format!("{} has no field {field}", desc.name())))?;
    let Kind::Message(inner) = fd.kind() else { return Err(Status::internal(format!("{field} is not a message"))) };
    let object = from_rest(inner, value)?;
    let mut out = DynamicMessage::new(desc);
    out.set_field(&fd, Field::Message(object));
    Ok(out)
}

/// `value` read as a `desc` message (fields it does not declare are skipped).
pub fn from_rest(desc: MessageDescriptor, mut value: Value) -> Result<DynamicMessage, Status> {
    fit(&desc, &mut value);
    DynamicMessage::deserialize_with_options(desc, value, &FROM_REST)
        .map_err(|e| Status::internal(format!("cannot read the REST answer: {e}")))
}

/// Makes `value` readable as a `desc` message: each `Any` without an
/// `@type` gets the wrapper type its value fits, each reference held as a
/// string its typed form.
fn fit(desc: &MessageDescriptor, value: &mut Value) {
    if desc.name().ends_with("Reference")
        && let Value::String(held) = value
    {
        *value = vmaas_model::reference::held(held);
        return;
    }
    if desc.full_name() == "google.protobuf.Any" {
        if let Value::Object(m) = value
            && !m.contains_key("@type")
            && let Some(v) = m.get("value")
        {
            m.insert("@type".into(), Value::from(format!("type.googleapis.com/google.protobuf.{}", super::wire::wrapper_of(v))));
        }
        return;
    }
    let Value::Object(m) = value else { return };
    for field in desc.fields() {
        let Kind::Message(inner) = field.kind() else { continue };
        let Some(v) = m.get_mut(field.name()) else { continue };
        if field.is_map() {
            let Some(vf) = inner.map_entry_value_field().kind().as_message().cloned() else { continue };
            if let Value::Object(entries) = v {
                entries.values_mut().for_each(|e| fit(&vf, e));
            }
        } else if let Value::Array(items) = v {
            items.iter_mut().for_each(|e| fit(&inner, e));
        } else {
            fit(&inner, v);
        }
    }
}

#[cfg(test)]
mod tests;
