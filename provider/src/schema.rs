//! The provider's schemas, with descriptions written for generated docs.

use std::collections::HashMap;

use crate::proto::schema::{Attribute, Block, NestedBlock, nested_block::NestingMode};
use crate::proto::{Schema, StringKind, get_provider_schema};
use crate::provider::{TEMPLATE, TEMPLATES, VM};

const STRING: &str = "\"string\"";
const BOOL: &str = "\"bool\"";
const STRING_MAP: &str = "[\"map\",\"string\"]";

#[derive(Clone, Copy)]
enum Mode {
    Required,
    Optional,
    Computed,
    OptionalComputed,
}

fn attr(name: &str, ty: &str, mode: Mode, description: &str) -> Attribute {
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

fn block(description: &str, attributes: Vec<Attribute>, block_types: Vec<NestedBlock>) -> Schema {
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
fn list_of_objects(fields: &[(&str, &str)]) -> String {
    let inner: Vec<String> = fields.iter().map(|(n, t)| format!("\"{n}\":{t}")).collect();
    format!("[\"list\",[\"object\",{{{}}}]]", inner.join(","))
}

fn template_fields() -> Vec<Attribute> {
    let params = list_of_objects(&[
        ("name", STRING),
        ("title", STRING),
        ("description", STRING),
        ("type", STRING),
        ("required", BOOL),
        ("default", STRING),
    ]);
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
pub fn provider_schema() -> get_provider_schema::Response {
    let mut token = attr("token", STRING, Mode::Optional, "Bearer token. Also read from `VMAAS_TOKEN`.");
    token.sensitive = true;
    let provider = block(
        "The vmaas provider manages virtual machines through a vmaas fulfillment server.",
        vec![
            attr("endpoint", STRING, Mode::Optional, "Server URL, e.g. `http://127.0.0.1:8000`. Also read from `VMAAS_ENDPOINT`."),
            token,
            attr("insecure", BOOL, Mode::Optional, "Skip the TLS certificate check of an `https` endpoint."),
            attr("ca_file", STRING, Mode::Optional, "PEM file of a CA to trust for an `https` endpoint."),
        ],
        vec![],
    );
    let conditions = list_of_objects(&[("type", STRING), ("status", STRING), ("reason", STRING), ("message", STRING)]);
    let timeouts = NestedBlock {
        type_name: "timeouts".into(),
        block: Some(Block {
            version: 0,
            attributes: vec![
                attr("create", STRING, Mode::Optional, "How long to wait for a new VM to be READY (default `10m`)."),
                attr("update", STRING, Mode::Optional, "How long to wait after a change of `state` (default `10m`)."),
                attr("delete", STRING, Mode::Optional, "How long to wait for the VM to be gone (default `10m`)."),
            ],
            block_types: vec![],
            description: "Timeouts, as durations such as `90s` or `10m`.".into(),
            description_kind: StringKind::Markdown as i32,
            deprecated: false,
        }),
        nesting: NestingMode::Single as i32,
        min_items: 0,
        max_items: 0,
    };
    let vm = block(
        "A virtual machine made from a template. Create waits until the VM is READY: running, with its guest answering its readiness probe.",
        vec![
            attr("id", STRING, Mode::Computed, "The VM's id (a UUID)."),
            attr("name", STRING, Mode::Required, "Name, unique in the tenant (a DNS label). Changing it replaces the VM."),
            attr("template", STRING, Mode::Required, "Template id. Changing it replaces the VM."),
            attr(
                "template_parameters",
                STRING_MAP,
                Mode::Optional,
                "Template parameters as text; the provider types them from the template (`\"4\"` for an integer, `\"4Gi\"` for a quantity, `\"a,b\"` for a list). Changing one replaces the VM.",
            ),
            attr("state", STRING, Mode::OptionalComputed, "`started` (default) or `stopped`. Changes in place."),
            attr("status", STRING, Mode::Computed, "READY, PROGRESSING, STOPPED, FAILED or DELETING."),
            attr("internal_ip", STRING, Mode::Computed, "The address of the VM itself."),
            attr("external_ip", STRING, Mode::Computed, "The floating address pointing to the VM."),
            attr(
                "conditions",
                &conditions,
                Mode::Computed,
                "PROGRESSING, READY, FAILED and DEGRADED, each with `status`, `reason` and `message`.",
            ),
        ],
        vec![timeouts],
    );
    let mut one = vec![attr("id", STRING, Mode::Required, "Template id.")];
    one.extend(template_fields());
    let template = block("One virtual machine template.", one, vec![]);
    let list = list_of_objects(&[
        ("id", STRING),
        ("title", STRING),
        ("description", STRING),
        (
            "parameters",
            &list_of_objects(&[
                ("name", STRING),
                ("title", STRING),
                ("description", STRING),
                ("type", STRING),
                ("required", BOOL),
                ("default", STRING),
            ]),
        ),
    ]);
    let templates = block(
        "Every virtual machine template.",
        vec![attr("templates", &list, Mode::Computed, "The templates, each with `id`, `title`, `description` and `parameters`.")],
        vec![],
    );
    get_provider_schema::Response {
        provider: Some(provider),
        resource_schemas: HashMap::from([(VM.to_owned(), vm), (TEMPLATE.to_owned(), crate::template_resource::schema())]),
        data_source_schemas: HashMap::from([(TEMPLATE.to_owned(), template), (TEMPLATES.to_owned(), templates)]),
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
        let s = provider_schema();
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
