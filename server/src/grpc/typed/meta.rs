//! What every `osac.public.v1` object shares, between its message and the
//! model: the metadata (the server's and what a request may say), typed
//! references, and states, whose wire names are the same on both sides.

use std::collections::HashMap;

use vmaas_model::{Metadata, MetadataInput};

use super::mask::Mask;
use super::time;
use crate::grpc::pb::osac::public::v1 as pb;

/// The metadata as `osac.public.v1` has it.
pub fn metadata(m: Metadata) -> pb::Metadata {
    pb::Metadata {
        creation_timestamp: Some(time::to_pb(m.creation_timestamp)),
        deletion_timestamp: m.deletion_timestamp.map(time::to_pb),
        creator: m.creators.into_iter().next().unwrap_or_default(),
        name: m.name,
        tenant: m.tenant,
        labels: m.labels.into_iter().collect(),
        annotations: m.annotations.into_iter().collect(),
        version: i32::try_from(m.version).unwrap_or(i32::MAX),
        project: String::new(),
        display_name: m.display_name,
        description: m.description,
    }
}

/// What a request's metadata may say (the rest is the server's), the
/// fields `mask` wants.
pub fn metadata_input(m: pb::Metadata, mask: &Mask) -> MetadataInput {
    let text = |path: &str, v: String| (mask.wants(path, !v.is_empty())).then_some(v);
    let map = |path: &str, v: HashMap<String, String>| mask.wants(path, !v.is_empty()).then(|| v.into_iter().collect());
    MetadataInput {
        name: text("metadata.name", m.name),
        version: (m.version != 0).then_some(i64::from(m.version)),
        labels: map("metadata.labels", m.labels),
        annotations: map("metadata.annotations", m.annotations),
        display_name: text("metadata.display_name", m.display_name),
        description: text("metadata.description", m.description),
        ..MetadataInput::default()
    }
}

/// An update's metadata, the fields `mask` wants; none when it changes nothing.
pub fn changed_metadata(m: Option<pb::Metadata>, mask: &Mask) -> Option<MetadataInput> {
    m.map(|m| metadata_input(m, mask)).filter(|m| *m != MetadataInput::default())
}

/// What a typed reference names: its id, else its name; none when empty.
pub fn key(id: &str, name: &str) -> Option<String> {
    let k = if id.is_empty() { name } else { id };
    (!k.is_empty()).then(|| k.to_owned())
}

/// A reference held as `key` in its typed form: an id when it is a UUID,
/// else a name (as the REST API writes it).
pub fn reference(key: &str) -> (String, String) {
    if uuid::Uuid::parse_str(key).is_ok() { (key.to_owned(), String::new()) } else { (String::new(), key.to_owned()) }
}

/// The wire enum value named `name` (the model's states and protocols have
/// the same names as the messages'), `0` (unspecified) for an unknown one.
pub fn wire_enum<E: Into<i32>>(name: &str, from_name: impl Fn(&str) -> Option<E>) -> i32 {
    from_name(name).map_or(0, Into::into)
}

/// The model's value of the wire name `name`, given every value and its
/// wire name in the same order (`ALL`, `NAMES`); none for an unknown one.
pub fn model_enum<T: Copy>(name: &str, all: &[T], names: &[&str]) -> Option<T> {
    names.iter().position(|n| *n == name).and_then(|i| all.get(i).copied())
}

/// A count a message holds as `int32`, which the model holds unsigned: a
/// negative one is named under `field`.
pub fn unsigned(n: i32, field: &str, errs: &mut vmaas_model::ValidationErrors) -> u32 {
    u32::try_from(n).unwrap_or_else(|_| {
        errs.push(field, format!("must not be negative, got {n}"));
        0
    })
}

/// A count the model holds unsigned, as an `int32` field holds it.
pub fn signed(n: u32) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}
