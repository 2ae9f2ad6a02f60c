//! Resources and data sources, in the style of terraform-plugin-framework:
//! one trait each and one file per type; [`crate::registry`] keys them by
//! type name.

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
