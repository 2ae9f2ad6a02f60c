//! The provider: schemas, planning and the calls to the vmaas API.

use std::collections::BTreeMap;
use std::sync::RwLock;
use std::time::Duration;

use rmpv::Value;
use tonic::{Request, Response, Status};
use vmaas_client::{Client, WaitFor, describe_status};
use vmaas_model::vm::{MetadataInput, SpecPatch};
use vmaas_model::{
    CreateVirtualMachine, ParameterValue, PatchVirtualMachine, PowerState, Template, VirtualMachine, VirtualMachineSpec,
    VirtualMachineTemplate,
};

use crate::proto::attribute_path::{Step, step::Selector};
use crate::proto::provider_server::Provider;
use crate::proto::*;
use crate::schema;
use crate::template_resource;
use crate::value::{self, get, is_unknown, object, set, string, unknown};

/// Resource type of a VM.
pub const VM: &str = "vmaas_virtual_machine";
/// Data source of one template.
pub const TEMPLATE: &str = "vmaas_template";
/// Data source of every template.
pub const TEMPLATES: &str = "vmaas_templates";

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// The vmaas provider.
#[derive(Default)]
pub struct VmaasProvider {
    client: RwLock<Option<Client>>,
}

fn error(summary: impl Into<String>, detail: impl Into<String>, attr: Option<AttributePath>) -> Diagnostic {
    Diagnostic { severity: diagnostic::Severity::Error as i32, summary: summary.into(), detail: detail.into(), attribute: attr }
}

fn path(steps: &[&str]) -> AttributePath {
    AttributePath { steps: steps.iter().map(|s| Step { selector: Some(Selector::AttributeName((*s).to_owned())) }).collect() }
}

fn map_key_path(attr: &str, key: &str) -> AttributePath {
    AttributePath {
        steps: vec![
            Step { selector: Some(Selector::AttributeName(attr.to_owned())) },
            Step { selector: Some(Selector::ElementKeyString(key.to_owned())) },
        ],
    }
}

fn bad(e: impl std::fmt::Display) -> Status {
    Status::invalid_argument(e.to_string())
}

/// A parameter value as the string Terraform keeps: quantities and strings
/// as written, integers in decimal, lists comma-separated.
fn param_to_string(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(items) => items.iter().map(param_to_string).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

/// The timeout `which` (create, update, delete) from a `timeouts` block.
fn timeout(state: &Value, which: &str) -> Result<Duration, String> {
    match string(get(get(state, "timeouts"), which)) {
        None => Ok(DEFAULT_TIMEOUT),
        Some(t) => humantime::parse_duration(&t).map_err(|e| format!("{t:?} is not a duration (e.g. \"10m\", \"90s\"): {e}")),
    }
}

/// The Terraform state of a VM, keeping the shape of what the user wrote
/// (a null parameter map stays null) and their `timeouts`.
fn vm_state(vm: &VirtualMachine, like: &Value) -> Value {
    let params: Vec<(Value, Value)> =
        vm.spec.template_parameters.iter().map(|(k, p)| (Value::from(k.as_str()), Value::from(param_to_string(&p.value)))).collect();
    let params = if params.is_empty() && get(like, "template_parameters").is_nil() { Value::Nil } else { Value::Map(params) };
    let conditions = Value::Array(
        vm.status
            .conditions
            .iter()
            .map(|c| {
                object(vec![
                    ("type", Value::from(c.kind.short())),
                    ("status", Value::from(c.status.short())),
                    ("reason", value::opt_string(c.reason.as_deref())),
                    ("message", Value::from(c.message.as_str())),
                ])
            })
            .collect(),
    );
    object(vec![
        ("id", Value::from(vm.id.as_str())),
        ("name", Value::from(vm.metadata.name.as_str())),
        ("template", Value::from(vm.spec.template.as_str())),
        ("template_parameters", params),
        ("state", Value::from(vm.spec.state.as_str())),
        ("status", Value::from(vm.status.state.short())),
        ("internal_ip", value::opt_string(vm.status.internal_ip.as_deref())),
        ("external_ip", value::opt_string(vm.status.external_ip.as_deref())),
        ("conditions", conditions),
        ("timeouts", get(like, "timeouts").clone()),
    ])
}

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

impl VmaasProvider {
    async fn plan_template(&self, prior: &Value, proposed: &Value, diags: &mut Vec<Diagnostic>) -> (Value, Vec<AttributePath>) {
        if proposed.is_nil() {
            return (Value::Nil, Vec::new());
        }
        let mut replace = Vec::new();
        if !prior.is_nil() && get(prior, "id") != get(proposed, "id") {
            replace.push(path(&["id"]));
        }
        match template_resource::from_tf(proposed) {
            Ok(t) => {
                if let Err(errs) = Template::compile(t) {
                    for e in errs.iter() {
                        diags.push(error(format!("invalid template: {}", e.field), e.reason.clone(), None));
                    }
                }
            }
            Err(e) => diags.push(error("invalid template", e, None)),
        }
        (proposed.clone(), replace)
    }

    async fn apply_template(&self, prior: &Value, planned: &Value, diags: &mut Vec<Diagnostic>) -> Value {
        let Some(client) = self.configured_client(diags) else { return prior.clone() };
        if planned.is_nil() {
            let id = string(get(prior, "id")).unwrap_or_default();
            return match client.delete_template(&id).await {
                Ok(()) => Value::Nil,
                Err(e) if e.is_not_found() => Value::Nil,
                Err(e) => {
                    diags.push(error(format!("cannot delete template {id:?}"), e.to_string(), None));
                    prior.clone()
                }
            };
        }
        let t = match template_resource::from_tf(planned) {
            Ok(t) => t,
            Err(e) => {
                diags.push(error("invalid template", e, None));
                return prior.clone();
            }
        };
        let r = if prior.is_nil() { client.create_template(&t).await } else { client.update_template(&t).await };
        match r {
            Ok(saved) => template_resource::to_tf(&saved, planned),
            Err(e) => {
                let mut d = error(format!("cannot save template {:?}", t.id), e.to_string(), None);
                if let vmaas_client::Error::Api { details, .. } = &e {
                    for fe in details {
                        d.detail.push_str(&format!("\n{}: {}", fe.field, fe.reason));
                    }
                }
                diags.push(d);
                prior.clone()
            }
        }
    }

    /// The client, or a diagnostic saying the provider is not configured.
    fn configured_client(&self, diags: &mut Vec<Diagnostic>) -> Option<Client> {
        match self.client() {
            Ok(c) => Some(c),
            Err(e) => {
                diags.push(error("the vmaas provider is not configured", e.message(), None));
                None
            }
        }
    }

    fn client(&self) -> Result<Client, Status> {
        self.client
            .read()
            .map_err(|_| Status::internal("provider lock poisoned"))?
            .clone()
            .ok_or_else(|| Status::failed_precondition("the vmaas provider is not configured"))
    }

    /// Types the text parameters in `params` with `template`'s declared
    /// types; every problem becomes a diagnostic on its map key.
    async fn typed_params(
        &self,
        client: &Client,
        template: &str,
        params: &Value,
        diags: &mut Vec<Diagnostic>,
    ) -> Option<BTreeMap<String, ParameterValue>> {
        let wire = match client.get_template(template).await {
            Ok(t) => t,
            Err(e) if e.is_not_found() => {
                diags.push(error(
                    format!("template {template:?} does not exist"),
                    "list the templates with the vmaas_templates data source or `vmaas template list`",
                    Some(path(&["template"])),
                ));
                return None;
            }
            Err(e) => {
                diags.push(error("cannot read the template", e.to_string(), Some(path(&["template"]))));
                return None;
            }
        };
        let compiled = match Template::compile(wire.published()) {
            Ok(c) => c,
            Err(e) => {
                diags.push(error(format!("template {template:?} is invalid"), e.to_string(), Some(path(&["template"]))));
                return None;
            }
        };
        let mut out = BTreeMap::new();
        let mut complete = true;
        for (k, v) in value::string_map(params) {
            if is_unknown(&v) {
                complete = false;
                continue;
            }
            let Some(text) = string(&v) else { continue };
            match compiled.value_from_text(&k, &text) {
                Ok(j) => {
                    out.insert(k, ParameterValue::new(j));
                }
                Err(reason) => {
                    diags.push(error(format!("invalid template parameter {k:?}"), reason, Some(map_key_path("template_parameters", &k))))
                }
            }
        }
        if !diags.is_empty() {
            return None;
        }
        if complete {
            if let Err(errs) = compiled.resolve(&out, "template_parameters") {
                for e in errs.iter() {
                    let key = e.field.trim_start_matches("template_parameters.").trim_end_matches(".value").to_owned();
                    diags.push(error(
                        format!("invalid template parameter {key:?}"),
                        e.reason.clone(),
                        Some(map_key_path("template_parameters", &key)),
                    ));
                }
                return None;
            }
        }
        Some(out)
    }

    async fn plan_vm(&self, prior: &Value, proposed: &Value, diags: &mut Vec<Diagnostic>) -> (Value, Vec<AttributePath>) {
        if proposed.is_nil() {
            return (Value::Nil, Vec::new());
        }
        let mut planned = proposed.clone();
        if get(&planned, "state").is_nil() {
            set(&mut planned, "state", Value::from("started"));
        }
        let mut replace = Vec::new();
        let creating = prior.is_nil();
        if !creating {
            for attr in ["name", "template", "template_parameters"] {
                let (a, b) = (get(prior, attr), get(proposed, attr));
                let empty = |v: &Value| v.is_nil() || matches!(v, Value::Map(m) if m.is_empty());
                if a != b && !(empty(a) && empty(b)) {
                    replace.push(path(&[attr]));
                }
            }
        }
        let state_changed = !creating && get(prior, "state") != get(&planned, "state");
        if creating || !replace.is_empty() {
            for attr in ["id", "status", "internal_ip", "external_ip", "conditions"] {
                set(&mut planned, attr, unknown());
            }
        } else if state_changed {
            for attr in ["status", "internal_ip", "external_ip", "conditions"] {
                set(&mut planned, attr, unknown());
            }
        }
        if creating || !replace.is_empty() {
            if let (Ok(client), Some(template)) = (self.client(), string(get(proposed, "template"))) {
                self.typed_params(&client, &template, get(proposed, "template_parameters"), diags).await;
            }
        }
        (planned, replace)
    }

    async fn apply_vm(&self, prior: &Value, planned: &Value, diags: &mut Vec<Diagnostic>) -> Value {
        let Some(client) = self.configured_client(diags) else { return prior.clone() };
        if planned.is_nil() {
            let Some(id) = string(get(prior, "id")) else { return Value::Nil };
            let wait = match timeout(prior, "delete") {
                Ok(t) => t,
                Err(e) => {
                    diags.push(error("invalid timeouts.delete", e, Some(path(&["timeouts", "delete"]))));
                    return prior.clone();
                }
            };
            return match client.delete_vm(&id).await {
                Err(e) if e.is_not_found() => Value::Nil,
                Err(e) => {
                    diags.push(error("cannot delete the virtual machine", e.to_string(), None));
                    prior.clone()
                }
                Ok(_) => match client.wait_vm(&id, WaitFor::Deleted, wait, Duration::from_millis(500), |_| {}).await {
                    Ok(_) => Value::Nil,
                    Err(e) => {
                        diags.push(error("the virtual machine was not deleted in time", e.to_string(), None));
                        prior.clone()
                    }
                },
            };
        }
        let power = match string(get(planned, "state")).as_deref() {
            Some("stopped") => PowerState::Stopped,
            _ => PowerState::Started,
        };
        let target = if power == PowerState::Stopped { WaitFor::Stopped } else { WaitFor::Ready };
        let (vm, which) = if prior.is_nil() {
            let name = string(get(planned, "name")).unwrap_or_default();
            let template = string(get(planned, "template")).unwrap_or_default();
            let Some(params) = self.typed_params(&client, &template, get(planned, "template_parameters"), diags).await else {
                return Value::Nil;
            };
            let req = CreateVirtualMachine {
                type_url: None,
                id: None,
                metadata: Some(MetadataInput { name: Some(name), version: None }),
                spec: VirtualMachineSpec { template, template_parameters: params, state: power },
                status: None,
            };
            match client.create_vm(&req).await {
                Ok(vm) => (vm, "create"),
                Err(e) => {
                    let mut d = error("cannot create the virtual machine", e.to_string(), None);
                    if let vmaas_client::Error::Api { details, .. } = &e {
                        for fe in details {
                            d.detail.push_str(&format!("\n{}: {}", fe.field, fe.reason));
                        }
                    }
                    diags.push(d);
                    return Value::Nil;
                }
            }
        } else {
            let id = string(get(prior, "id")).unwrap_or_default();
            let patch = PatchVirtualMachine { spec: SpecPatch { state: Some(power), ..Default::default() }, ..Default::default() };
            match client.patch_vm(&id, &patch).await {
                Ok(vm) => (vm, "update"),
                Err(e) => {
                    diags.push(error("cannot update the virtual machine", e.to_string(), None));
                    return prior.clone();
                }
            }
        };
        let wait = match timeout(planned, which) {
            Ok(t) => t,
            Err(e) => {
                diags.push(error(format!("invalid timeouts.{which}"), e, Some(path(&["timeouts", which]))));
                return vm_state(&vm, planned);
            }
        };
        match client.wait_vm(&vm.id, target, wait, Duration::from_millis(500), |_| {}).await {
            Ok(Some(done)) => vm_state(&done, planned),
            Ok(None) => vm_state(&vm, planned),
            Err(e) => {
                // The VM exists: keep it in the state (Terraform taints it), never leave it behind silently.
                let last = client.get_vm(&vm.id).await.ok();
                let detail = match &last {
                    Some(v) => format!("{e}\nLast status: {}", describe_status(v)),
                    None => e.to_string(),
                };
                diags.push(error(
                    format!(
                        "virtual machine {:?} did not become {}",
                        vm.metadata.name,
                        if target == WaitFor::Ready { "READY" } else { "STOPPED" }
                    ),
                    detail,
                    None,
                ));
                vm_state(last.as_ref().unwrap_or(&vm), planned)
            }
        }
    }
}

#[tonic::async_trait]
impl Provider for VmaasProvider {
    async fn get_metadata(&self, _r: Request<get_metadata::Request>) -> Result<Response<get_metadata::Response>, Status> {
        Ok(Response::new(get_metadata::Response {
            server_capabilities: Some(ServerCapabilities { plan_destroy: false, get_provider_schema_optional: false }),
            diagnostics: vec![],
            data_sources: [TEMPLATE, TEMPLATES].iter().map(|t| get_metadata::DataSourceMetadata { type_name: (*t).into() }).collect(),
            resources: [VM, TEMPLATE].iter().map(|t| get_metadata::ResourceMetadata { type_name: (*t).into() }).collect(),
        }))
    }

    async fn get_provider_schema(
        &self,
        _r: Request<get_provider_schema::Request>,
    ) -> Result<Response<get_provider_schema::Response>, Status> {
        Ok(Response::new(schema::provider_schema()))
    }

    async fn validate_provider_config(
        &self,
        r: Request<validate_provider_config::Request>,
    ) -> Result<Response<validate_provider_config::Response>, Status> {
        let config = value::decode(r.get_ref().config.as_ref()).map_err(bad)?;
        let mut diagnostics = Vec::new();
        if let Some(e) = string(get(&config, "endpoint")) {
            if !(e.starts_with("http://") || e.starts_with("https://")) {
                diagnostics.push(error(
                    "invalid endpoint",
                    format!("{e:?} must start with http:// or https://"),
                    Some(path(&["endpoint"])),
                ));
            }
        }
        Ok(Response::new(validate_provider_config::Response { diagnostics }))
    }

    async fn validate_resource_config(
        &self,
        r: Request<validate_resource_config::Request>,
    ) -> Result<Response<validate_resource_config::Response>, Status> {
        let config = value::decode(r.get_ref().config.as_ref()).map_err(bad)?;
        let mut diagnostics = Vec::new();
        if r.get_ref().type_name == TEMPLATE {
            return Ok(Response::new(validate_resource_config::Response { diagnostics }));
        }
        if let Some(s) = string(get(&config, "state")) {
            if s != "started" && s != "stopped" {
                diagnostics.push(error("invalid state", format!("expected \"started\" or \"stopped\", got {s:?}"), Some(path(&["state"]))));
            }
        }
        if let Some(n) = string(get(&config, "name")) {
            if let Err(reason) = vmaas_model::validation::check_dns_label(&n) {
                diagnostics.push(error("invalid name", reason, Some(path(&["name"]))));
            }
        }
        for which in ["create", "update", "delete"] {
            if let Err(e) = timeout(&config, which) {
                diagnostics.push(error(format!("invalid timeouts.{which}"), e, Some(path(&["timeouts", which]))));
            }
        }
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
        let endpoint = string(get(&config, "endpoint"))
            .or_else(|| std::env::var("VMAAS_ENDPOINT").ok().filter(|e| !e.is_empty()))
            .unwrap_or_else(|| "http://127.0.0.1:8000".into());
        let token = string(get(&config, "token")).or_else(|| std::env::var("VMAAS_TOKEN").ok().filter(|t| !t.is_empty()));
        let insecure = get(&config, "insecure").as_bool().unwrap_or(false);
        let ca = match string(get(&config, "ca_file")) {
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
            Ok(c) => *self.client.write().map_err(|_| Status::internal("provider lock poisoned"))? = Some(c),
            Err(e) => diagnostics.push(error("invalid provider configuration", e.to_string(), Some(path(&["endpoint"])))),
        }
        Ok(Response::new(configure_provider::Response { diagnostics }))
    }

    async fn read_resource(&self, r: Request<read_resource::Request>) -> Result<Response<read_resource::Response>, Status> {
        let state = value::decode(r.get_ref().current_state.as_ref()).map_err(bad)?;
        let Some(id) = string(get(&state, "id")) else {
            return Ok(Response::new(read_resource::Response {
                new_state: Some(value::encode(&Value::Nil)),
                diagnostics: vec![],
                private: vec![],
            }));
        };
        let client = self.client()?;
        if r.get_ref().type_name == TEMPLATE {
            let (new_state, diagnostics) = match client.get_template(&id).await {
                Ok(t) => (template_resource::to_tf(&t, &state), vec![]),
                Err(e) if e.is_not_found() => (Value::Nil, vec![]),
                Err(e) => (state.clone(), vec![error("cannot read the template", e.to_string(), None)]),
            };
            return Ok(Response::new(read_resource::Response { new_state: Some(value::encode(&new_state)), diagnostics, private: vec![] }));
        }
        let (new_state, diagnostics) = match client.get_vm(&id).await {
            Ok(vm) => (vm_state(&vm, &state), vec![]),
            // Deleted outside Terraform: forget it, the next plan re-creates it.
            Err(e) if e.is_not_found() => (Value::Nil, vec![]),
            Err(e) => (state.clone(), vec![error("cannot read the virtual machine", e.to_string(), None)]),
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
        let (planned, requires_replace) = match req.type_name.as_str() {
            TEMPLATE => self.plan_template(&prior, &proposed, &mut diagnostics).await,
            _ => self.plan_vm(&prior, &proposed, &mut diagnostics).await,
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
        let mut diagnostics = Vec::new();
        let new_state = match req.type_name.as_str() {
            TEMPLATE => self.apply_template(&prior, &planned, &mut diagnostics).await,
            _ => self.apply_vm(&prior, &planned, &mut diagnostics).await,
        };
        Ok(Response::new(apply_resource_change::Response { new_state: Some(value::encode(&new_state)), private: vec![], diagnostics }))
    }

    async fn import_resource_state(
        &self,
        r: Request<import_resource_state::Request>,
    ) -> Result<Response<import_resource_state::Response>, Status> {
        let client = self.client()?;
        let id = &r.get_ref().id;
        if r.get_ref().type_name == TEMPLATE {
            let (imported, diagnostics) = match client.get_template(id).await {
                Ok(t) => {
                    let state = template_resource::to_tf(&t, &Value::Nil);
                    (
                        vec![import_resource_state::ImportedResource {
                            type_name: TEMPLATE.into(),
                            state: Some(value::encode(&state)),
                            private: vec![],
                        }],
                        vec![],
                    )
                }
                Err(e) => (vec![], vec![error(format!("cannot import template {id:?}"), e.to_string(), None)]),
            };
            return Ok(Response::new(import_resource_state::Response { imported_resources: imported, diagnostics }));
        }
        let (imported, diagnostics) = match client.find_vm(id).await {
            Ok(vm) => {
                let state = vm_state(&vm, &Value::Nil);
                (
                    vec![import_resource_state::ImportedResource {
                        type_name: VM.into(),
                        state: Some(value::encode(&state)),
                        private: vec![],
                    }],
                    vec![],
                )
            }
            Err(e) => {
                (vec![], vec![error(format!("cannot import virtual machine {id:?}"), format!("{e} (import takes a VM id or name)"), None)])
            }
        };
        Ok(Response::new(import_resource_state::Response { imported_resources: imported, diagnostics }))
    }

    async fn read_data_source(&self, r: Request<read_data_source::Request>) -> Result<Response<read_data_source::Response>, Status> {
        let req = r.get_ref();
        let config = value::decode(req.config.as_ref()).map_err(bad)?;
        let client = self.client()?;
        let mut diagnostics = Vec::new();
        let state = match req.type_name.as_str() {
            TEMPLATE => {
                let id = string(get(&config, "id")).unwrap_or_default();
                match client.get_template(&id).await {
                    Ok(t) => template_state(&t),
                    Err(e) => {
                        diagnostics.push(error(format!("cannot read template {id:?}"), e.to_string(), Some(path(&["id"]))));
                        Value::Nil
                    }
                }
            }
            TEMPLATES => match client.all_templates().await {
                Ok(ts) => object(vec![("templates", Value::Array(ts.iter().map(template_state).collect()))]),
                Err(e) => {
                    diagnostics.push(error("cannot list templates", e.to_string(), None));
                    Value::Nil
                }
            },
            other => return Err(Status::invalid_argument(format!("unknown data source {other}"))),
        };
        Ok(Response::new(read_data_source::Response { state: Some(value::encode(&state)), diagnostics }))
    }

    async fn stop_provider(&self, _r: Request<stop_provider::Request>) -> Result<Response<stop_provider::Response>, Status> {
        Ok(Response::new(stop_provider::Response { error: String::new() }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm(params: Value, state: &str) -> Value {
        object(vec![
            ("id", Value::from("0b3c5e0e-0000-4000-8000-000000000000")),
            ("name", Value::from("web")),
            ("template", Value::from("tiny")),
            ("template_parameters", params),
            ("state", Value::from(state)),
            ("status", Value::from("READY")),
            ("internal_ip", Value::from("10.0.2.15")),
            ("external_ip", Value::from("127.42.0.1")),
            ("conditions", Value::Array(vec![])),
            ("timeouts", Value::Nil),
        ])
    }

    fn params(pairs: &[(&str, &str)]) -> Value {
        Value::Map(pairs.iter().map(|(k, v)| (Value::from(*k), Value::from(*v))).collect())
    }

    fn names(paths: &[AttributePath]) -> Vec<String> {
        paths
            .iter()
            .map(|p| match &p.steps[0].selector {
                Some(Selector::AttributeName(n)) => n.clone(),
                _ => String::new(),
            })
            .collect()
    }

    #[tokio::test]
    async fn create_plans_computed_values_as_unknown() {
        let p = VmaasProvider::default();
        let mut proposed = vm(params(&[("vm_memory", "4Gi")]), "started");
        set(&mut proposed, "state", Value::Nil);
        for a in ["id", "status", "internal_ip", "external_ip", "conditions"] {
            set(&mut proposed, a, Value::Nil);
        }
        let mut diags = vec![];
        let (planned, replace) = p.plan_vm(&Value::Nil, &proposed, &mut diags).await;
        assert!(replace.is_empty() && diags.is_empty());
        assert_eq!(string(get(&planned, "state")).as_deref(), Some("started"));
        for a in ["id", "status", "internal_ip", "external_ip", "conditions"] {
            assert!(is_unknown(get(&planned, a)), "{a} is known after apply");
        }
    }

    #[tokio::test]
    async fn state_changes_in_place_and_parameters_force_replacement() {
        let p = VmaasProvider::default();
        let prior = vm(params(&[("vm_memory", "4Gi")]), "started");
        let (planned, replace) = p.plan_vm(&prior, &vm(params(&[("vm_memory", "4Gi")]), "stopped"), &mut vec![]).await;
        assert!(replace.is_empty());
        assert!(is_unknown(get(&planned, "status")));
        assert_eq!(string(get(&planned, "id")), string(get(&prior, "id")), "same VM");

        let (_, replace) = p.plan_vm(&prior, &vm(params(&[("vm_memory", "8Gi")]), "started"), &mut vec![]).await;
        assert_eq!(names(&replace), ["template_parameters"]);
        let mut renamed = vm(params(&[("vm_memory", "4Gi")]), "started");
        set(&mut renamed, "name", Value::from("other"));
        assert_eq!(names(&p.plan_vm(&prior, &renamed, &mut vec![]).await.1), ["name"]);

        // No change: nothing unknown, nothing replaced.
        let (planned, replace) = p.plan_vm(&prior, &prior, &mut vec![]).await;
        assert!(replace.is_empty());
        assert_eq!(planned, prior);
        // An empty map and no map are the same parameters.
        let (_, replace) = p.plan_vm(&vm(Value::Nil, "started"), &vm(Value::Map(vec![]), "started"), &mut vec![]).await;
        assert!(replace.is_empty());
        // Destroy.
        assert!(p.plan_vm(&prior, &Value::Nil, &mut vec![]).await.0.is_nil());
    }

    #[test]
    fn parameters_keep_the_text_written() {
        assert_eq!(param_to_string(&serde_json::json!("4096Mi")), "4096Mi");
        assert_eq!(param_to_string(&serde_json::json!(4)), "4");
        assert_eq!(param_to_string(&serde_json::json!(true)), "true");
        assert_eq!(param_to_string(&serde_json::json!(["a", "b"])), "a,b");
    }

    #[test]
    fn timeouts_parse_with_a_readable_error() {
        let s = object(vec![("timeouts", object(vec![("create", Value::from("90s")), ("delete", Value::from("soon"))]))]);
        assert_eq!(timeout(&s, "create").unwrap(), Duration::from_secs(90));
        assert_eq!(timeout(&s, "update").unwrap(), DEFAULT_TIMEOUT);
        assert!(timeout(&s, "delete").unwrap_err().contains("\"soon\" is not a duration"));
    }
}
