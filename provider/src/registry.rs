//! Every resource and data source the provider has, keyed by type name so
//! that an unknown type is an error, never another type's code; and the
//! provider's schema made of theirs. This is the one file that names every
//! type: the types depend on [`crate::resource`], never on this.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::diag::error;
use crate::proto::{Diagnostic, get_provider_schema};
use crate::resource::{DataSource, Resource};
use crate::schema::{BOOL, Mode, STRING, attr, block};

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
