//! Resources and data sources, in the style of terraform-plugin-framework:
//! one trait each and one file per type; [`crate::registry`] keys them by
//! type name.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmpv::Value;
use vmaas_client::Client;
use vmaas_model::VirtualMachineTemplate;

use crate::diag::error;
use crate::proto::{AttributePath, Diagnostic, Schema};

/// The templates read in this provider process, by id: a plan or an apply
/// of many VMs of one template reads it once (Terraform starts a provider
/// process per command, so the next command reads it afresh).
pub type Templates = Arc<Mutex<HashMap<String, Arc<VirtualMachineTemplate>>>>;

/// What a resource's calls can reach: the configured client, if any, and
/// the templates already read.
#[derive(Clone, Default)]
pub struct Ctx {
    client: Option<Client>,
    templates: Templates,
}

impl Ctx {
    /// A context with `client` (none before the provider is configured)
    /// sharing the templates read in `templates`.
    pub fn new(client: Option<Client>, templates: Templates) -> Self {
        Self { client, templates }
    }

    /// Template `id` by `client`, read once per provider process.
    pub async fn template(&self, client: &Client, id: &str) -> Result<Arc<VirtualMachineTemplate>, vmaas_client::Error> {
        if let Some(t) = self.templates.lock().ok().and_then(|m| m.get(id).cloned()) {
            return Ok(t);
        }
        let t = Arc::new(client.get_template(id).await?);
        if let Ok(mut m) = self.templates.lock() {
            m.insert(id.to_owned(), t.clone());
        }
        Ok(t)
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
