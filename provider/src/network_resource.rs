//! `vmaas_virtual_network`: a tenant's private address space. Its spec is
//! immutable (as in OSAC), so any change replaces it; create waits until it
//! is READY, destroy until it is gone.

use std::time::Duration;

use rmpv::Value;
use vmaas_model::{CreateVirtualNetwork, MetadataInput, VirtualNetwork, VirtualNetworkSpec};

use crate::diag::{api_error, error, path};
use crate::proto::{AttributePath, Diagnostic, Schema};
use crate::resource::{Ctx, Resource};
use crate::schema::{Mode, STRING, attr, block};
use crate::timeouts::{Defaults, Timeouts};
use crate::value::{self, get, object, set, string, unknown};

/// Resource type of a virtual network.
pub const NETWORK: &str = vmaas_model::ObjectKind::VirtualNetwork.descriptor().terraform;

/// How long create and destroy wait unless `timeouts` says.
const WAIT: Defaults = Defaults { create: Duration::from_secs(300), update: Duration::from_secs(300), delete: Duration::from_secs(300) };

/// The `vmaas_virtual_network` resource.
pub struct NetworkResource;

/// The state of `n`, with the `timeouts` block the user wrote (`inputs`;
/// none for an import).
fn network_state(n: &VirtualNetwork, inputs: Option<&Value>) -> Value {
    object(vec![
        ("timeouts", crate::timeouts::written(inputs)),
        ("id", Value::from(n.id.as_str())),
        ("name", Value::from(n.metadata.name.as_str())),
        ("ipv4_cidr", value::opt_string(n.spec.ipv4_cidr.as_deref())),
        ("ipv6_cidr", value::opt_string(n.spec.ipv6_cidr.as_deref())),
        ("network_class", value::opt_string(Some(n.spec.network_class.as_str()).filter(|c| !c.is_empty()))),
        ("state", Value::from(n.status.state.as_str().trim_start_matches("VIRTUAL_NETWORK_STATE_"))),
    ])
}

impl NetworkResource {
    async fn create(&self, ctx: &Ctx, planned: &Value, diags: &mut Vec<Diagnostic>) -> Value {
        let Some(client) = ctx.client_or_diag(diags) else { return Value::Nil };
        let Some(limit) = Timeouts::decode(planned, &WAIT).limit("create", diags) else { return Value::Nil };
        let req = CreateVirtualNetwork {
            type_url: None,
            id: None,
            metadata: Some(MetadataInput { name: string(get(planned, "name")), ..Default::default() }),
            spec: VirtualNetworkSpec {
                network_class: string(get(planned, "network_class")).unwrap_or_default(),
                ipv4_cidr: string(get(planned, "ipv4_cidr")),
                ipv6_cidr: string(get(planned, "ipv6_cidr")),
            },
            status: None,
        };
        let created = match client.create_network(&req).await {
            Ok(n) => n,
            Err(e) => {
                diags.push(api_error("cannot create the virtual network", &e));
                return Value::Nil;
            }
        };
        match client.wait_network(&created.id, false, limit, Duration::from_millis(250)).await {
            Ok(Some(n)) => network_state(&n, Some(planned)),
            Ok(None) => network_state(&created, Some(planned)),
            Err(e) => {
                // It exists: keep it in the state (Terraform taints it).
                diags.push(error(format!("virtual network {:?} did not become READY", created.metadata.name), e.to_string(), None));
                network_state(&created, Some(planned))
            }
        }
    }

    async fn destroy(&self, ctx: &Ctx, prior: &Value, diags: &mut Vec<Diagnostic>) -> Value {
        let Some(client) = ctx.client_or_diag(diags) else { return prior.clone() };
        let Some(id) = string(get(prior, "id")) else { return Value::Nil };
        let Some(limit) = Timeouts::decode(prior, &WAIT).limit("delete", diags) else { return prior.clone() };
        match client.delete_network(&id).await {
            Err(e) if e.is_not_found() => Value::Nil,
            Err(e) => {
                diags.push(api_error("cannot delete the virtual network", &e));
                prior.clone()
            }
            Ok(_) => match client.wait_network(&id, true, limit, Duration::from_millis(250)).await {
                Ok(_) => Value::Nil,
                Err(e) => {
                    diags.push(error("the virtual network was not deleted in time", e.to_string(), None));
                    prior.clone()
                }
            },
        }
    }
}

#[tonic::async_trait]
impl Resource for NetworkResource {
    fn type_name(&self) -> &'static str {
        NETWORK
    }

    fn schema(&self) -> Schema {
        block(
            "A virtual network: a tenant's private address space (OSAC's `VirtualNetwork`). Create waits until it is READY. Its addresses cannot change in place: a change replaces it.",
            vec![
                attr("id", STRING, Mode::Computed, "The network's id (a UUID)."),
                attr("name", STRING, Mode::Required, "Name, unique in the tenant (a DNS label). Changing it replaces the network."),
                attr("ipv4_cidr", STRING, Mode::Optional, "The IPv4 address space, e.g. `10.10.0.0/16`. Changing it replaces the network."),
                attr("ipv6_cidr", STRING, Mode::Optional, "The IPv6 address space, e.g. `fd00:10::/48`. Changing it replaces the network."),
                attr(
                    "network_class",
                    STRING,
                    Mode::Optional,
                    "The network class: unset for the default, or one the server offers (on kubevirt, a physical network an administrator declared with `--physical-network`: its subnets are bridged onto it). Changing it replaces the network.",
                ),
                attr("state", STRING, Mode::Computed, "PENDING, READY or FAILED."),
            ],
            vec![crate::timeouts::block("the network", &WAIT)],
        )
    }

    fn validate(&self, config: &Value) -> Vec<Diagnostic> {
        let mut diags = Timeouts::check(config);
        if let Some(n) = string(get(config, "name"))
            && let Err(reason) = vmaas_model::validation::check_dns_label(&n)
        {
            diags.push(error("invalid name", reason, Some(path(&["name"]))));
        }
        let spec = VirtualNetworkSpec {
            network_class: string(get(config, "network_class")).unwrap_or_default(),
            ipv4_cidr: string(get(config, "ipv4_cidr")),
            ipv6_cidr: string(get(config, "ipv6_cidr")),
        };
        let unknown_cidr = ["ipv4_cidr", "ipv6_cidr", "network_class"].iter().any(|a| value::is_unknown(get(config, a)));
        if let (false, Err(errs)) = (unknown_cidr, spec.check("")) {
            for e in errs.iter() {
                let field = e.field.trim_start_matches('.');
                diags.push(error(format!("invalid {field}"), e.reason.clone(), Some(path(&[field]))));
            }
        }
        diags
    }

    async fn plan(&self, _ctx: &Ctx, prior: &Value, proposed: &Value, _diags: &mut Vec<Diagnostic>) -> (Value, Vec<AttributePath>) {
        if proposed.is_nil() {
            return (Value::Nil, Vec::new());
        }
        let mut planned = proposed.clone();
        let replace: Vec<AttributePath> = if prior.is_nil() {
            Vec::new()
        } else {
            ["name", "ipv4_cidr", "ipv6_cidr", "network_class"]
                .into_iter()
                .filter(|a| get(prior, a) != get(proposed, a))
                .map(|a| path(&[a]))
                .collect()
        };
        if prior.is_nil() || !replace.is_empty() {
            set(&mut planned, "id", unknown());
            set(&mut planned, "state", unknown());
        }
        (planned, replace)
    }

    async fn apply(&self, ctx: &Ctx, prior: &Value, planned: &Value, diags: &mut Vec<Diagnostic>) -> Value {
        match (prior.is_nil(), planned.is_nil()) {
            (_, true) => self.destroy(ctx, prior, diags).await,
            (true, false) => self.create(ctx, planned, diags).await,
            // Nothing changes in place but the `timeouts` block.
            (false, false) => crate::timeouts::only_block_changed(prior, planned),
        }
    }

    async fn read(&self, ctx: &Ctx, id: &str, state: &Value) -> (Value, Vec<Diagnostic>) {
        let mut diags = Vec::new();
        let Some(client) = ctx.client_or_diag(&mut diags) else { return (state.clone(), diags) };
        match client.get_network(id).await {
            Ok(n) => (network_state(&n, Some(state)), vec![]),
            Err(e) if e.is_not_found() => (Value::Nil, vec![]),
            Err(e) => (state.clone(), vec![error("cannot read the virtual network", e.to_string(), None)]),
        }
    }

    async fn import(&self, ctx: &Ctx, id: &str) -> Result<Value, Diagnostic> {
        let mut diags = Vec::new();
        let Some(client) = ctx.client_or_diag(&mut diags) else { return Err(diags.remove(0)) };
        // By id or by name, as every other kind imports.
        client
            .find_object::<VirtualNetwork>("/virtual_networks", id)
            .await
            .map(|n| network_state(&n, None))
            .map_err(|e| error(format!("cannot import virtual network {id:?}"), format!("{e} (import takes a network id or name)"), None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(name: &str, v4: &str) -> Value {
        object(vec![
            ("id", Value::from("0b3c5e0e-0000-4000-8000-000000000000")),
            ("name", Value::from(name)),
            ("ipv4_cidr", Value::from(v4)),
            ("ipv6_cidr", Value::Nil),
            ("network_class", Value::Nil),
            ("state", Value::from("READY")),
        ])
    }

    #[tokio::test]
    async fn any_change_replaces_and_bad_cidrs_are_named() {
        let (r, ctx) = (NetworkResource, Ctx::default());
        let prior = net("lab", "10.10.0.0/16");
        let (planned, replace) = r.plan(&ctx, &prior, &prior, &mut vec![]).await;
        assert!(replace.is_empty());
        assert_eq!(planned, prior);
        let (planned, replace) = r.plan(&ctx, &prior, &net("lab", "10.20.0.0/16"), &mut vec![]).await;
        assert_eq!(replace, vec![path(&["ipv4_cidr"])]);
        assert!(value::is_unknown(get(&planned, "id")));
        let diags = r.validate(&net("lab", "10.10.0.1/16"));
        assert_eq!(diags.len(), 1);
        assert_eq!(diags[0].attribute, Some(path(&["ipv4_cidr"])));
        assert!(diags[0].detail.contains("host bits set"));
    }
}
