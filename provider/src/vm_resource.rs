//! `vmaas_virtual_machine`: a VM made from a template. Parameters are typed
//! by the template through the shared model and checked at plan; `state`
//! changes in place; create waits until the VM is READY.

use std::collections::BTreeMap;
use std::time::Duration;

use rmpv::Value;
use vmaas_client::{Client, WaitFor, describe_status};
use vmaas_model::vm::VmImage;
use vmaas_model::{ObjectKind, ParameterValue, Template, VirtualMachineTemplate};

use crate::diag::{api_error, error, map_key_path, path};
use crate::proto::{AttributePath, Diagnostic, Schema};
use crate::resource::{Ctx, Resource};
use crate::schema::{BOOL, Mode, NUMBER, STRING, STRING_MAP, attr, block, list_of_objects};
use crate::value::{self, get, is_unknown, set, string, unknown};
use crate::vm_model::{Timeouts, VmModel};
use crate::vm_state::{nic_block, vm_state};

/// Resource type of a VM.
pub const VM: &str = vmaas_model::ObjectKind::VirtualMachine.descriptor().terraform;

/// The `vmaas_virtual_machine` resource.
pub struct VmResource;

impl VmResource {
    /// The template a VM of `template` or catalog item `item` is made of:
    /// the template named, else the item's.
    async fn template_of(client: &Client, template: Option<String>, item: Option<String>, diags: &mut Vec<Diagnostic>) -> Option<String> {
        if let Some(t) = template.filter(|t| !t.is_empty()) {
            return Some(t);
        }
        let item = item?;
        let path_of = ObjectKind::ComputeInstanceCatalogItem.descriptor().plural;
        match client.find_object::<serde_json::Value>(&format!("/{path_of}"), &item).await {
            Ok(i) => vmaas_model::reference::key(&i["template"]).ok().flatten(),
            Err(e) => {
                let why = if e.is_not_found() { "list the catalog items with `vmaas catalog-item list`".to_owned() } else { e.to_string() };
                diags.push(error(format!("cannot read catalog item {item:?}"), why, Some(path(&["catalog_item"]))));
                None
            }
        }
    }

    /// Types the text parameters in `params` with `template`'s declared
    /// types; every problem becomes a diagnostic on its map key.
    async fn typed_params(
        ctx: &Ctx,
        client: &Client,
        template: &str,
        params: &Value,
        diags: &mut Vec<Diagnostic>,
    ) -> Option<BTreeMap<String, ParameterValue>> {
        let wire = match ctx.template(client, template).await {
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
        let compiled = match Template::compile(VirtualMachineTemplate::clone(&wire).published()) {
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
                    diags.push(error(format!("invalid template parameter {k:?}"), reason, Some(map_key_path("template_parameters", &k))));
                }
            }
        }
        if !diags.is_empty() {
            return None;
        }
        if complete && let Err(errs) = compiled.resolve(&out, "template_parameters") {
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
        Some(out)
    }

    async fn plan_vm(&self, ctx: &Ctx, prior: &Value, proposed: &Value, diags: &mut Vec<Diagnostic>) -> (Value, Vec<AttributePath>) {
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
            let fixed = [
                "name",
                "template",
                "template_parameters",
                "network_attachment",
                "ssh_keys",
                "user_data",
                "user_data_wo_version",
                "image",
                "clone_of_snapshot",
                "additional_disk",
                "auto_external_ip_attachment",
                "catalog_item",
            ];
            // A placement changes in place only with the VM stopped: it moves.
            if string(get(&planned, "state")).as_deref() != Some("stopped") {
                replace.extend(crate::vm_state::placement_changes(prior, proposed).into_iter().map(|a| path(&[a])));
            }
            if crate::vm_disks::boot_disk_replaces(prior, proposed) {
                replace.push(path(&["boot_disk"]));
            }
            for attr in fixed {
                let (a, b) = (get(prior, attr), get(proposed, attr));
                let empty = |v: &Value| v.is_nil() || *v == Value::Boolean(false) || matches!(v, Value::Map(m) if m.is_empty());
                if a != b && !(empty(a) && empty(b)) {
                    replace.push(path(&[attr]));
                }
            }
        }
        let in_place = ["state", "instance_type", "boot_disk", "cluster", "placement_labels"];
        let state_changed = !creating && in_place.iter().any(|a| get(prior, a) != get(&planned, a));
        if creating || !replace.is_empty() {
            for attr in ["id", "status", "internal_ip", "external_ip", "conditions", "placed_on", "expires_at"] {
                set(&mut planned, attr, unknown());
            }
        } else if get(prior, "ttl") != get(&planned, "ttl") {
            // A new TTL counts from the update.
            set(&mut planned, "expires_at", unknown());
        }
        if !creating && replace.is_empty() && state_changed {
            for attr in ["status", "internal_ip", "external_ip", "conditions", "placed_on"] {
                set(&mut planned, attr, unknown());
            }
        }
        if (creating || !replace.is_empty()) && get(&planned, "template").is_nil() {
            // The catalog item's: the server says which.
            set(&mut planned, "template", unknown());
        }
        if (creating || !replace.is_empty())
            && let Some(client) = ctx.client()
            && let Some(template) =
                Self::template_of(client, string(get(proposed, "template")), string(get(proposed, "catalog_item")), diags).await
        {
            Self::typed_params(ctx, client, &template, get(proposed, "template_parameters"), diags).await;
        }
        (planned, replace)
    }

    async fn apply_vm(&self, ctx: &Ctx, prior: &Value, planned: &Value, diags: &mut Vec<Diagnostic>) -> Value {
        let Some(client) = ctx.client_or_diag(diags) else { return prior.clone() };
        if planned.is_nil() {
            return Self::destroy(client, prior, &VmModel::decode(prior), diags).await;
        }
        let model = VmModel::decode(planned);
        let (vm, which) = if prior.is_nil() {
            let template = Self::template_of(client, Some(model.template.clone()), model.catalog_item.clone(), diags).await;
            let Some(params) = Self::typed_params(ctx, client, &template.unwrap_or_default(), &model.template_parameters, diags).await
            else {
                return Value::Nil;
            };
            match client.create_vm(&model.create_request(params)).await {
                Ok(vm) => (vm, "create"),
                Err(e) => {
                    diags.push(api_error("cannot create the virtual machine", &e));
                    return Value::Nil;
                }
            }
        } else {
            let id = string(get(prior, "id")).unwrap_or_default();
            match client.patch_vm_versioned(&id, &model.patch(&VmModel::decode(prior)), 5).await {
                Ok(vm) => (vm, "update"),
                Err(e) => {
                    diags.push(error("cannot update the virtual machine", e.to_string(), None));
                    return prior.clone();
                }
            }
        };
        let wait = match model.timeouts.of(which) {
            Ok(t) => *t,
            Err(e) => {
                diags.push(error(format!("invalid timeouts.{which}"), e.clone(), Some(path(&["timeouts", which]))));
                return vm_state(&vm, planned);
            }
        };
        let target = model.wait_for();
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
                        match target {
                            WaitFor::Ready => "READY",
                            WaitFor::Paused => "PAUSED",
                            _ => "STOPPED",
                        }
                    ),
                    detail,
                    None,
                ));
                vm_state(last.as_ref().unwrap_or(&vm), planned)
            }
        }
    }

    /// Deletes the VM of `state` and waits until it is gone.
    async fn destroy(client: &Client, prior: &Value, state: &VmModel, diags: &mut Vec<Diagnostic>) -> Value {
        let Some(id) = state.id.as_deref() else { return Value::Nil };
        let wait = match &state.timeouts.delete {
            Ok(t) => *t,
            Err(e) => {
                diags.push(error("invalid timeouts.delete", e.clone(), Some(path(&["timeouts", "delete"]))));
                return prior.clone();
            }
        };
        match client.delete_vm(id).await {
            Err(e) if e.is_not_found() => Value::Nil,
            Err(e) => {
                diags.push(error("cannot delete the virtual machine", e.to_string(), None));
                prior.clone()
            }
            Ok(_) => match client.wait_vm(id, WaitFor::Deleted, wait, Duration::from_millis(500), |_| {}).await {
                Ok(_) => Value::Nil,
                Err(e) => {
                    diags.push(error("the virtual machine was not deleted in time", e.to_string(), None));
                    prior.clone()
                }
            },
        }
    }
}

#[tonic::async_trait]
impl Resource for VmResource {
    fn type_name(&self) -> &'static str {
        VM
    }

    fn schema(&self) -> Schema {
        let conditions = list_of_objects(&[("type", STRING), ("status", STRING), ("reason", STRING), ("message", STRING)]);
        let timeouts = crate::timeouts::block("the VM", &crate::timeouts::TEN_MINUTES);
        block(
            "A virtual machine made from a template. Create waits until the VM is READY: running, with its guest answering its readiness probe.",
            vec![
                attr("id", STRING, Mode::Computed, "The VM's id (a UUID)."),
                attr("name", STRING, Mode::Required, "Name, unique in the tenant (a DNS label). Changing it replaces the VM."),
                attr(
                    "template",
                    STRING,
                    Mode::OptionalComputed,
                    "Template id; with `catalog_item`, the item's (giving another is refused). Changing it replaces the VM.",
                ),
                attr(
                    "catalog_item",
                    STRING,
                    Mode::Optional,
                    "The catalog item it is made from (OSAC's `catalog_item`, by name or id): its template, and its defaults for the fields the VM leaves out (the state keeps what you wrote). Changing it replaces the VM.",
                ),
                attr(
                    "template_parameters",
                    STRING_MAP,
                    Mode::Optional,
                    "Template parameters as text; the provider types them from the template (`\"4\"` for an integer, `\"4Gi\"` for a quantity, `\"a,b\"` for a list). Changing one replaces the VM.",
                ),
                attr(
                    "ssh_keys",
                    "[\"list\",\"string\"]",
                    Mode::Optional,
                    "SSH public keys the guest authorises (on the Debian image, for the user `debian`), beside the template's. Changing them replaces the VM.",
                ),
                {
                    // It often carries passwords and keys: kept out of plan output.
                    let mut a = attr(
                        "user_data",
                        STRING,
                        Mode::Optional,
                        "cloud-init user data (`#cloud-config`, a script…), in place of the template's; it runs on the first boot. Changing it replaces the VM. Sensitive: not shown in plans.",
                    );
                    a.sensitive = true;
                    a
                },
                {
                    // The same, kept out of the plan and the state as well.
                    let mut a = attr(
                        "user_data_wo",
                        STRING,
                        Mode::Optional,
                        "`user_data`, write-only: sent to the server at create, never kept in the plan or the state (OpenTofu or Terraform 1.11 and later). Change `user_data_wo_version` to replace the VM with new user data.",
                    );
                    a.sensitive = true;
                    a.write_only = true;
                    a
                },
                attr(
                    "user_data_wo_version",
                    NUMBER,
                    Mode::Optional,
                    "A version of `user_data_wo`, kept in the state: changing it replaces the VM (the write-only value itself cannot be compared).",
                ),
                attr(
                    "image",
                    STRING,
                    Mode::Optional,
                    "The image it boots, in place of the template's: a name or id from the `vmaas_images` data source, or an `http(s)` URL imported on demand. Changing it replaces the VM.",
                ),
                attr(
                    "cluster",
                    STRING,
                    Mode::Optional,
                    "The cluster it must run on, when the server drives several (`--cluster`); absent: the server places it. Changed with `state = \"stopped\"`, the VM moves there (its boot disk copied); otherwise changing it replaces the VM.",
                ),
                attr("placed_on", STRING, Mode::Computed, "The cluster it runs on, when the server drives several."),
                attr(
                    "auto_external_ip_attachment",
                    BOOL,
                    Mode::Optional,
                    "Give it an external IP from the server's default pool, attached as it is made, named as the VM and deleted with it (OSAC's `auto_external_ip_attachment`); its address is `external_ip`. Changing it replaces the VM.",
                ),
                attr(
                    "placement_labels",
                    STRING_MAP,
                    Mode::Optional,
                    "Labels the cluster it runs on must have (`--cluster-label` on the server). Changed with `state = \"stopped\"`, the VM moves to a cluster that has them; otherwise changing them replaces the VM.",
                ),
                attr(
                    "instance_type",
                    STRING,
                    Mode::Optional,
                    "Its instance type, by name or id (`vmaas_instance_type`): its cores and memory replace the template's defaults. Changes in place: the VM takes the new shape at its next start (RESTART_REQUIRED meanwhile).",
                ),
                attr(
                    "ttl",
                    STRING,
                    Mode::Optional,
                    "How long it lives, e.g. `30m`, `2h`, `1d`: the server deletes it then, with its auto-delete volumes. Changes in place: a new TTL counts from the update; removing it removes the end (unless the tenant has a maximum TTL).",
                ),
                attr(
                    "clone_of_snapshot",
                    STRING,
                    Mode::Optional,
                    "A snapshot (`vmaas_snapshot`), by id or name, whose disks this VM starts as: a clone, with its own identity. Changing it replaces the VM.",
                ),
                attr(
                    "expires_at",
                    STRING,
                    Mode::Computed,
                    "When the server deletes it (RFC 3339): from `ttl`, or the tenant's maximum TTL.",
                ),
                attr(
                    "state",
                    STRING,
                    Mode::OptionalComputed,
                    "`started` (default), `stopped`, or `paused` (a running VM frozen, its memory kept; the qemu backend). Changes in place.",
                ),
                attr("status", STRING, Mode::Computed, "READY, PROGRESSING, STOPPED, PAUSED, FAILED or DELETING."),
                attr("internal_ip", STRING, Mode::Computed, "The address of the VM itself."),
                attr("external_ip", STRING, Mode::Computed, "The floating address pointing to the VM."),
                attr(
                    "conditions",
                    &conditions,
                    Mode::Computed,
                    "PROGRESSING, READY, FAILED and DEGRADED (and RESTART_REQUIRED once it held, and LIVE_MIGRATABLE while it runs), each with `status`, `reason` and `message`.",
                ),
            ],
            [vec![timeouts, nic_block()], crate::vm_disks::disk_blocks().into()].concat(),
        )
    }

    fn validate(&self, config: &Value) -> Vec<Diagnostic> {
        let config = config.clone();
        let mut diagnostics = Vec::new();
        if let Some(Err(e)) = string(get(&config, "state")).map(|s| s.parse::<vmaas_model::PowerState>()) {
            diagnostics.push(error("invalid state", e.to_string(), Some(path(&["state"]))));
        }
        if let Some(n) = string(get(&config, "name"))
            && let Err(reason) = vmaas_model::validation::check_dns_label(&n)
        {
            diagnostics.push(error("invalid name", reason, Some(path(&["name"]))));
        }
        if let Value::Array(keys) = get(&config, "ssh_keys") {
            for (i, k) in keys.iter().enumerate() {
                if let Some(Err(reason)) = k.as_str().map(vmaas_model::nocloud::check_ssh_key) {
                    diagnostics.push(error("invalid SSH key", reason, Some(crate::diag::index_path("ssh_keys", i))));
                }
            }
        }
        for field in ["user_data", "user_data_wo"] {
            if let Some(Err(reason)) = string(get(&config, field)).as_deref().map(vmaas_model::nocloud::check_user_data) {
                diagnostics.push(error(format!("invalid {field}"), reason, Some(path(&[field]))));
            }
        }
        if !get(&config, "user_data").is_nil() && !get(&config, "user_data_wo").is_nil() {
            diagnostics.push(error(
                "user_data and user_data_wo both set",
                "give the user data once: user_data, or user_data_wo (write-only)",
                Some(path(&["user_data_wo"])),
            ));
        }
        if get(&config, "template").is_nil() && get(&config, "catalog_item").is_nil() {
            let why = "a VM is made of a template or a catalog item: set template or catalog_item";
            diagnostics.push(error("no template", why, Some(path(&["template"]))));
        }
        if let Some(Err(e)) = string(get(&config, "image")).map(|r| VmImage { source_type: String::new(), source_ref: r }.boot_source()) {
            diagnostics.push(error("invalid image", e.reason, Some(path(&["image"]))));
        }
        diagnostics.extend(Timeouts::check(&config));
        diagnostics
    }

    async fn plan(&self, ctx: &Ctx, prior: &Value, proposed: &Value, diags: &mut Vec<Diagnostic>) -> (Value, Vec<AttributePath>) {
        self.plan_vm(ctx, prior, proposed, diags).await
    }

    async fn apply(&self, ctx: &Ctx, prior: &Value, planned: &Value, diags: &mut Vec<Diagnostic>) -> Value {
        self.apply_vm(ctx, prior, planned, diags).await
    }

    async fn read(&self, ctx: &Ctx, id: &str, state: &Value) -> (Value, Vec<Diagnostic>) {
        let mut diags = Vec::new();
        let Some(client) = ctx.client_or_diag(&mut diags) else { return (state.clone(), diags) };
        match client.get_vm(id).await {
            Ok(vm) => (vm_state(&vm, state), vec![]),
            // Deleted outside Terraform: forget it, the next plan re-creates it.
            Err(e) if e.is_not_found() => (Value::Nil, vec![]),
            Err(e) => (state.clone(), vec![error("cannot read the virtual machine", e.to_string(), None)]),
        }
    }

    async fn import(&self, ctx: &Ctx, id: &str) -> Result<Value, Diagnostic> {
        let mut diags = Vec::new();
        let Some(client) = ctx.client_or_diag(&mut diags) else { return Err(diags.remove(0)) };
        match client.find_vm(id).await {
            Ok(vm) => Ok(vm_state(&vm, &Value::Nil)),
            Err(e) => Err(error(format!("cannot import virtual machine {id:?}"), format!("{e} (import takes a VM id or name)"), None)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::attribute_path::step::Selector;
    use crate::value::object;
    use crate::vm_state::param_to_string;

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
        let (p, ctx) = (VmResource, Ctx::default());
        let mut proposed = vm(params(&[("vm_memory", "4Gi")]), "started");
        set(&mut proposed, "state", Value::Nil);
        for a in ["id", "status", "internal_ip", "external_ip", "conditions"] {
            set(&mut proposed, a, Value::Nil);
        }
        let mut diags = vec![];
        let (planned, replace) = p.plan_vm(&ctx, &Value::Nil, &proposed, &mut diags).await;
        assert!(replace.is_empty() && diags.is_empty());
        assert_eq!(string(get(&planned, "state")).as_deref(), Some("started"));
        for a in ["id", "status", "internal_ip", "external_ip", "conditions"] {
            assert!(is_unknown(get(&planned, a)), "{a} is known after apply");
        }
    }

    #[tokio::test]
    async fn state_changes_in_place_and_parameters_force_replacement() {
        let (p, ctx) = (VmResource, Ctx::default());
        let prior = vm(params(&[("vm_memory", "4Gi")]), "started");
        let (planned, replace) = p.plan_vm(&ctx, &prior, &vm(params(&[("vm_memory", "4Gi")]), "stopped"), &mut vec![]).await;
        assert!(replace.is_empty());
        assert!(is_unknown(get(&planned, "status")));
        assert_eq!(string(get(&planned, "id")), string(get(&prior, "id")), "same VM");

        let (_, replace) = p.plan_vm(&ctx, &prior, &vm(params(&[("vm_memory", "8Gi")]), "started"), &mut vec![]).await;
        assert_eq!(names(&replace), ["template_parameters"]);
        let mut renamed = vm(params(&[("vm_memory", "4Gi")]), "started");
        set(&mut renamed, "name", Value::from("other"));
        assert_eq!(names(&p.plan_vm(&ctx, &prior, &renamed, &mut vec![]).await.1), ["name"]);

        // No change: nothing unknown, nothing replaced.
        let (planned, replace) = p.plan_vm(&ctx, &prior, &prior, &mut vec![]).await;
        assert!(replace.is_empty());
        assert_eq!(planned, prior);
        // An empty map and no map are the same parameters.
        let (_, replace) = p.plan_vm(&ctx, &vm(Value::Nil, "started"), &vm(Value::Map(vec![]), "started"), &mut vec![]).await;
        assert!(replace.is_empty());
        // Another cluster: moved in place when stopped, else replaced.
        let mut moved = vm(params(&[("vm_memory", "4Gi")]), "stopped");
        set(&mut moved, "cluster", Value::from("west"));
        let (planned, replace) = p.plan_vm(&ctx, &prior, &moved, &mut vec![]).await;
        assert!(replace.is_empty() && is_unknown(get(&planned, "placed_on")), "{replace:?}");
        set(&mut moved, "state", Value::from("started"));
        assert_eq!(names(&p.plan_vm(&ctx, &prior, &moved, &mut vec![]).await.1), ["cluster"]);
        // Destroy.
        assert!(p.plan_vm(&ctx, &prior, &Value::Nil, &mut vec![]).await.0.is_nil());
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
        let timeouts = Timeouts::decode(&s, &crate::timeouts::TEN_MINUTES);
        assert_eq!(timeouts.of("create").clone().unwrap(), Duration::from_secs(90));
        assert_eq!(timeouts.of("update").clone().unwrap(), crate::vm_model::DEFAULT_TIMEOUT);
        assert!(timeouts.of("delete").clone().unwrap_err().contains("\"soon\" is not a duration"));
    }
}
