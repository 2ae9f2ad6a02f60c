//! `vmaas_volumes`: every volume of the tenant, as data.

use rmpv::Value;
use vmaas_model::Volume;

use crate::diag::error;
use crate::proto::{Diagnostic, Schema};
use crate::resource::{Ctx, DataSource};
use crate::schema::{Mode, STRING, attr, block, list_of_objects};
use crate::value::object;

/// Data source of every volume.
pub const VOLUMES: &str = "vmaas_volumes";

/// The `vmaas_volumes` data source.
pub struct VolumesData;

fn volume_state(v: &Volume) -> Value {
    let text = |s: Option<&String>| Value::from(s.map(String::as_str).unwrap_or_default());
    object(vec![
        ("id", Value::from(v.id.as_str())),
        ("name", Value::from(v.metadata.name.as_str())),
        ("size", Value::from(v.spec.size.to_string())),
        ("source_image", text(v.spec.source_image.as_ref())),
        ("state", Value::from(v.status.state.as_str())),
        ("attached_to", text(v.status.attached_to.as_ref())),
    ])
}

#[tonic::async_trait]
impl DataSource for VolumesData {
    fn type_name(&self) -> &'static str {
        VOLUMES
    }

    fn schema(&self) -> Schema {
        let fields =
            [("id", STRING), ("name", STRING), ("size", STRING), ("source_image", STRING), ("state", STRING), ("attached_to", STRING)];
        block(
            "Every one of your volumes.",
            vec![attr(
                "volumes",
                &list_of_objects(&fields),
                Mode::Computed,
                "The volumes, oldest first, each with `id`, `name`, `size`, `source_image` (empty: blank), `state` and `attached_to` (a VM id, or empty).",
            )],
            vec![],
        )
    }

    async fn read(&self, ctx: &Ctx, _config: &Value, diags: &mut Vec<Diagnostic>) -> Value {
        let Some(client) = ctx.client_or_diag(diags) else { return Value::Nil };
        match client.list_objects::<Volume>("/volumes").await {
            Ok(page) => object(vec![("volumes", Value::Array(page.items.iter().map(volume_state).collect()))]),
            Err(e) => {
                diags.push(error("cannot list volumes", e.to_string(), None));
                Value::Nil
            }
        }
    }
}
