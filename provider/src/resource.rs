//! Resources and data sources, in the style of terraform-plugin-framework:
//! one trait each, one file per type, and a registry keyed by type name so
//! that an unknown type is an error, never another type's code.

use std::collections::BTreeMap;
use std::sync::Arc;

use rmpv::Value;
use vmaas_client::Client;

use crate::diag::error;
use crate::proto::{AttributePath, Diagnostic, Schema};

/// What a resource's calls can reach: the configured client, if any.
#[derive(Clone, Default)]
pub struct Ctx {
    client: Option<Client>,
}

impl Ctx {
    /// A context with `client` (none before the provider is configured).
    pub fn new(client: Option<Client>) -> Self {
        Self { client }
    }

    /// The client, if the provider is configured.
    pub fn client(&self) -> Option<&Client> {
        self.client.as_ref()
    }

    /// The client, or a diagnostic saying the provider is not configured.
    pub fn client_or_diag(&self, diags: &mut Vec<Diagnostic>) -> Option<&Client> {
        if self.client.is_none() {
            diags.push(error("the vmaas provider is not configured", "the vmaas provider is not configured", None));
        }
        self.client.as_ref()
    }
}

/// A managed resource type.
#[tonic::async_trait]
pub trait Resource: Send + Sync {
    /// The type name, e.g. `vmaas_virtual_machine`.
    fn type_name(&self) -> &'static str;

    /// Its schema.
    fn schema(&self) -> Schema;

    /// Checks a configuration before any plan.
    fn validate(&self, _config: &Value) -> Vec<Diagnostic> {
        Vec::new()
    }

    /// The planned state for `proposed` (nil: destroy), and the attributes whose change replaces it.
    async fn plan(&self, ctx: &Ctx, prior: &Value, proposed: &Value, diags: &mut Vec<Diagnostic>) -> (Value, Vec<AttributePath>);

    /// Makes `planned` (nil: destroy) real; returns the new state.
    async fn apply(&self, ctx: &Ctx, prior: &Value, planned: &Value, diags: &mut Vec<Diagnostic>) -> Value;

    /// The current state of the object with `id` (nil: gone).
    async fn read(&self, ctx: &Ctx, id: &str, state: &Value) -> (Value, Vec<Diagnostic>);

    /// The state of an existing object named by the user, for `terraform import`.
    async fn import(&self, ctx: &Ctx, id: &str) -> Result<Value, Diagnostic>;
}

/// A data source type.
#[tonic::async_trait]
pub trait DataSource: Send + Sync {
    /// The type name, e.g. `vmaas_templates`.
    fn type_name(&self) -> &'static str;

    /// Its schema.
    fn schema(&self) -> Schema;

    /// Reads it for `config`.
    async fn read(&self, ctx: &Ctx, config: &Value, diags: &mut Vec<Diagnostic>) -> Value;
}

/// Every resource and data source the provider has, by type name.
#[derive(Clone, Default)]
pub struct Registry {
    resources: BTreeMap<&'static str, Arc<dyn Resource>>,
    data_sources: BTreeMap<&'static str, Arc<dyn DataSource>>,
}

impl Registry {
    /// The provider's types.
    pub fn standard() -> Self {
        let mut r = Self::default();
        r.add_resource(crate::vm_resource::VmResource);
        r.add_resource(crate::template_resource::TemplateResource);
        r.add_resource(crate::network_resource::NetworkResource);
        r.add_data_source(crate::template_data::TemplateData);
        r.add_data_source(crate::template_data::TemplatesData);
        r.add_data_source(crate::image_data::ImagesData);
        r.add_data_source(crate::volume_data::VolumesData);
        r.add_data_source(crate::object_resource::ObjectData(&crate::kinds::NETWORK_DATA));
        for k in crate::kinds::ALL {
            r.add_resource(crate::object_resource::ObjectResource(k));
            r.add_data_source(crate::object_resource::ObjectData(k));
        }
        r
    }

    /// Registers a resource type.
    pub fn add_resource(&mut self, r: impl Resource + 'static) {
        self.resources.insert(r.type_name(), Arc::new(r));
    }

    /// Registers a data source type.
    pub fn add_data_source(&mut self, d: impl DataSource + 'static) {
        self.data_sources.insert(d.type_name(), Arc::new(d));
    }

    /// Every resource type.
    pub fn resources(&self) -> impl Iterator<Item = &Arc<dyn Resource>> {
        self.resources.values()
    }

    /// Every data source type.
    pub fn data_sources(&self) -> impl Iterator<Item = &Arc<dyn DataSource>> {
        self.data_sources.values()
    }

    /// The resource type `name`, or a diagnostic naming the ones there are.
    pub fn resource(&self, name: &str) -> Result<&Arc<dyn Resource>, Diagnostic> {
        self.resources.get(name).ok_or_else(|| unknown("resource", name, self.resources.keys()))
    }

    /// The data source type `name`, or a diagnostic naming the ones there are.
    pub fn data_source(&self, name: &str) -> Result<&Arc<dyn DataSource>, Diagnostic> {
        self.data_sources.get(name).ok_or_else(|| unknown("data source", name, self.data_sources.keys()))
    }
}

fn unknown<'a>(what: &str, name: &str, known: impl Iterator<Item = &'a &'static str>) -> Diagnostic {
    let known: Vec<&str> = known.copied().collect();
    error(format!("unknown {what} type {name:?}"), format!("this provider has the {what} types {}", known.join(", ")), None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind of the model has its Terraform resource type and a data
    /// source of the same name, as its descriptor declares.
    #[test]
    fn every_kind_has_its_terraform_types() {
        let r = Registry::standard();
        let missing: Vec<String> = vmaas_model::ObjectKind::ALL
            .into_iter()
            .map(|k| (k, k.descriptor().terraform))
            .filter(|(_, t)| r.resource(t).is_err())
            .map(|(k, t)| format!("{k}: no resource type {t}"))
            .collect();
        assert!(missing.is_empty(), "{missing:?}");
    }

    #[test]
    fn unknown_types_are_errors_naming_the_known_ones() {
        let r = Registry::standard();
        assert!(r.resource("vmaas_virtual_machine").is_ok());
        let d = r.resource("vmaas_virtual_machin").err().unwrap();
        assert!(d.summary.contains("unknown resource type \"vmaas_virtual_machin\""));
        assert!(d.detail.contains("vmaas_template, vmaas_virtual_machine, vmaas_virtual_network"));
        assert!(r.data_source("vmaas_virtual_machine").is_err());
    }
}
