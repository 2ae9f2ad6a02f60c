//! What the two template messages (`fulfillment.v1` and
//! `osac.public.v1`) share: their parameter definitions, which have the
//! same fields, and reading the model's words (types, fields, protocols).

use prost_reflect::DescriptorPool;
use prost_types::Any;
use serde::Deserialize;
use serde::de::IntoDeserializer;
use vmaas_model::template::{ParameterDefinition, ParameterType, SpecField, TemplateMetadata};
use vmaas_model::{Quantity, ValidationErrors};

use super::any::{from_parameter, to_parameter};
use super::non_empty;
use crate::grpc::pb::fulfillment::v1::VirtualMachineTemplateParameterDefinition;
use crate::grpc::pb::osac::public::v1::ComputeInstanceTemplateParameterDefinition;

/// A parameter definition's fields, as both template messages have them.
pub struct ParamWire {
    name: String,
    title: String,
    description: String,
    required: bool,
    kind: String,
    default: Option<Any>,
    maps_to: String,
}

/// Converts the parameter definition message `$pb` to and from [`ParamWire`].
macro_rules! param_wire {
    ($pb:ty) => {
        impl From<$pb> for ParamWire {
            fn from(p: $pb) -> Self {
                let (name, title, description, required) = (p.name, p.title, p.description, p.required);
                Self { name, title, description, required, kind: p.r#type, default: p.default, maps_to: p.maps_to }
            }
        }

        impl From<ParamWire> for $pb {
            fn from(p: ParamWire) -> Self {
                let (name, title, description, required) = (p.name, p.title, p.description, p.required);
                Self { name, title, description, required, r#type: p.kind, default: p.default, maps_to: p.maps_to }
            }
        }
    };
}

param_wire!(VirtualMachineTemplateParameterDefinition);
param_wire!(ComputeInstanceTemplateParameterDefinition);

/// A word of the model's (a type, a field, a protocol) read as its serde
/// name, or an error under `field`.
pub fn word<T: for<'de> Deserialize<'de>>(text: &str, field: &str, errs: &mut ValidationErrors) -> Option<T> {
    let read: Result<T, serde::de::value::Error> = T::deserialize(text.into_deserializer());
    read.map_err(|e| errs.push(field, e.to_string())).ok()
}

/// A request's parameter definitions, each problem named under `object.parameters[i]`.
pub fn parameters<P: Into<ParamWire>>(pool: &DescriptorPool, given: Vec<P>, errs: &mut ValidationErrors) -> Vec<ParameterDefinition> {
    let each = given.into_iter().enumerate();
    each.map(|(i, p)| parameter(pool, p.into(), &format!("object.parameters[{i}]"), errs)).collect()
}

fn parameter(pool: &DescriptorPool, p: ParamWire, at: &str, errs: &mut ValidationErrors) -> ParameterDefinition {
    let default =
        p.default.as_ref().and_then(|any| to_parameter(pool, any).map_err(|e| errs.push(format!("{at}.default"), e.to_string())).ok());
    ParameterDefinition {
        name: p.name,
        title: p.title,
        description: p.description,
        kind: (!p.kind.is_empty()).then(|| word::<ParameterType>(&p.kind, &format!("{at}.type"), errs)).flatten(),
        required: p.required,
        default,
        min: None,
        max: None,
        allowed: None,
        pattern: None,
        maps_to: (!p.maps_to.is_empty()).then(|| word::<SpecField>(&p.maps_to, &format!("{at}.maps_to"), errs)).flatten(),
    }
}

/// A template's parameter definitions as a message has them.
pub fn parameters_pb<P: From<ParamWire>>(pool: &DescriptorPool, defs: Vec<ParameterDefinition>) -> Vec<P> {
    let each = defs.into_iter().map(|p| ParamWire {
        name: p.name,
        title: p.title,
        description: p.description,
        required: p.required,
        kind: p.kind.map(|k| k.as_str().to_owned()).unwrap_or_default(),
        default: p.default.as_ref().map(|v| from_parameter(pool, v)),
        maps_to: p.maps_to.map(|f| f.as_str().to_owned()).unwrap_or_default(),
    });
    each.map(P::from).collect()
}

/// A machine default's quantity, or an error under `object.spec_defaults.{field}`.
pub fn quantity(q: Option<String>, field: &str, errs: &mut ValidationErrors) -> Option<Quantity> {
    q.and_then(|q| Quantity::parse(&q).map_err(|e| errs.push(format!("object.spec_defaults.{field}"), e.to_string())).ok())
}

/// What a request's template metadata may say: the version it was read
/// at, and a name (which must equal the id).
pub fn metadata_of(version: i32, name: String) -> TemplateMetadata {
    TemplateMetadata {
        creation_timestamp: None,
        update_timestamp: None,
        version: (version != 0).then_some(i64::from(version)),
        name: non_empty(name),
    }
}
