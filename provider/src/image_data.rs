//! `vmaas_images`: the OS images VMs can boot from, as data (for
//! `template_parameters = { vm_image = … }`).

use rmpv::Value;
use vmaas_model::image::Image;

use crate::diag::error;
use crate::proto::{Diagnostic, Schema};
use crate::resource::{Ctx, DataSource};
use crate::schema::{BOOL, Mode, NUMBER, STRING, attr, block, list_of_objects};
use crate::value::object;

/// Data source of every image.
pub const IMAGES: &str = "vmaas_images";

/// The `vmaas_images` data source.
pub struct ImagesData;

fn image_state(i: &Image) -> Value {
    object(vec![
        ("name", Value::from(i.metadata.name.as_str())),
        ("description", Value::from(i.spec.description.as_str())),
        ("state", Value::from(i.status.state.as_str().trim_start_matches("IMAGE_STATE_"))),
        ("format", Value::from(i.status.format.as_str())),
        ("virtual_size", Value::from(i.status.virtual_size)),
        ("public", Value::Boolean(i.metadata.public)),
    ])
}

#[tonic::async_trait]
impl DataSource for ImagesData {
    fn type_name(&self) -> &'static str {
        IMAGES
    }

    fn schema(&self) -> Schema {
        let fields =
            [("name", STRING), ("description", STRING), ("state", STRING), ("format", STRING), ("virtual_size", NUMBER), ("public", BOOL)];
        block(
            "Every OS image VMs can boot from (`vm_image`).",
            vec![attr(
                "images",
                &list_of_objects(&fields),
                Mode::Computed,
                "The images, by name, each with `description`, `state` (READY, FAILED…), `format`, `virtual_size` in bytes and `public`.",
            )],
            vec![],
        )
    }

    async fn read(&self, ctx: &Ctx, _config: &Value, diags: &mut Vec<Diagnostic>) -> Value {
        let Some(client) = ctx.client_or_diag(diags) else { return Value::Nil };
        match client.list_objects::<Image>("/images").await {
            Ok(page) => object(vec![("images", Value::Array(page.items.iter().map(image_state).collect()))]),
            Err(e) => {
                diags.push(error("cannot list images", e.to_string(), None));
                Value::Nil
            }
        }
    }
}
