//! The provider: configuration, and the plugin protocol's calls dispatched
//! by type name to the registered resources and data sources.

use std::sync::RwLock;

use rmpv::Value;
use tonic::{Request, Response, Status};
use vmaas_client::Client;

use crate::diag::{error, path};
use crate::proto::provider_server::Provider;
use crate::proto::*;
use crate::registry::Registry;
use crate::resource::{Ctx, Templates};
use crate::value::{self, get, string};
use crate::write_only;

pub use crate::template_data::TEMPLATES;
pub use crate::template_resource::TEMPLATE;
pub use crate::vm_resource::VM;

/// The vmaas provider.
pub struct VmaasProvider {
    client: RwLock<Option<Client>>,
    /// The templates read so far.
    templates: Templates,
    registry: Registry,
    /// Turned true by `StopProvider` (Ctrl-C): every wait in flight ends.
    stop: tokio::sync::watch::Sender<bool>,
}

impl Default for VmaasProvider {
    fn default() -> Self {
        Self {
            client: RwLock::new(None),
            templates: Templates::default(),
            registry: Registry::standard(),
            stop: tokio::sync::watch::Sender::new(false),
        }
    }
}

fn bad(e: impl std::fmt::Display) -> Status {
    Status::invalid_argument(e.to_string())
}

impl VmaasProvider {
    /// What a resource's call can reach.
    fn ctx(&self) -> Result<Ctx, Status> {
        let client = self.client.read().map_err(|_| Status::internal("provider lock poisoned"))?.clone();
        Ok(Ctx::new(client, self.templates.clone()))
    }
}

#[tonic::async_trait]
impl Provider for VmaasProvider {
    async fn get_metadata(&self, _r: Request<get_metadata::Request>) -> Result<Response<get_metadata::Response>, Status> {
        Ok(Response::new(get_metadata::Response {
            server_capabilities: Some(ServerCapabilities { plan_destroy: false, get_provider_schema_optional: false }),
            diagnostics: vec![],
            data_sources: self
                .registry
                .data_sources()
                .map(|d| get_metadata::DataSourceMetadata { type_name: d.type_name().into() })
                .collect(),
            resources: self.registry.resources().map(|r| get_metadata::ResourceMetadata { type_name: r.type_name().into() }).collect(),
        }))
    }

    async fn get_provider_schema(
        &self,
        _r: Request<get_provider_schema::Request>,
    ) -> Result<Response<get_provider_schema::Response>, Status> {
        Ok(Response::new(crate::registry::provider_schema(&self.registry)))
    }

    async fn validate_provider_config(
        &self,
        r: Request<validate_provider_config::Request>,
    ) -> Result<Response<validate_provider_config::Response>, Status> {
        let config = value::decode(r.get_ref().config.as_ref()).map_err(bad)?;
        let mut diagnostics = Vec::new();
        if let Some(e) = string(get(&config, "endpoint"))
            && !(e.starts_with("http://") || e.starts_with("https://"))
        {
            diagnostics.push(error("invalid endpoint", format!("{e:?} must start with http:// or https://"), Some(path(&["endpoint"]))));
        }
        Ok(Response::new(validate_provider_config::Response { diagnostics }))
    }

    async fn validate_resource_config(
        &self,
        r: Request<validate_resource_config::Request>,
    ) -> Result<Response<validate_resource_config::Response>, Status> {
        let config = value::decode(r.get_ref().config.as_ref()).map_err(bad)?;
        let allowed = r.get_ref().client_capabilities.as_ref().is_some_and(|c| c.write_only_attributes_allowed);
        let diagnostics = match self.registry.resource(&r.get_ref().type_name) {
            Ok(res) => {
                let mut d = write_only::refused(&config, &write_only::names(&res.schema()), allowed);
                d.extend(res.validate(&config));
                d
            }
            Err(d) => vec![d],
        };
        Ok(Response::new(validate_resource_config::Response { diagnostics }))
    }

    async fn validate_data_resource_config(
        &self,
        _r: Request<validate_data_resource_config::Request>,
    ) -> Result<Response<validate_data_resource_config::Response>, Status> {
        Ok(Response::new(validate_data_resource_config::Response { diagnostics: vec![] }))
    }

    async fn upgrade_resource_state(
        &self,
        r: Request<upgrade_resource_state::Request>,
    ) -> Result<Response<upgrade_resource_state::Response>, Status> {
        let raw = r.get_ref().raw_state.as_ref().map(|s| s.json.clone()).unwrap_or_default();
        let v = if raw.is_empty() { Value::Nil } else { value::from_json(&serde_json::from_slice(&raw).map_err(bad)?) };
        Ok(Response::new(upgrade_resource_state::Response { upgraded_state: Some(value::encode(&v)), diagnostics: vec![] }))
    }

    async fn configure_provider(&self, r: Request<configure_provider::Request>) -> Result<Response<configure_provider::Response>, Status> {
        let config = value::decode(r.get_ref().config.as_ref()).map_err(bad)?;
        // Each setting from the configuration, else its environment variable.
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let endpoint = string(get(&config, "endpoint")).or_else(|| env("VMAAS_ENDPOINT")).unwrap_or_else(|| "http://127.0.0.1:8000".into());
        let token = string(get(&config, "token")).or_else(|| env("VMAAS_TOKEN"));
        let insecure = get(&config, "insecure").as_bool().unwrap_or_else(|| env("VMAAS_INSECURE").is_some_and(|v| v == "true" || v == "1"));
        let ca = match string(get(&config, "ca_file")).or_else(|| env("VMAAS_CA_FILE")) {
            Some(f) => match std::fs::read(&f) {
                Ok(pem) => Some(pem),
                Err(e) => {
                    let d = error("cannot read ca_file", format!("{f}: {e}"), Some(path(&["ca_file"])));
                    return Ok(Response::new(configure_provider::Response { diagnostics: vec![d] }));
                }
            },
            None => None,
        };
        let mut diagnostics = Vec::new();
        match Client::with_tls(&endpoint, token, insecure, ca.as_deref()) {
            Ok(c) => {
                let stoppable = c.with_stop(self.stop.subscribe());
                *self.client.write().map_err(|_| Status::internal("provider lock poisoned"))? = Some(stoppable);
            }
            Err(e) => diagnostics.push(error("invalid provider configuration", e.to_string(), Some(path(&["endpoint"])))),
        }
        Ok(Response::new(configure_provider::Response { diagnostics }))
    }

    async fn read_resource(&self, r: Request<read_resource::Request>) -> Result<Response<read_resource::Response>, Status> {
        let state = value::decode(r.get_ref().current_state.as_ref()).map_err(bad)?;
        let (new_state, diagnostics) = match (self.registry.resource(&r.get_ref().type_name), string(get(&state, "id"))) {
            (Err(d), _) => (state.clone(), vec![d]),
            (Ok(_), None) => (Value::Nil, vec![]),
            (Ok(res), Some(id)) => {
                let (read, d) = res.read(&self.ctx()?, &id, &state).await;
                (write_only::cleared(read, &write_only::names(&res.schema())), d)
            }
        };
        Ok(Response::new(read_resource::Response { new_state: Some(value::encode(&new_state)), diagnostics, private: vec![] }))
    }

    async fn plan_resource_change(
        &self,
        r: Request<plan_resource_change::Request>,
    ) -> Result<Response<plan_resource_change::Response>, Status> {
        let req = r.get_ref();
        let prior = value::decode(req.prior_state.as_ref()).map_err(bad)?;
        let proposed = value::decode(req.proposed_new_state.as_ref()).map_err(bad)?;
        let mut diagnostics = Vec::new();
        let (planned, requires_replace) = match self.registry.resource(&req.type_name) {
            Ok(res) => {
                let (planned, replace) = res.plan(&self.ctx()?, &prior, &proposed, &mut diagnostics).await;
                (write_only::cleared(planned, &write_only::names(&res.schema())), replace)
            }
            Err(d) => {
                diagnostics.push(d);
                (proposed.clone(), Vec::new())
            }
        };
        Ok(Response::new(plan_resource_change::Response {
            planned_state: Some(value::encode(&planned)),
            requires_replace,
            planned_private: vec![],
            diagnostics,
        }))
    }

    async fn apply_resource_change(
        &self,
        r: Request<apply_resource_change::Request>,
    ) -> Result<Response<apply_resource_change::Response>, Status> {
        let req = r.get_ref();
        let prior = value::decode(req.prior_state.as_ref()).map_err(bad)?;
        let planned = value::decode(req.planned_state.as_ref()).map_err(bad)?;
        let config = value::decode(req.config.as_ref()).map_err(bad)?;
        let mut diagnostics = Vec::new();
        let new_state = match self.registry.resource(&req.type_name) {
            Ok(res) => {
                // The apply sees the write-only values; the state never keeps them.
                let names = write_only::names(&res.schema());
                let planned = write_only::with_config(planned, &config, &names);
                write_only::cleared(res.apply(&self.ctx()?, &prior, &planned, &mut diagnostics).await, &names)
            }
            Err(d) => {
                diagnostics.push(d);
                prior.clone()
            }
        };
        Ok(Response::new(apply_resource_change::Response { new_state: Some(value::encode(&new_state)), private: vec![], diagnostics }))
    }

    async fn import_resource_state(
        &self,
        r: Request<import_resource_state::Request>,
    ) -> Result<Response<import_resource_state::Response>, Status> {
        let req = r.get_ref();
        let found = match self.registry.resource(&req.type_name) {
            Ok(res) => res.import(&self.ctx()?, &req.id).await,
            Err(d) => Err(d),
        };
        let (imported, diagnostics) = match found {
            Ok(state) => (
                vec![import_resource_state::ImportedResource {
                    type_name: req.type_name.clone(),
                    state: Some(value::encode(&state)),
                    private: vec![],
                }],
                vec![],
            ),
            Err(d) => (vec![], vec![d]),
        };
        Ok(Response::new(import_resource_state::Response { imported_resources: imported, diagnostics }))
    }

    async fn read_data_source(&self, r: Request<read_data_source::Request>) -> Result<Response<read_data_source::Response>, Status> {
        let req = r.get_ref();
        let config = value::decode(req.config.as_ref()).map_err(bad)?;
        let mut diagnostics = Vec::new();
        let state = match self.registry.data_source(&req.type_name) {
            Ok(d) => d.read(&self.ctx()?, &config, &mut diagnostics).await,
            Err(d) => {
                diagnostics.push(d);
                Value::Nil
            }
        };
        Ok(Response::new(read_data_source::Response { state: Some(value::encode(&state)), diagnostics }))
    }

    /// Ends every wait in flight at once: each apply returns what exists
    /// (kept in the state) with an error saying it was interrupted.
    async fn stop_provider(&self, _r: Request<stop_provider::Request>) -> Result<Response<stop_provider::Response>, Status> {
        self.stop.send_replace(true);
        tracing::info!("asked to stop: waits in flight end");
        Ok(Response::new(stop_provider::Response { error: String::new() }))
    }
}
