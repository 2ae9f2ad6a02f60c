//! `vmaas_template`: administrators publish templates from Terraform.
//!
//! Every template field has an attribute or a nested block; what the server
//! returns is mapped back keeping the user's nulls, so nothing drifts.

use rmpv::Value;
use vmaas_model::spec::{HttpProbe, TcpProbe};
use vmaas_model::{
    ExposedPort, Gpu, ParameterDefinition, ParameterType, ParameterValue, Protocol, Quantity, ReadinessProbe, SpecDefaults, SpecField,
    Template, VirtualMachineTemplate,
};

use crate::diag::{api_error, error, path};
use crate::proto::schema::{Attribute, Block, NestedBlock, nested_block::NestingMode};
use crate::proto::{AttributePath, Diagnostic};
use crate::proto::{Schema, StringKind};
use crate::resource::{Ctx, Resource};
use crate::value::{get, object, string};

const STRING: &str = "\"string\"";
const NUMBER: &str = "\"number\"";
const BOOL: &str = "\"bool\"";
const STRING_LIST: &str = "[\"list\",\"string\"]";

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
    }
}

fn nested(name: &str, nesting: NestingMode, description: &str, attributes: Vec<Attribute>, blocks: Vec<NestedBlock>) -> NestedBlock {
    NestedBlock {
        type_name: name.into(),
        block: Some(Block {
            version: 0,
            attributes,
            block_types: blocks,
            description: description.into(),
            description_kind: StringKind::Markdown as i32,
            deprecated: false,
        }),
        nesting: nesting as i32,
        min_items: 0,
        max_items: 0,
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
    let defaults = nested(
        "spec_defaults",
        NestingMode::Single,
        "Spec values used where no parameter overrides them.",
        vec![
            attr("cpu_cores", NUMBER, false, "Virtual CPU cores (default 1)."),
            attr("memory", STRING, false, "Guest memory, e.g. `2Gi` (default `1Gi`)."),
            attr("disk_size", STRING, false, "Boot disk size, e.g. `20Gi` (default `10Gi`)."),
            attr("image", STRING, false, "Base image name."),
            attr("user_data", STRING, false, "Cloud-init user data."),
            attr("ssh_keys", STRING_LIST, false, "SSH public keys."),
        ],
        vec![probe, port, gpu],
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

fn num(v: &Value) -> Option<i64> {
    v.as_i64().or_else(|| v.as_f64().map(|f| f as i64))
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect()).unwrap_or_default()
}

fn items(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or(&[])
}

/// Parses text as the JSON value of `ty` (numbers for integers and counts).
fn typed(ty: Option<ParameterType>, count_like: bool, text: &str) -> serde_json::Value {
    let as_number = match ty {
        Some(ParameterType::Integer) => true,
        Some(ParameterType::String | ParameterType::List) => count_like,
        _ => false,
    };
    if as_number && let Ok(n) = text.trim().parse::<i64>() {
        return serde_json::Value::from(n);
    }
    serde_json::Value::String(text.to_owned())
}

/// The template a configuration or state describes. Parameter types not
/// written are inferred the way the server does, to type defaults and bounds.
pub fn from_tf(v: &Value) -> Result<VirtualMachineTemplate, String> {
    let mut parameters = Vec::new();
    for p in items(get(v, "parameter")) {
        let name = string(get(p, "name")).unwrap_or_default();
        let kind: Option<ParameterType> = match string(get(p, "type")) {
            Some(t) => Some(
                serde_json::from_value(serde_json::Value::String(t.clone()))
                    .map_err(|_| format!("parameter {name:?}: unknown type {t:?}"))?,
            ),
            None => None,
        };
        let maps_to: Option<SpecField> = match string(get(p, "maps_to")) {
            Some(m) => Some(
                serde_json::from_value(serde_json::Value::String(m.clone()))
                    .map_err(|_| format!("parameter {name:?}: unknown spec field {m:?}"))?,
            ),
            None => None,
        };
        let effective = kind.or_else(|| maps_to.or_else(|| SpecField::well_known(&name)).map(SpecField::parameter_type));
        let default = string(get(p, "default")).map(|d| match effective {
            Some(t) => vmaas_model::TypedValue::from_text(t, &d)
                .map(|tv| ParameterValue::new(tv.to_json()))
                .unwrap_or_else(|_| ParameterValue::new(d.clone())),
            None => ParameterValue::new(d),
        });
        parameters.push(ParameterDefinition {
            name,
            title: string(get(p, "title")).unwrap_or_default(),
            description: string(get(p, "description")).unwrap_or_default(),
            kind,
            required: get(p, "required").as_bool().unwrap_or(false),
            default,
            min: string(get(p, "min")).map(|m| typed(effective, true, &m)),
            max: string(get(p, "max")).map(|m| typed(effective, true, &m)),
            allowed: get(p, "enum").as_array().map(|_| strings(get(p, "enum")).iter().map(|e| typed(effective, false, e)).collect()),
            pattern: string(get(p, "pattern")),
            maps_to,
        });
    }
    let sd = get(v, "spec_defaults");
    let quantity = |key: &str| -> Result<Option<Quantity>, String> {
        string(get(sd, key)).map(|q| Quantity::parse(&q).map_err(|e| format!("spec_defaults.{key}: {e}"))).transpose()
    };
    let probe = get(sd, "readiness_probe");
    let readiness_probe = (!probe.is_nil()).then(|| ReadinessProbe {
        tcp: num(get(probe, "tcp_port")).map(|p| TcpProbe { port: p as u16 }),
        http: num(get(probe, "http_port"))
            .map(|p| HttpProbe { port: p as u16, path: string(get(probe, "http_path")).unwrap_or_else(|| "/".into()) }),
        period_seconds: num(get(probe, "period_seconds")).map(|n| n as u32),
        timeout_seconds: num(get(probe, "timeout_seconds")).map(|n| n as u32),
    });
    let spec_defaults = SpecDefaults {
        cpu_cores: num(get(sd, "cpu_cores")).map(|n| n as u32),
        memory: quantity("memory")?,
        disk_size: quantity("disk_size")?,
        image: string(get(sd, "image")),
        gpus: items(get(sd, "gpu"))
            .iter()
            .map(|g| Gpu {
                name: string(get(g, "name")).unwrap_or_default(),
                device_name: string(get(g, "device_name")).unwrap_or_default(),
            })
            .collect(),
        exposed_ports: items(get(sd, "exposed_port"))
            .iter()
            .map(|p| ExposedPort {
                port: num(get(p, "port")).unwrap_or(0) as u16,
                protocol: if string(get(p, "protocol")).as_deref() == Some("udp") { Protocol::Udp } else { Protocol::Tcp },
                name: string(get(p, "name")),
            })
            .collect(),
        readiness_probe,
        user_data: string(get(sd, "user_data")),
        ssh_keys: strings(get(sd, "ssh_keys")),
    };
    Ok(VirtualMachineTemplate {
        type_url: None,
        id: string(get(v, "id")).unwrap_or_default(),
        title: string(get(v, "title")).unwrap_or_default(),
        description: string(get(v, "description")).unwrap_or_default(),
        parameters,
        spec_defaults,
        metadata: None,
    })
}

/// `value` unless it is empty and `like` (what the user had) is null.
fn keep_null(value: Value, like: &Value) -> Value {
    let empty = match &value {
        Value::Nil => true,
        Value::String(s) => s.as_str().is_some_and(str::is_empty),
        Value::Boolean(b) => !b,
        Value::Array(a) => a.is_empty(),
        _ => false,
    };
    if empty && like.is_nil() { Value::Nil } else { value }
}

fn text(j: &serde_json::Value) -> String {
    match j {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(a) => a.iter().map(text).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

fn opt_str(s: Option<&str>) -> Value {
    s.map(Value::from).unwrap_or(Value::Nil)
}

fn opt_num(n: Option<i64>) -> Value {
    n.map(Value::from).unwrap_or(Value::Nil)
}

/// The Terraform value of a template, shaped like `like` (the prior state or config).
pub fn to_tf(t: &VirtualMachineTemplate, like: &Value) -> Value {
    let like_params = items(get(like, "parameter"));
    let params: Vec<Value> = t
        .parameters
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let lp = like_params.get(i).unwrap_or(&Value::Nil);
            object(vec![
                ("name", Value::from(p.name.as_str())),
                ("title", keep_null(Value::from(p.title.as_str()), get(lp, "title"))),
                ("description", keep_null(Value::from(p.description.as_str()), get(lp, "description"))),
                ("type", opt_str(p.kind.map(ParameterType::as_str))),
                ("required", keep_null(Value::Boolean(p.required), get(lp, "required"))),
                ("default", opt_str(p.default.as_ref().map(|d| text(&d.value)).as_deref())),
                ("min", opt_str(p.min.as_ref().map(text).as_deref())),
                ("max", opt_str(p.max.as_ref().map(text).as_deref())),
                ("enum", p.allowed.as_ref().map(|a| Value::Array(a.iter().map(|v| Value::from(text(v))).collect())).unwrap_or(Value::Nil)),
                ("pattern", opt_str(p.pattern.as_deref())),
                ("maps_to", opt_str(p.maps_to.map(SpecField::as_str))),
            ])
        })
        .collect();
    let sd = &t.spec_defaults;
    let like_sd = get(like, "spec_defaults");
    let spec_defaults = if sd.is_empty() && like_sd.is_nil() {
        Value::Nil
    } else {
        let like_path = get(get(like_sd, "readiness_probe"), "http_path");
        let probe = sd.readiness_probe.as_ref().map(|p| {
            // "/" is the default path: keep it null where the user left it out.
            let path = p.http.as_ref().map(|h| h.path.as_str()).filter(|path| *path != "/" || !like_path.is_nil());
            object(vec![
                ("http_port", opt_num(p.http.as_ref().map(|h| i64::from(h.port)))),
                ("http_path", opt_str(path)),
                ("tcp_port", opt_num(p.tcp.as_ref().map(|t| i64::from(t.port)))),
                ("period_seconds", opt_num(p.period_seconds.map(i64::from))),
                ("timeout_seconds", opt_num(p.timeout_seconds.map(i64::from))),
            ])
        });
        object(vec![
            ("cpu_cores", opt_num(sd.cpu_cores.map(i64::from))),
            ("memory", opt_str(sd.memory.as_ref().map(Quantity::as_str))),
            ("disk_size", opt_str(sd.disk_size.as_ref().map(Quantity::as_str))),
            ("image", opt_str(sd.image.as_deref())),
            ("user_data", opt_str(sd.user_data.as_deref())),
            ("ssh_keys", keep_null(Value::Array(sd.ssh_keys.iter().map(|k| Value::from(k.as_str())).collect()), get(like_sd, "ssh_keys"))),
            ("readiness_probe", probe.unwrap_or(Value::Nil)),
            (
                "exposed_port",
                Value::Array(
                    sd.exposed_ports
                        .iter()
                        .enumerate()
                        .map(|(i, p)| {
                            let lp = items(get(like_sd, "exposed_port")).get(i).unwrap_or(&Value::Nil);
                            let proto = if p.protocol == Protocol::Tcp && get(lp, "protocol").is_nil() {
                                Value::Nil
                            } else {
                                Value::from(p.protocol.as_str())
                            };
                            object(vec![
                                ("port", Value::from(i64::from(p.port))),
                                ("protocol", proto),
                                ("name", opt_str(p.name.as_deref())),
                            ])
                        })
                        .collect(),
                ),
            ),
            (
                "gpu",
                Value::Array(
                    sd.gpus
                        .iter()
                        .map(|g| object(vec![("name", Value::from(g.name.as_str())), ("device_name", Value::from(g.device_name.as_str()))]))
                        .collect(),
                ),
            ),
        ])
    };
    object(vec![
        ("id", Value::from(t.id.as_str())),
        ("title", keep_null(Value::from(t.title.as_str()), get(like, "title"))),
        ("description", keep_null(Value::from(t.description.as_str()), get(like, "description"))),
        ("parameter", Value::Array(params)),
        ("spec_defaults", spec_defaults),
    ])
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

    fn seed() -> VirtualMachineTemplate {
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
        assert!(get(&items(get(&tf, "parameter"))[0], "required").is_nil());
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
