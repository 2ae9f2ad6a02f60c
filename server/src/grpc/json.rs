//! An event's JSON (as the SSE route sends it) read into the stream's
//! messages by their descriptors. Template parameter values in the seed's
//! plain form (`{"value": 4}`) are given the `@type` of the wrapper that
//! holds them, so that every `google.protobuf.Any` is one protobuf can
//! read; a reference held as a plain string (an id, or a pool's name) is
//! given OSAC's typed form (`{"id": …}`, or `{"name": …}` for what is not
//! an id).

use prost_reflect::{DeserializeOptions, DynamicMessage, Kind, MessageDescriptor};
use serde_json::Value;
use tonic::Status;

/// Events carry fields some views do not declare.
const FROM_REST: DeserializeOptions = DeserializeOptions::new().deny_unknown_fields(false);

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
