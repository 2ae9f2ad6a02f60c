//! The network kinds as resources and data sources, from one description
//! each ([`Kind`]): which attributes there are, where each sits in the
//! API's JSON, and whether changing it replaces the object, patches it, or
//! is the server's to say. Create waits until the object reaches a ready
//! state, destroy until it is gone; import reads it by id.
//!
//! What the user wrote is kept in the state for the inputs (a reference by
//! name stays a name although the server stores the id); outputs come from
//! the server.

use std::time::{Duration, Instant};

use rmpv::Value;
use serde_json::Value as Json;
use vmaas_client::Client;

use crate::diag::{api_error, error};
pub use crate::field::{Change, Field, Ty};
use crate::field::{json_to_value, put, scalar_to_json};
use crate::proto::schema::{Block, NestedBlock, nested_block::NestingMode};
use crate::proto::{AttributePath, Diagnostic, Schema};
use crate::resource::{Ctx, DataSource, Resource};
use crate::schema::{Mode, STRING, attr, block};
use crate::timeouts::{Defaults, Timeouts};
use crate::value::{get, is_unknown, object, set, unknown};

/// One kind, described.
#[derive(Debug)]
pub struct Kind {
    /// The kind: its descriptor names the resource type and the collection.
    pub kind: vmaas_model::ObjectKind,
    /// The resource's description.
    pub doc: &'static str,
    /// Its attributes besides `id` and `name`.
    pub fields: &'static [Field],
    /// The states in which create is done; none: done once stored.
    pub ready: &'static [&'static str],
    /// How long create, update and destroy wait unless `timeouts` says.
    pub timeouts: Defaults,
    /// What the `timeouts` block's text calls one, e.g. `the image`.
    pub noun: &'static str,
    /// Its API object is flat, as OSAC's catalog items: its fields sit
    /// beside `metadata`, with no `spec`.
    pub flat: bool,
}

impl Kind {
    /// The resource type, e.g. `vmaas_subnet`.
    pub const fn type_name(&self) -> &'static str {
        self.kind.descriptor().terraform
    }

    /// The collection, e.g. `/subnets`.
    pub fn path(&self) -> String {
        format!("/{}", self.kind.descriptor().plural)
    }
}

impl Kind {
    /// A request's object before its fields: `{"spec": {}}`, or `{}` when flat.
    fn empty_body(&self) -> Json {
        if self.flat { serde_json::json!({}) } else { serde_json::json!({ "spec": {} }) }
    }

    fn inputs(&self) -> impl Iterator<Item = &Field> {
        self.fields.iter().filter(|f| f.change != Change::Output)
    }

    /// The create request's object from the planned values.
    fn create_body(&self, planned: &Value) -> Json {
        let mut body = self.empty_body();
        put(&mut body, "/metadata/name", Json::from(get(planned, "name").as_str().unwrap_or_default()));
        for f in self.inputs() {
            if let Some(v) = scalar_to_json(get(planned, f.name), f.ty) {
                put(&mut body, f.json, v);
            }
        }
        body
    }

    /// The state from the API's object; inputs from `inputs` when given
    /// (what the user wrote), else from the object (import).
    fn state(&self, api: &Json, inputs: Option<&Value>) -> Value {
        let mut pairs =
            vec![("id", json_to_value(api.get("id"), Ty::Str)), ("name", json_to_value(api.pointer("/metadata/name"), Ty::Str))];
        for f in self.fields {
            let v = match (f.change, inputs) {
                (Change::Output, _) | (_, None) => json_to_value(api.pointer(f.json), f.ty),
                (c, Some(i)) if c.defaulted() && (get(i, f.name).is_nil() || is_unknown(get(i, f.name))) => {
                    json_to_value(api.pointer(f.json), f.ty)
                }
                (_, Some(i)) => get(i, f.name).clone(),
            };
            pairs.push((f.name, v));
        }
        object(pairs)
    }

    fn schema(&self, data: bool) -> Schema {
        let mut attrs = vec![
            attr("id", STRING, Mode::Computed, "The id (a UUID)."),
            attr("name", STRING, Mode::Required, "Name, unique in the tenant (a DNS label). Changing it replaces the object."),
        ];
        let mut blocks = Vec::new();
        for f in self.fields.iter().filter(|f| !(data && f.ty.input_only())) {
            let mode = match (data, f.change) {
                (true, _) | (_, Change::Output) => Mode::Computed,
                (_, Change::Replace) => Mode::Required,
                (_, c) if c.defaulted() => Mode::OptionalComputed,
                _ => Mode::Optional,
            };
            match f.ty {
                Ty::Blocks(inner) if !data && f.change != Change::Output => blocks.push(nested(f, inner)),
                Ty::Blocks(inner) => {
                    let fields: Vec<(&str, &str)> = inner.iter().map(|(n, t, _)| (*n, t.cty())).collect();
                    attrs.push(attr(f.name, &crate::schema::list_of_objects(&fields), Mode::Computed, f.doc));
                }
                ty => {
                    let mut a = attr(f.name, ty.cty(), mode, f.doc);
                    (a.sensitive, a.write_only) = (ty.input_only(), matches!(ty, Ty::WriteOnly));
                    attrs.push(a);
                }
            }
        }
        if !data {
            blocks.push(crate::timeouts::block(self.noun, &self.timeouts));
        }
        block(self.doc, attrs, blocks)
    }

    /// A data source's state: [`Kind::state`] without what the user only
    /// gives.
    fn data_state(&self, api: &Json) -> Value {
        match self.state(api, None) {
            Value::Map(pairs) => Value::Map(
                pairs.into_iter().filter(|(k, _)| !self.fields.iter().any(|f| f.ty.input_only() && k.as_str() == Some(f.name))).collect(),
            ),
            other => other,
        }
    }

    /// The resource's state: [`Kind::state`] with the `timeouts` block
    /// the user wrote (`from`; none for an import).
    fn resource_state(&self, api: &Json, inputs: Option<&Value>) -> Value {
        let mut st = self.state(api, inputs);
        set(&mut st, "timeouts", crate::timeouts::written(inputs));
        st
    }
}

fn nested(f: &Field, inner: &[(&'static str, Ty, &'static str)]) -> NestedBlock {
    NestedBlock {
        type_name: f.name.into(),
        block: Some(Block {
            attributes: inner
                .iter()
                .map(|(n, t, d)| attr(n, t.cty(), if *n == "protocol" { Mode::Required } else { Mode::Optional }, d))
                .collect(),
            description: f.doc.into(),
            ..Default::default()
        }),
        nesting: NestingMode::List as i32,
        min_items: 0,
        max_items: 0,
    }
}

/// A resource over a [`Kind`].
pub struct ObjectResource(pub &'static Kind);

/// A data source over a [`Kind`]: one object, by name.
pub struct ObjectData(pub &'static Kind);

async fn wait(client: &Client, k: &Kind, id: &str, gone: bool, limit: Duration) -> Result<Option<Json>, String> {
    let deadline = Instant::now() + limit;
    loop {
        match client.find_object::<Json>(&k.path(), id).await {
            Err(e) if gone && e.is_not_found() => return Ok(None),
            Err(e) => return Err(e.to_string()),
            Ok(o) if !gone => {
                let state = o.pointer("/status/state").and_then(Json::as_str).unwrap_or_default();
                if k.ready.is_empty() || k.ready.contains(&state) {
                    return Ok(Some(o));
                }
                if state.ends_with("_FAILED") {
                    let message = o.pointer("/status/message").and_then(Json::as_str).unwrap_or_default();
                    return Err(format!("it is {state}: {message}"));
                }
            }
            Ok(_) => {}
        }
        if Instant::now() > deadline {
            return Err(format!("not done after {} (its `timeouts` block sets how long to wait)", crate::timeouts::human(limit)));
        }
        client.pause(Duration::from_millis(250)).await.map_err(|e| e.to_string())?;
    }
}

impl ObjectResource {
    async fn create(&self, client: &Client, planned: &Value, diags: &mut Vec<Diagnostic>) -> Value {
        let k = self.0;
        let Some(limit) = Timeouts::decode(planned, &k.timeouts).limit("create", diags) else { return Value::Nil };
        let created: Json = match client.create_object(&k.path(), &k.create_body(planned)).await {
            Ok(o) => o,
            Err(e) => {
                diags.push(api_error(format!("cannot create the {}", k.type_name()), &e));
                return Value::Nil;
            }
        };
        let id = created.get("id").and_then(Json::as_str).unwrap_or_default().to_owned();
        match wait(client, k, &id, false, limit).await {
            Ok(o) => k.resource_state(o.as_ref().unwrap_or(&created), Some(planned)),
            Err(e) => {
                diags.push(error(format!("{} {id} did not become ready", k.type_name()), e, None));
                k.resource_state(&created, Some(planned))
            }
        }
    }

    async fn update(&self, client: &Client, prior: &Value, planned: &Value, diags: &mut Vec<Diagnostic>) -> Value {
        let k = self.0;
        let id = get(prior, "id").as_str().unwrap_or_default().to_owned();
        let Some(limit) = Timeouts::decode(planned, &k.timeouts).limit("update", diags) else { return prior.clone() };
        if !k.fields.iter().any(|f| f.change.patches() && get(prior, f.name) != get(planned, f.name)) {
            // Only the `timeouts` block changed: nothing to ask of the server.
            return crate::timeouts::only_block_changed(prior, planned);
        }
        let mut body = k.empty_body();
        for f in k.fields.iter().filter(|f| f.change.patches() && get(prior, f.name) != get(planned, f.name)) {
            // A string removed from the configuration is left to the server (an
            // instance type made ACTIVE again drops its replacement); a list, emptied.
            match (scalar_to_json(get(planned, f.name), f.ty), f.ty) {
                (Some(v), _) => put(&mut body, f.json, v),
                (None, Ty::Str | Ty::Int | Ty::Bool | Ty::Json) => {}
                (None, _) => put(&mut body, f.json, Json::Array(Vec::new())),
            }
        }
        match client.patch_object::<_, Json>(&k.path(), &id, &body).await {
            Ok(o) => {
                let o = wait(client, k, &id, false, limit).await.ok().flatten().unwrap_or(o);
                k.resource_state(&o, Some(planned))
            }
            Err(e) => {
                diags.push(api_error(format!("cannot change the {}", k.type_name()), &e));
                prior.clone()
            }
        }
    }

    async fn destroy(&self, client: &Client, prior: &Value, diags: &mut Vec<Diagnostic>) -> Value {
        let k = self.0;
        let Some(id) = get(prior, "id").as_str().map(str::to_owned) else { return Value::Nil };
        let Some(limit) = Timeouts::decode(prior, &k.timeouts).limit("delete", diags) else { return prior.clone() };
        match client.delete_object::<Json>(&k.path(), &id).await {
            Err(e) if e.is_not_found() => Value::Nil,
            Err(e) => {
                diags.push(api_error(format!("cannot delete the {}", k.type_name()), &e));
                prior.clone()
            }
            Ok(_) => match wait(client, k, &id, true, limit).await {
                Ok(_) => Value::Nil,
                Err(e) => {
                    diags.push(error(format!("{} {id} was not deleted", k.type_name()), e, None));
                    prior.clone()
                }
            },
        }
    }
}

#[tonic::async_trait]
impl Resource for ObjectResource {
    fn type_name(&self) -> &'static str {
        self.0.type_name()
    }

    fn schema(&self) -> Schema {
        self.0.schema(false)
    }

    fn validate(&self, config: &Value) -> Vec<Diagnostic> {
        let mut diags = Timeouts::check(config);
        if let Some(Err(reason)) = get(config, "name").as_str().map(self.0.kind.descriptor().name_rule) {
            diags.push(error("invalid name", reason, Some(crate::diag::path(&["name"]))));
        }
        // Two ways of giving one value (`registry_password` and its `_wo`): one at most.
        let given: Vec<&Field> = self.0.fields.iter().filter(|f| !get(config, f.name).is_nil()).collect();
        for (i, f) in given.iter().enumerate() {
            if let Some(g) = given[..i].iter().find(|g| g.json == f.json) {
                let why = format!("{} and {} give the same value: set one of them", g.name, f.name);
                diags.push(error("conflicting attributes", why, Some(crate::diag::path(&[f.name]))));
            }
        }
        diags
    }

    async fn plan(&self, _ctx: &Ctx, prior: &Value, proposed: &Value, _diags: &mut Vec<Diagnostic>) -> (Value, Vec<AttributePath>) {
        if proposed.is_nil() {
            return (Value::Nil, Vec::new());
        }
        let k = self.0;
        let mut planned = proposed.clone();
        let differs = |n: &str| !prior.is_nil() && get(prior, n) != get(proposed, n);
        let replace: Vec<AttributePath> = std::iter::once("name")
            .chain(
                k.fields
                    .iter()
                    // A write-only value is never in the prior state: it cannot differ from it.
                    .filter(|f| !matches!(f.ty, Ty::WriteOnly))
                    .filter(|f| matches!(f.change, Change::Replace | Change::ReplaceOptional | Change::ReplaceDefaulted))
                    .map(|f| f.name),
            )
            .filter(|n| differs(n))
            .map(|n| crate::diag::path(&[n]))
            .collect();
        let patched = k.fields.iter().any(|f| f.change.patches() && differs(f.name));
        if prior.is_nil() || !replace.is_empty() {
            set(&mut planned, "id", unknown());
        }
        if prior.is_nil() || !replace.is_empty() || patched {
            for f in k.fields.iter().filter(|f| f.change == Change::Output) {
                set(&mut planned, f.name, unknown());
            }
        }
        // A defaulted input left out is the server's to choose.
        for f in k.fields.iter().filter(|f| f.change.defaulted()) {
            if get(&planned, f.name).is_nil() {
                set(&mut planned, f.name, unknown());
            }
        }
        (planned, replace)
    }

    async fn apply(&self, ctx: &Ctx, prior: &Value, planned: &Value, diags: &mut Vec<Diagnostic>) -> Value {
        let Some(client) = ctx.client_or_diag(diags) else { return prior.clone() };
        match (prior.is_nil(), planned.is_nil()) {
            (_, true) => self.destroy(client, prior, diags).await,
            (true, false) => self.create(client, planned, diags).await,
            (false, false) => self.update(client, prior, planned, diags).await,
        }
    }

    async fn read(&self, ctx: &Ctx, id: &str, state: &Value) -> (Value, Vec<Diagnostic>) {
        let mut diags = Vec::new();
        let Some(client) = ctx.client_or_diag(&mut diags) else { return (state.clone(), diags) };
        match client.find_object::<Json>(&self.0.path(), id).await {
            Ok(o) => (self.0.resource_state(&o, Some(state)), vec![]),
            Err(e) if e.is_not_found() => (Value::Nil, vec![]),
            Err(e) => (state.clone(), vec![error(format!("cannot read the {}", self.0.type_name()), e.to_string(), None)]),
        }
    }

    async fn import(&self, ctx: &Ctx, id: &str) -> Result<Value, Diagnostic> {
        let mut diags = Vec::new();
        let Some(client) = ctx.client_or_diag(&mut diags) else { return Err(diags.remove(0)) };
        let o = client.find_object::<Json>(&self.0.path(), id).await;
        o.map(|o| self.0.resource_state(&o, None))
            .map_err(|e| error(format!("cannot import {} {id:?}", self.0.type_name()), e.to_string(), None))
    }
}

#[tonic::async_trait]
impl DataSource for ObjectData {
    fn type_name(&self) -> &'static str {
        self.0.type_name()
    }

    fn schema(&self) -> Schema {
        self.0.schema(true)
    }

    async fn read(&self, ctx: &Ctx, config: &Value, diags: &mut Vec<Diagnostic>) -> Value {
        let Some(client) = ctx.client_or_diag(diags) else { return Value::Nil };
        let name = get(config, "name").as_str().unwrap_or_default();
        match client.find_object::<Json>(&self.0.path(), name).await {
            Ok(o) => self.0.data_state(&o),
            Err(e) => {
                diags.push(api_error(format!("cannot read {} {name:?}", self.0.type_name()), &e));
                Value::Nil
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::{LOAD_BALANCER, SECURITY_GROUP};

    fn lb(targets: &[&str], subnet: &str) -> Value {
        object(vec![
            ("id", Value::from("00000000-0000-4000-8000-000000000001")),
            ("name", Value::from("web")),
            ("subnet", Value::from(subnet)),
            ("targets", Value::Array(targets.iter().map(|t| Value::from(*t)).collect())),
            (
                "port_mapping",
                Value::Array(vec![object(vec![
                    ("protocol", Value::from("PROTOCOL_TCP")),
                    ("external_port", Value::from(80)),
                    ("internal_port", Value::from(8080)),
                ])]),
            ),
            ("address", Value::from("127.43.0.2")),
            ("healthy_targets", Value::Array(vec![])),
            ("state", Value::from("LOAD_BALANCER_STATE_READY")),
        ])
    }

    #[tokio::test]
    async fn targets_patch_in_place_and_the_subnet_replaces() {
        let (r, ctx) = (ObjectResource(&LOAD_BALANCER), Ctx::default());
        let prior = lb(&["a"], "front");
        let (planned, replace) = r.plan(&ctx, &prior, &prior, &mut vec![]).await;
        assert!(replace.is_empty() && planned == prior, "no change, no plan");
        let (planned, replace) = r.plan(&ctx, &prior, &lb(&["a", "b"], "front"), &mut vec![]).await;
        assert!(replace.is_empty(), "targets change in place");
        assert!(is_unknown(get(&planned, "healthy_targets")) && !is_unknown(get(&planned, "id")));
        let (planned, replace) = r.plan(&ctx, &prior, &lb(&["a"], "back"), &mut vec![]).await;
        assert_eq!(replace, vec![crate::diag::path(&["subnet"])]);
        assert!(is_unknown(get(&planned, "id")));
    }

    #[test]
    fn the_request_follows_the_api_and_the_state_keeps_what_was_written() {
        let body = LOAD_BALANCER.create_body(&lb(&["web-0"], "front"));
        assert_eq!(
            body,
            serde_json::json!({"metadata": {"name": "web"}, "spec": {"subnet": "front", "targets": ["web-0"],
                "port_mappings": [{"protocol": "PROTOCOL_TCP", "external_port": 80, "internal_port": 8080}]}})
        );
        let api = serde_json::json!({"id": "x", "metadata": {"name": "web"}, "spec": {"subnet": "9f0c", "targets": ["id-0"],
            "port_mappings": [{"protocol": "PROTOCOL_TCP", "external_port": 80, "internal_port": 8080}]},
            "status": {"address": "127.43.0.9", "healthy_targets": ["id-0"], "state": "LOAD_BALANCER_STATE_READY"}});
        let written = lb(&["web-0"], "front");
        let state = LOAD_BALANCER.state(&api, Some(&written));
        assert_eq!(get(&state, "subnet").as_str(), Some("front"), "a name written stays a name");
        assert_eq!(get(&state, "address").as_str(), Some("127.43.0.9"));
        let imported = LOAD_BALANCER.state(&api, None);
        assert_eq!(get(&imported, "subnet").as_str(), Some("9f0c"));
        let rules = SECURITY_GROUP.state(&serde_json::json!({"spec": {"ingress": [{"protocol": "PROTOCOL_ICMP"}]}}), None);
        let first = &get(&rules, "ingress").as_array().unwrap()[0];
        assert!(
            get(first, "port_from").is_nil() && get(first, "protocol").as_str() == Some("PROTOCOL_ICMP"),
            "absent block fields are null"
        );
        assert_eq!(get(&rules, "egress"), &Value::Array(vec![]));
    }
}
