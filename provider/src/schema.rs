//! The provider's schemas, with descriptions written for generated docs.

use std::collections::HashMap;

use crate::proto::schema::{Attribute, Block, NestedBlock};
use crate::proto::{Schema, StringKind, get_provider_schema};
use crate::resource::Registry;

pub(crate) const STRING: &str = "\"string\"";
pub(crate) const BOOL: &str = "\"bool\"";
pub(crate) const NUMBER: &str = "\"number\"";
pub(crate) const STRING_MAP: &str = "[\"map\",\"string\"]";

#[derive(Clone, Copy)]
pub(crate) enum Mode {
    Required,
    Optional,
    Computed,
    OptionalComputed,
}

pub(crate) fn attr(name: &str, ty: &str, mode: Mode, description: &str) -> Attribute {
    Attribute {
        name: name.into(),
        r#type: ty.as_bytes().to_vec(),
        description: description.into(),
        required: matches!(mode, Mode::Required),
        optional: matches!(mode, Mode::Optional | Mode::OptionalComputed),
        computed: matches!(mode, Mode::Computed | Mode::OptionalComputed),
        sensitive: false,
        description_kind: StringKind::Markdown as i32,
        deprecated: false,
    }
}

pub(crate) fn block(description: &str, attributes: Vec<Attribute>, block_types: Vec<NestedBlock>) -> Schema {
    Schema {
        version: 0,
        block: Some(Block {
            version: 0,
            attributes,
            block_types,
            description: description.into(),
            description_kind: StringKind::Markdown as i32,
            deprecated: false,
        }),
    }
}

/// `list(object({...}))` of string attributes (and a `required` bool for parameters).
pub(crate) fn list_of_objects(fields: &[(&str, &str)]) -> String {
    let inner: Vec<String> = fields.iter().map(|(n, t)| format!("\"{n}\":{t}")).collect();
    format!("[\"list\",[\"object\",{{{}}}]]", inner.join(","))
}

/// The type of a template's `parameters` as data: a list of objects.
pub(crate) fn parameters_type() -> String {
    list_of_objects(&[
        ("name", STRING),
        ("title", STRING),
        ("description", STRING),
        ("type", STRING),
        ("required", BOOL),
        ("default", STRING),
    ])
}

pub(crate) fn template_fields() -> Vec<Attribute> {
    let params = parameters_type();
    vec![
        attr("title", STRING, Mode::Computed, "Short human title."),
        attr("description", STRING, Mode::Computed, "Longer description, in Markdown."),
        attr(
            "parameters",
            &params,
            Mode::Computed,
            "The parameters VMs may set: `name`, `title`, `description`, `type` (bool, integer, string, quantity, list), `required`, and `default` as text.",
        ),
    ]
}

/// The whole schema response.
pub fn provider_schema(registry: &Registry) -> get_provider_schema::Response {
    let mut token = attr("token", STRING, Mode::Optional, "Bearer token. Also read from `VMAAS_TOKEN`.");
    token.sensitive = true;
    let provider = block(
        "The vmaas provider manages virtual machines through a vmaas fulfillment server.",
        vec![
            attr("endpoint", STRING, Mode::Optional, "Server URL, e.g. `http://127.0.0.1:8000`. Also read from `VMAAS_ENDPOINT`."),
            token,
            attr("insecure", BOOL, Mode::Optional, "Skip the TLS certificate check of an `https` endpoint (default: `VMAAS_INSECURE`)."),
            attr(
                "ca_file",
                STRING,
                Mode::Optional,
                "PEM file of a CA (or of the server's self-signed certificate) to trust for an `https` endpoint (default: `VMAAS_CA_FILE`).",
            ),
        ],
        vec![],
    );
    get_provider_schema::Response {
        provider: Some(provider),
        resource_schemas: registry.resources().map(|r| (r.type_name().to_owned(), r.schema())).collect::<HashMap<_, _>>(),
        data_source_schemas: registry.data_sources().map(|d| (d.type_name().to_owned(), d.schema())).collect::<HashMap<_, _>>(),
        diagnostics: vec![],
        provider_meta: None,
        server_capabilities: Some(crate::proto::ServerCapabilities { plan_destroy: false, get_provider_schema_optional: false }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_is_valid_json_and_described() {
        let s = provider_schema(&Registry::standard());
        let all = s.resource_schemas.values().chain(s.data_source_schemas.values()).chain(s.provider.iter());
        for schema in all {
            let b = schema.block.as_ref().unwrap();
            assert!(!b.description.is_empty());
            for a in &b.attributes {
                serde_json::from_slice::<serde_json::Value>(&a.r#type).unwrap_or_else(|e| panic!("{}: {e}", a.name));
                assert!(!a.description.is_empty(), "{} has a description", a.name);
                assert_eq!(u8::from(a.required) + u8::from(a.optional || a.computed), 1, "{} is required xor optional/computed", a.name);
            }
        }
    }
}
