//! `vmaas_template` and `vmaas_templates`: the template catalog as data.

use rmpv::Value;
use vmaas_model::{Template, VirtualMachineTemplate};

use crate::diag::{error, path};
use crate::proto::{Diagnostic, Schema};
use crate::resource::{Ctx, DataSource};
use crate::schema::{Mode, STRING, attr, block, list_of_objects, parameters_type, template_fields};
use crate::value::{self, get, object, string};
use crate::vm_state::param_to_string;

/// Data source of one template.
pub const TEMPLATE: &str = vmaas_model::ObjectKind::Template.descriptor().terraform;
/// Data source of every template.
pub const TEMPLATES: &str = "vmaas_templates";

/// The `vmaas_template` data source.
pub struct TemplateData;

/// The `vmaas_templates` data source.
pub struct TemplatesData;

fn template_state(t: &VirtualMachineTemplate) -> Value {
    let compiled = Template::compile(t.clone().published()).ok();
    let params = t
        .parameters
        .iter()
        .map(|p| {
            let kind = compiled.as_ref().and_then(|c| c.parameter(&p.name)).map(|c| c.kind.parameter_type().to_string());
            object(vec![
                ("name", Value::from(p.name.as_str())),
                ("title", Value::from(p.title.as_str())),
                ("description", Value::from(p.description.as_str())),
                ("type", value::opt_string(kind.as_deref())),
                ("required", Value::Boolean(p.required)),
                ("default", value::opt_string(p.default.as_ref().map(|d| param_to_string(&d.value)).as_deref())),
            ])
        })
        .collect();
    object(vec![
        ("id", Value::from(t.id.as_str())),
        ("title", Value::from(t.title.as_str())),
        ("description", Value::from(t.description.as_str())),
        ("parameters", Value::Array(params)),
    ])
}

#[tonic::async_trait]
impl DataSource for TemplateData {
    fn type_name(&self) -> &'static str {
        TEMPLATE
    }

    fn schema(&self) -> Schema {
        let mut one = vec![attr("id", STRING, Mode::Required, "Template id.")];
        one.extend(template_fields());
        block("One virtual machine template.", one, vec![])
    }

    async fn read(&self, ctx: &Ctx, config: &Value, diags: &mut Vec<Diagnostic>) -> Value {
        let Some(client) = ctx.client_or_diag(diags) else { return Value::Nil };
        let id = string(get(config, "id")).unwrap_or_default();
        match client.get_template(&id).await {
            Ok(t) => template_state(&t),
            Err(e) => {
                diags.push(error(format!("cannot read template {id:?}"), e.to_string(), Some(path(&["id"]))));
                Value::Nil
            }
        }
    }
}

#[tonic::async_trait]
impl DataSource for TemplatesData {
    fn type_name(&self) -> &'static str {
        TEMPLATES
    }

    fn schema(&self) -> Schema {
        let list = list_of_objects(&[("id", STRING), ("title", STRING), ("description", STRING), ("parameters", &parameters_type())]);
        block(
            "Every virtual machine template.",
            vec![attr("templates", &list, Mode::Computed, "The templates, each with `id`, `title`, `description` and `parameters`.")],
            vec![],
        )
    }

    async fn read(&self, ctx: &Ctx, _config: &Value, diags: &mut Vec<Diagnostic>) -> Value {
        let Some(client) = ctx.client_or_diag(diags) else { return Value::Nil };
        match client.all_templates().await {
            Ok(ts) => object(vec![("templates", Value::Array(ts.iter().map(template_state).collect()))]),
            Err(e) => {
                diags.push(error("cannot list templates", e.to_string(), None));
                Value::Nil
            }
        }
    }
}
