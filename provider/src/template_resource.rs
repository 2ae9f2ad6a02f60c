//! `vmaas_template`: administrators publish templates from Terraform.
//!
//! Every template field has an attribute or a nested block; what the server
//! returns is mapped back keeping the user's nulls, so nothing drifts.

use rmpv::Value;
use vmaas_model::Template;

use crate::diag::{api_error, error, path};
use crate::proto::schema::{Attribute, Block, nested_block::NestingMode};
use crate::proto::{AttributePath, Diagnostic};
use crate::proto::{Schema, StringKind};
use crate::resource::{Ctx, Resource};
use crate::template_model::{from_tf, to_tf};
use crate::value::{get, string};

const STRING: &str = "\"string\"";
const NUMBER: &str = "\"number\"";
const BOOL: &str = "\"bool\"";
const STRING_LIST: &str = "[\"list\",\"string\"]";
use crate::schema::{STRING_MAP, nested};

fn attr(name: &str, ty: &str, required: bool, description: &str) -> Attribute {
    Attribute {
        name: name.into(),
        r#type: ty.as_bytes().to_vec(),
        description: description.into(),
        required,
        optional: !required,
        computed: false,
        sensitive: false,
        description_kind: StringKind::Markdown as i32,
        deprecated: false,
        write_only: false,
    }
}

/// The resource's schema.
fn schema() -> Schema {
    let parameter = nested(
        "parameter",
        NestingMode::List,
        "A parameter tenants may set, in order.",
        vec![
            attr("name", STRING, true, "The name tenants use, e.g. `vm_memory`."),
            attr("title", STRING, false, "Short human title."),
            attr("description", STRING, false, "Longer description, in Markdown."),
            attr(
                "type",
                STRING,
                false,
                "`bool`, `integer`, `string`, `quantity` or `list`; when absent it comes from the spec field the parameter sets, else from the default.",
            ),
            attr("required", BOOL, false, "Whether tenants must set it."),
            attr("default", STRING, false, "Default value as text, typed like the parameter (`\"2\"`, `\"2Gi\"`, `\"a,b\"`)."),
            attr("min", STRING, false, "Smallest value (integer, quantity), length (string) or item count (list), as text."),
            attr("max", STRING, false, "Largest value, length or item count, as text."),
            attr("enum", STRING_LIST, false, "The only values allowed, as text."),
            attr("pattern", STRING, false, "A regular expression every string (or list item) must match."),
            attr(
                "maps_to",
                STRING,
                false,
                "The spec field it sets (`cpu_cores`, `memory`, `disk_size`, `image`, `gpus`, `exposed_ports`, `ssh_keys`, `user_data`); defaults from the name (`vm_memory` sets `memory`).",
            ),
        ],
        vec![],
    );
    let probe = nested(
        "readiness_probe",
        NestingMode::Single,
        "How to tell that the guest answers: set `http_port` (with `http_path`) or `tcp_port`.",
        vec![
            attr("http_port", NUMBER, false, "Ready once an HTTP GET of this guest port returns 2xx or 3xx."),
            attr("http_path", STRING, false, "Path of the HTTP check (default `/`)."),
            attr("tcp_port", NUMBER, false, "Ready once the guest accepts a TCP connection on this port."),
            attr("period_seconds", NUMBER, false, "Seconds between attempts (default 1)."),
            attr("timeout_seconds", NUMBER, false, "Seconds after start before the VM is FAILED (default 300)."),
        ],
        vec![],
    );
    let port = nested(
        "exposed_port",
        NestingMode::List,
        "A guest port reachable on the VM's external IP.",
        vec![
            attr("port", NUMBER, true, "The port."),
            attr("protocol", STRING, false, "`tcp` (default) or `udp`."),
            attr("name", STRING, false, "Optional name, e.g. `http`."),
        ],
        vec![],
    );
    let gpu = nested(
        "gpu",
        NestingMode::List,
        "A GPU passed through to the guest.",
        vec![
            attr("name", STRING, true, "Device name in the VM, e.g. `gpu0`."),
            attr("device_name", STRING, true, "Host resource name, e.g. `nvidia.com/GA102GL_A10`."),
        ],
        vec![],
    );
    let data_disk = nested(
        "data_disk",
        NestingMode::List,
        "An empty data disk beside the boot disk.",
        vec![
            attr("name", STRING, true, "Its name, e.g. `data0`."),
            attr("size", STRING, true, "Its size, e.g. `120Gi`."),
            attr("bus", STRING, false, "Its bus: `virtio` (default), `sata` or `scsi`."),
            attr("storage_class", STRING, false, "The storage class of its volume (kubevirt backend only)."),
            attr("preallocation", BOOL, false, "Whether its space is allocated when it is made."),
        ],
        vec![],
    );
    let toleration = nested(
        "toleration",
        NestingMode::List,
        "A taint the VM tolerates (kubevirt backend only).",
        vec![
            attr("key", STRING, false, "The taint's key (every key when unset, with `Exists`)."),
            attr("operator", STRING, false, "`Equal` (default) or `Exists`."),
            attr("value", STRING, false, "The value `Equal` compares."),
            attr("effect", STRING, false, "`NoSchedule`, `PreferNoSchedule` or `NoExecute` (every effect when unset)."),
            attr("toleration_seconds", NUMBER, false, "How long a `NoExecute` taint is tolerated."),
        ],
        vec![],
    );
    let defaults = nested(
        "spec_defaults",
        NestingMode::Single,
        "Spec values used where no parameter overrides them.",
        vec![
            attr("cpu_cores", NUMBER, false, "Virtual CPU cores (default 1)."),
            attr("memory", STRING, false, "Guest memory, e.g. `2Gi` (default `1Gi`)."),
            attr("disk_size", STRING, false, "Boot disk size, e.g. `20Gi` (default `10Gi`)."),
            attr("image", STRING, false, "Base image name."),
            {
                let mut a = attr("user_data", STRING, false, "Cloud-init user data. Sensitive: not shown in plans.");
                a.sensitive = true;
                a
            },
            attr("ssh_keys", STRING_LIST, false, "SSH public keys."),
            attr("instance_type", STRING, false, "The instance type a VM gets when it names none."),
            attr("instance_types", STRING_LIST, false, "The instance types a VM may name (any when unset)."),
            attr("max_cpu_cores", NUMBER, false, "The most vCPUs a running VM is resized to without a restart."),
            attr("max_memory", STRING, false, "The most memory a running VM is resized to without a restart, e.g. `4Gi`."),
            attr("firmware", STRING, false, "Firmware: `bios` or `efi` (default: the image's, else by the OS family)."),
            attr("secure_boot", BOOL, false, "Secure Boot (EFI only; default: the image's, else on for Windows)."),
            attr("tpm", BOOL, false, "A persistent TPM 2.0 (default: the image's, else on for Windows)."),
            attr("guest_os_family", STRING, false, "`linux` or `windows` (default: the image's, else `linux`)."),
            attr("cpu_sockets", NUMBER, false, "CPU sockets (default 1); the vCPUs are cores × sockets × threads."),
            attr("cpu_threads", NUMBER, false, "Threads per core (default 1)."),
            attr("disk_bus", STRING, false, "The boot disk's bus: `virtio` (default), `sata` or `scsi`."),
            attr("disk_storage_class", STRING, false, "The storage class of the boot disk's volume (kubevirt backend only)."),
            attr("disk_preallocation", BOOL, false, "Whether the boot disk's space is allocated when it is made."),
            attr("nic_model", STRING, false, "The first NIC's model: `virtio` (default), `e1000e`, `e1000` or `rtl8139`."),
            attr("network_interface_multiqueue", BOOL, false, "One queue per vCPU on each virtio NIC (kubevirt backend only)."),
            attr("rng", BOOL, false, "A virtio random number generator."),
            attr("tablet", BOOL, false, "A USB tablet (an absolute pointer for the graphical console)."),
            attr("log_serial_console", BOOL, false, "Whether the serial console is logged (default on)."),
            attr("termination_grace_period_seconds", NUMBER, false, "Seconds a guest has to power off before it is stopped hard."),
            attr("machine_type", STRING, false, "The machine type, e.g. `q35` or `pc-q35-rhel9.2.0`."),
            attr("architecture", STRING, false, "The architecture: `amd64` (`x86_64`), the only one served."),
            attr("node_selector", STRING_MAP, false, "Node labels a node must have to run the VM (kubevirt backend only)."),
            attr(
                "affinity",
                STRING,
                false,
                "Kubernetes' `affinity` as JSON, e.g. `jsonencode({nodeAffinity = {...}})` (kubevirt backend only).",
            ),
            attr("dedicated_cpus", BOOL, false, "Each vCPU pinned to a host CPU of its own (kubevirt backend only)."),
            attr("hugepages", STRING, false, "Guest memory on huge pages of this size: `2Mi` or `1Gi` (kubevirt backend only)."),
            attr(
                "labels",
                STRING_MAP,
                false,
                "Labels of the KubeVirt VirtualMachine, e.g. `vm.kubevirt.io/template` (kubevirt backend only).",
            ),
            attr("annotations", STRING_MAP, false, "Annotations of the KubeVirt VirtualMachine (kubevirt backend only)."),
            attr(
                "instance_labels",
                STRING_MAP,
                false,
                "Labels of its instance template and pod, e.g. `kubevirt.io/size` (kubevirt backend only).",
            ),
            attr(
                "instance_annotations",
                STRING_MAP,
                false,
                "Annotations of its instance template, e.g. `vm.kubevirt.io/os` (kubevirt backend only).",
            ),
        ],
        vec![probe, port, gpu, data_disk, toleration],
    );
    Schema {
        version: 0,
        block: Some(Block {
            version: 0,
            attributes: vec![
                Attribute {
                    computed: false,
                    ..attr("id", STRING, true, "Template id tenants reference, e.g. `simple_vm`. Changing it replaces the template.")
                },
                attr("title", STRING, false, "Short human title."),
                attr("description", STRING, false, "Longer description, in Markdown."),
            ],
            block_types: vec![parameter, defaults],
            description: "A virtual machine template (administrators only). Import by id.".into(),
            description_kind: StringKind::Markdown as i32,
            deprecated: false,
        }),
    }
}

/// Resource type of a template.
pub const TEMPLATE: &str = vmaas_model::ObjectKind::Template.descriptor().terraform;

/// The `vmaas_template` resource: administrators publish templates.
pub struct TemplateResource;

impl TemplateResource {
    async fn plan_template(&self, prior: &Value, proposed: &Value, diags: &mut Vec<Diagnostic>) -> (Value, Vec<AttributePath>) {
        if proposed.is_nil() {
            return (Value::Nil, Vec::new());
        }
        let mut replace = Vec::new();
        if !prior.is_nil() && get(prior, "id") != get(proposed, "id") {
            replace.push(path(&["id"]));
        }
        match from_tf(proposed) {
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

    async fn apply_template(&self, ctx: &Ctx, prior: &Value, planned: &Value, diags: &mut Vec<Diagnostic>) -> Value {
        let Some(client) = ctx.client_or_diag(diags) else { return prior.clone() };
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
        let t = match from_tf(planned) {
            Ok(t) => t,
            Err(e) => {
                diags.push(error("invalid template", e, None));
                return prior.clone();
            }
        };
        let r = if prior.is_nil() { client.create_template(&t).await } else { client.update_template(&t).await };
        match r {
            Ok(saved) => to_tf(&saved, planned),
            Err(e) => {
                diags.push(api_error(format!("cannot save template {:?}", t.id), &e));
                prior.clone()
            }
        }
    }
}

#[tonic::async_trait]
impl Resource for TemplateResource {
    fn type_name(&self) -> &'static str {
        TEMPLATE
    }

    fn schema(&self) -> Schema {
        schema()
    }

    async fn plan(&self, _ctx: &Ctx, prior: &Value, proposed: &Value, diags: &mut Vec<Diagnostic>) -> (Value, Vec<AttributePath>) {
        self.plan_template(prior, proposed, diags).await
    }

    async fn apply(&self, ctx: &Ctx, prior: &Value, planned: &Value, diags: &mut Vec<Diagnostic>) -> Value {
        self.apply_template(ctx, prior, planned, diags).await
    }

    async fn read(&self, ctx: &Ctx, id: &str, state: &Value) -> (Value, Vec<Diagnostic>) {
        let mut diags = Vec::new();
        let Some(client) = ctx.client_or_diag(&mut diags) else { return (state.clone(), diags) };
        match client.get_template(id).await {
            Ok(t) => (to_tf(&t, state), vec![]),
            Err(e) if e.is_not_found() => (Value::Nil, vec![]),
            Err(e) => (state.clone(), vec![error("cannot read the template", e.to_string(), None)]),
        }
    }

    async fn import(&self, ctx: &Ctx, id: &str) -> Result<Value, Diagnostic> {
        let mut diags = Vec::new();
        let Some(client) = ctx.client_or_diag(&mut diags) else { return Err(diags.remove(0)) };
        match client.get_template(id).await {
            Ok(t) => Ok(to_tf(&t, &Value::Nil)),
            Err(e) => Err(error(format!("cannot import template {id:?}"), e.to_string(), None)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed() -> vmaas_model::VirtualMachineTemplate {
        serde_json::from_value(serde_json::json!({
            "id": "tiny",
            "title": "Tiny",
            "parameters": [
                {"name": "vm_cpu_cores", "min": 1, "max": 4, "default": {"value": 1}},
                {"name": "vm_memory", "type": "quantity", "min": "128Mi", "default": {"value": "256Mi"}},
                {"name": "flavour", "type": "string", "enum": ["a", "b"], "required": true}
            ],
            "spec_defaults": {"image": "test-guest", "exposed_ports": [{"port": 80, "name": "http"}], "readiness_probe": {"http": {"port": 80, "path": "/"}}}
        }))
        .unwrap()
    }

    #[test]
    fn round_trips_through_terraform_values() {
        let t = seed();
        let tf = to_tf(&t, &Value::Nil);
        let back = from_tf(&tf).unwrap();
        assert_eq!(back, t);
        // Defaults and bounds are typed from the parameter: 1 stays an integer, 256Mi a quantity.
        assert_eq!(back.parameters[0].default.as_ref().unwrap().value, serde_json::json!(1));
        assert_eq!(back.parameters[1].min, Some(serde_json::json!("128Mi")));
        // Unset optional fields stay null, so nothing drifts.
        assert!(get(&crate::template_model::items(get(&tf, "parameter"))[0], "required").is_nil());
        assert!(get(&tf, "description").is_nil());
    }

    #[test]
    fn every_attribute_is_described() {
        fn check(b: &Block) {
            assert!(!b.description.is_empty());
            for a in &b.attributes {
                assert!(!a.description.is_empty(), "{}", a.name);
                serde_json::from_slice::<serde_json::Value>(&a.r#type).unwrap();
            }
            for nb in &b.block_types {
                check(nb.block.as_ref().unwrap());
            }
        }
        check(schema().block.as_ref().unwrap());
    }
}
