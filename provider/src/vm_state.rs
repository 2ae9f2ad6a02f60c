//! What a `vmaas_virtual_machine` is in Terraform's terms: its NIC block,
//! the state written from a VM, and the parts of a plan the API's create
//! request takes (NICs, keys, placement).

use rmpv::Value;
use vmaas_model::{NetworkAttachment, Placement, VirtualMachine};

use crate::proto::StringKind;
use crate::proto::schema::{Block, NestedBlock, nested_block::NestingMode};
use crate::schema::{Mode, STRING, attr};
use crate::value::{self, get, object, string};

/// A parameter value as the string Terraform keeps: quantities and strings
/// as written, integers in decimal, lists comma-separated.
pub(crate) fn param_to_string(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(items) => items.iter().map(param_to_string).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

/// The `network_attachment` block: a NIC on a subnet.
pub(crate) fn nic_block() -> NestedBlock {
    NestedBlock {
        type_name: "network_attachment".into(),
        block: Some(Block {
            version: 0,
            attributes: vec![
                attr("subnet", STRING, Mode::Required, "The subnet, by id or name."),
                attr(
                    "security_groups",
                    "[\"list\",\"string\"]",
                    Mode::Optional,
                    "Security groups of the subnet's network, by id or name; none: everything inside the network passes.",
                ),
                attr(
                    "ip_address",
                    STRING,
                    Mode::Optional,
                    "A fixed address on the subnet; absent: the server assigns one (see `internal_ip` for the first NIC's).",
                ),
            ],
            block_types: vec![],
            description: "A NIC on a subnet, in order (the first one's address is `internal_ip`). Changing the NICs replaces the VM."
                .into(),
            description_kind: StringKind::Markdown as i32,
            deprecated: false,
        }),
        nesting: NestingMode::List as i32,
        min_items: 0,
        max_items: 0,
    }
}

/// The Terraform state of a VM, keeping the shape of what the user wrote
/// (a null parameter map stays null) and their `timeouts`.
pub(crate) fn vm_state(vm: &VirtualMachine, like: &Value) -> Value {
    let params: Vec<(Value, Value)> = vm
        .spec
        .template_parameters
        .iter()
        .map(|(k, p)| (Value::from(k.as_str()), Value::from(param_to_string(&p.json().unwrap_or_else(|_| p.value.clone())))))
        .collect();
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
    let mut fields = vec![
        ("id", Value::from(vm.id.as_str())),
        ("name", Value::from(vm.metadata.name.as_str())),
        ("template", Value::from(vm.spec.template.as_str())),
        ("template_parameters", params),
        ("state", Value::from(vm.spec.state.as_str())),
        ("status", Value::from(vm.status.state.short())),
        ("internal_ip", value::opt_string(vm.status.internal_ip.as_deref())),
        ("external_ip", value::opt_string(vm.status.external_ip.as_deref())),
        ("conditions", conditions),
        ("network_attachment", nics_state(vm, like)),
        ("ssh_keys", keys_state(vm, like)),
        ("user_data", user_data_state(vm, like)),
        ("user_data_wo", Value::Nil),
        ("user_data_wo_version", get(like, "user_data_wo_version").clone()),
        ("image", value::opt_string(vm.spec.image.as_ref().map(|i| i.source_ref.as_str()))),
        ("cluster", value::opt_string(vm.spec.placement.as_ref().and_then(|p| p.cluster.as_deref()))),
        ("placed_on", value::opt_string(vm.status.cluster.as_deref())),
        ("auto_external_ip_attachment", auto_ip_state(vm, like)),
        ("placement_labels", labels_state(vm, like)),
        ("instance_type", instance_type_state(vm, like)),
        ("ttl", value::opt_string(vm.spec.ttl.as_deref())),
        ("clone_of_snapshot", clone_state(vm, like)),
        ("expires_at", value::opt_string(vm.spec.expires_at.map(|t| t.to_rfc3339()).as_deref())),
        ("timeouts", get(like, "timeouts").clone()),
    ];
    fields.extend(crate::vm_disks::disks_state(vm));
    fields.push(("catalog_item", catalog_item_state(vm, like)));
    if !like.is_nil() && !get(like, "catalog_item").is_nil() {
        // The item's defaults are the server's: the state keeps what was written.
        for (name, v) in &mut fields {
            if ITEM_FILLED.contains(name) {
                *v = get(like, name).clone();
            }
        }
    }
    object(fields)
}

/// What a catalog item's defaults may fill in of a VM.
const ITEM_FILLED: [&str; 6] = ["template_parameters", "ssh_keys", "user_data", "image", "instance_type", "boot_disk"];

/// `catalog_item` as written (the server keeps the item's id); on an
/// import, the server's.
fn catalog_item_state(vm: &VirtualMachine, like: &Value) -> Value {
    if like.is_nil() {
        return value::opt_string(vm.spec.catalog_item.as_deref());
    }
    get(like, "catalog_item").clone()
}

/// `auto_external_ip_attachment`: true when the server holds it; false as
/// written, else absent (an import of a VM without it plans nothing).
fn auto_ip_state(vm: &VirtualMachine, like: &Value) -> Value {
    let written = get(like, "auto_external_ip_attachment");
    match (vm.spec.auto_external_ip_attachment, written.as_bool()) {
        (true, _) => Value::from(true),
        (false, Some(false)) => written.clone(),
        (false, _) => Value::Nil,
    }
}

/// `user_data` as written (none when it came write-only, as
/// `user_data_wo`: a VM's user data never changes in place, so there is no
/// drift to show); on an import, the server's.
fn user_data_state(vm: &VirtualMachine, like: &Value) -> Value {
    if like.is_nil() {
        return value::opt_string(vm.spec.user_data.as_deref());
    }
    get(like, "user_data").clone()
}

/// `clone_of_snapshot` as written (a name or the id the server stored).
fn clone_state(vm: &VirtualMachine, like: &Value) -> Value {
    let Some(id) = vm.spec.clone_of.as_ref().and_then(|c| c.snapshot.as_deref()) else { return Value::Nil };
    match crate::value::string(get(like, "clone_of_snapshot")) {
        Some(w) => Value::from(w),
        None => Value::from(id),
    }
}

/// `instance_type` as written (a name or an id) while the VM has that
/// type, else the type's name (an import, or a change made elsewhere).
fn instance_type_state(vm: &VirtualMachine, like: &Value) -> Value {
    let Some(t) = &vm.spec.instance_type else { return Value::Nil };
    match crate::value::string(get(like, "instance_type")) {
        Some(w) if w == t.id || w == t.name => Value::from(w),
        _ => Value::from(t.name.as_str()),
    }
}

/// `ssh_keys` as the VM has them (null when unset and not written).
pub(crate) fn keys_state(vm: &VirtualMachine, like: &Value) -> Value {
    let keys = vm.spec.ssh_keys();
    if keys.is_empty() && get(like, "ssh_keys").is_nil() { Value::Nil } else { Value::Array(keys.into_iter().map(Value::from).collect()) }
}

/// The planned `ssh_keys`, one per line as the API takes them.
pub(crate) fn planned_keys(planned: &Value) -> Option<String> {
    let Value::Array(keys) = get(planned, "ssh_keys") else { return None };
    let lines: Vec<&str> = keys.iter().filter_map(Value::as_str).collect();
    (!lines.is_empty()).then(|| lines.join("\n"))
}

/// The `network_attachment` blocks: as written (references by name stay
/// names), or from the VM when there is nothing written (import).
pub(crate) fn nics_state(vm: &VirtualMachine, like: &Value) -> Value {
    if let Value::Array(_) = get(like, "network_attachment") {
        return get(like, "network_attachment").clone();
    }
    Value::Array(
        vm.spec
            .network_attachments
            .iter()
            .map(|a| {
                object(vec![
                    ("subnet", Value::from(a.subnet.as_str())),
                    ("security_groups", Value::Array(a.security_groups.iter().map(|g| Value::from(g.as_str())).collect())),
                    ("ip_address", value::opt_string(a.ip_address.as_deref())),
                ])
            })
            .collect(),
    )
}

/// The NICs the `network_attachment` blocks ask for.
pub(crate) fn nics(planned: &Value) -> Vec<NetworkAttachment> {
    let Value::Array(blocks) = get(planned, "network_attachment") else { return Vec::new() };
    blocks
        .iter()
        .map(|b| NetworkAttachment {
            subnet: string(get(b, "subnet")).unwrap_or_default(),
            security_groups: match get(b, "security_groups") {
                Value::Array(g) => g.iter().filter_map(|x| x.as_str().map(str::to_owned)).collect(),
                _ => Vec::new(),
            },
            ip_address: string(get(b, "ip_address")),
        })
        .collect()
}

/// The placement `cluster` and `placement_labels` ask for, if any.
pub(crate) fn placement(planned: &Value) -> Option<Placement> {
    let labels = match get(planned, "placement_labels") {
        Value::Map(kv) => kv.iter().filter_map(|(k, v)| Some((k.as_str()?.to_owned(), v.as_str()?.to_owned()))).collect(),
        _ => Default::default(),
    };
    Some(Placement { cluster: string(get(planned, "cluster")), labels }).filter(|p| !p.is_empty())
}

/// Which of `cluster` and `placement_labels` differ from `prior` to `proposed`.
pub(crate) fn placement_changes(prior: &Value, proposed: &Value) -> Vec<&'static str> {
    let empty = |v: &Value| v.is_nil() || matches!(v, Value::Map(m) if m.is_empty());
    ["cluster", "placement_labels"]
        .into_iter()
        .filter(|a| {
            let (x, y) = (get(prior, a), get(proposed, a));
            x != y && !(empty(x) && empty(y))
        })
        .collect()
}

/// `placement_labels` as the VM has them (null when unset and not written).
pub(crate) fn labels_state(vm: &VirtualMachine, like: &Value) -> Value {
    let labels = vm.spec.placement.as_ref().map(|p| p.labels.clone()).unwrap_or_default();
    if labels.is_empty() && get(like, "placement_labels").is_nil() {
        return Value::Nil;
    }
    Value::Map(labels.iter().map(|(k, v)| (Value::from(k.as_str()), Value::from(v.as_str()))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_is_what_the_plan_asks_and_nothing_when_it_asks_nothing() {
        let planned = object(vec![
            ("cluster", Value::from("east")),
            ("placement_labels", Value::Map(vec![(Value::from("zone"), Value::from("eu-1"))])),
        ]);
        let p = placement(&planned).unwrap();
        assert_eq!(p.cluster.as_deref(), Some("east"));
        assert_eq!(p.labels["zone"], "eu-1");
        assert_eq!(placement(&object(vec![("cluster", Value::Nil), ("placement_labels", Value::Nil)])), None);
    }
}
