//! The provider's schemas, with descriptions written for generated docs.

use crate::proto::schema::{Attribute, Block, NestedBlock, nested_block::NestingMode};
use crate::proto::{Schema, StringKind};

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
        write_only: false,
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

/// A nested block `name` of `attributes` and `blocks`, nested as `nesting`.
pub(crate) fn nested(
    name: &str,
    nesting: NestingMode,
    description: &str,
    attributes: Vec<Attribute>,
    blocks: Vec<NestedBlock>,
) -> NestedBlock {
    NestedBlock {
        type_name: name.into(),
        block: Some(Block {
            version: 0,
            attributes,
            block_types: blocks,
            description: description.into(),
            description_kind: StringKind::Markdown as i32,
            deprecated: false,
        }),
        nesting: nesting as i32,
        min_items: 0,
        max_items: 0,
    }
}
