//! The `vmaas_template` resource's plan and state as one typed value, the
//! model's [`VirtualMachineTemplate`]: decoded once from Terraform's value
//! ([`from_tf`]) and encoded back once ([`to_tf`]), keeping the user's
//! nulls so that nothing drifts.

use rmpv::Value;
use vmaas_model::spec::{HttpProbe, TcpProbe};
use vmaas_model::{
    DataDisk, DiskBus, ExposedPort, Firmware, Gpu, GuestOsFamily, NicModel, ParameterDefinition, ParameterType, ParameterValue, Protocol,
    Quantity, ReadinessProbe, SpecDefaults, SpecField, VirtualMachineTemplate, scheduling::Toleration,
};

use crate::value::{get, object, string};

fn num(v: &Value) -> Option<i64> {
    v.as_i64().or_else(|| v.as_f64().map(|f| f as i64))
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect()).unwrap_or_default()
}

pub(crate) fn items(v: &Value) -> &[Value] {
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

/// A word of `spec_defaults` (`firmware = "efi"`) read by `parse`, if set.
/// The word at `key` of `v`, parsed; an unknown one is an error naming
/// `block.key` (`spec_defaults.data_disk.bus`).
fn word<T>(v: &Value, block: &str, key: &str, parse: fn(&str) -> Option<T>) -> Result<Option<T>, String> {
    string(get(v, key)).map(|w| parse(&w).ok_or_else(|| format!("{block}.{key}: unknown value {w:?}"))).transpose()
}

fn count(v: &Value, key: &str) -> Option<u32> {
    num(get(v, key)).map(|n| n.clamp(0, i64::from(u32::MAX)) as u32)
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
                pci_device_selector: None,
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
        data_disks: items(get(sd, "data_disk"))
            .iter()
            .map(|d| {
                let size = string(get(d, "size")).unwrap_or_default();
                let size = Quantity::parse(&size).map_err(|e| format!("spec_defaults.data_disk.size: {e}"))?;
                Ok(DataDisk {
                    name: string(get(d, "name")).unwrap_or_default(),
                    size,
                    bus: word(d, "spec_defaults.data_disk", "bus", DiskBus::parse)?,
                    storage_class: string(get(d, "storage_class")),
                    preallocation: get(d, "preallocation").as_bool(),
                })
            })
            .collect::<Result<_, String>>()?,
        instance_type: string(get(sd, "instance_type")),
        instance_types: strings(get(sd, "instance_types")),
        max_cpu_cores: num(get(sd, "max_cpu_cores")).map(|n| n as u32),
        max_memory: quantity("max_memory")?,
        firmware: word(sd, "spec_defaults", "firmware", Firmware::parse)?,
        secure_boot: get(sd, "secure_boot").as_bool(),
        tpm: get(sd, "tpm").as_bool(),
        guest_os_family: word(sd, "spec_defaults", "guest_os_family", GuestOsFamily::parse)?,
        cpu_sockets: count(sd, "cpu_sockets"),
        cpu_threads: count(sd, "cpu_threads"),
        disk_bus: word(sd, "spec_defaults", "disk_bus", DiskBus::parse)?,
        disk_storage_class: string(get(sd, "disk_storage_class")),
        disk_preallocation: get(sd, "disk_preallocation").as_bool(),
        nic_model: word(sd, "spec_defaults", "nic_model", NicModel::parse)?,
        network_interface_multiqueue: get(sd, "network_interface_multiqueue").as_bool(),
        rng: get(sd, "rng").as_bool(),
        tablet: get(sd, "tablet").as_bool(),
        log_serial_console: get(sd, "log_serial_console").as_bool(),
        termination_grace_period_seconds: count(sd, "termination_grace_period_seconds"),
        machine_type: string(get(sd, "machine_type")),
        architecture: string(get(sd, "architecture")),
        node_selector: string_map(get(sd, "node_selector")),
        tolerations: items(get(sd, "toleration")).iter().map(toleration).collect::<Result<_, String>>()?,
        affinity: string(get(sd, "affinity"))
            .map(|a| serde_json::from_str(&a).map_err(|e| format!("spec_defaults.affinity: not JSON: {e}")))
            .transpose()?,
        dedicated_cpus: get(sd, "dedicated_cpus").as_bool(),
        hugepages: string(get(sd, "hugepages")),
        labels: string_map(get(sd, "labels")),
        annotations: string_map(get(sd, "annotations")),
        instance_labels: string_map(get(sd, "instance_labels")),
        instance_annotations: string_map(get(sd, "instance_annotations")),
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
        Value::Map(m) => m.is_empty(),
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

fn string_map(v: &Value) -> std::collections::BTreeMap<String, String> {
    v.as_map().into_iter().flatten().filter_map(|(k, v)| Some((k.as_str()?.to_owned(), v.as_str()?.to_owned()))).collect()
}

/// A `toleration` block as the model's toleration.
fn toleration(t: &Value) -> Result<Toleration, String> {
    let word = |key: &str| string(get(t, key)).map(serde_json::Value::String);
    let unknown = |key: &str| format!("spec_defaults.toleration.{key}: unknown value {:?}", string(get(t, key)).unwrap_or_default());
    Ok(Toleration {
        key: string(get(t, "key")),
        operator: word("operator").map(serde_json::from_value).transpose().map_err(|_| unknown("operator"))?,
        value: string(get(t, "value")),
        effect: word("effect").map(serde_json::from_value).transpose().map_err(|_| unknown("effect"))?,
        toleration_seconds: num(get(t, "toleration_seconds")),
    })
}

/// A toleration as its `toleration` block.
fn toleration_tf(t: &Toleration) -> Value {
    let word = |w: Option<serde_json::Value>| w.and_then(|w| w.as_str().map(Value::from)).unwrap_or(Value::Nil);
    object(vec![
        ("key", opt_str(t.key.as_deref())),
        ("operator", word(t.operator.map(|o| serde_json::json!(o)))),
        ("value", opt_str(t.value.as_deref())),
        ("effect", word(t.effect.map(|e| serde_json::json!(e)))),
        ("toleration_seconds", opt_num(t.toleration_seconds)),
    ])
}

/// The affinity as JSON text: the user's own text where it says the same.
/// A string map as Terraform holds it (null when empty and `like` is null).
fn map_tf(m: &std::collections::BTreeMap<String, String>, like: &Value) -> Value {
    keep_null(Value::Map(m.iter().map(|(k, v)| (Value::from(k.as_str()), Value::from(v.as_str()))).collect()), like)
}

fn keep_affinity(a: Option<&serde_json::Value>, like: &Value) -> Value {
    let Some(a) = a else { return Value::Nil };
    let same = string(like).and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok()).is_some_and(|l| &l == a);
    if same { like.clone() } else { Value::from(a.to_string()) }
}

fn opt_bool(b: Option<bool>) -> Value {
    b.map(Value::Boolean).unwrap_or(Value::Nil)
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
            ("instance_type", opt_str(sd.instance_type.as_deref())),
            (
                "instance_types",
                keep_null(
                    Value::Array(sd.instance_types.iter().map(|k| Value::from(k.as_str())).collect()),
                    get(like_sd, "instance_types"),
                ),
            ),
            ("max_cpu_cores", opt_num(sd.max_cpu_cores.map(i64::from))),
            ("max_memory", opt_str(sd.max_memory.as_ref().map(Quantity::as_str))),
            ("firmware", opt_str(sd.firmware.map(Firmware::as_str))),
            ("secure_boot", sd.secure_boot.map(Value::Boolean).unwrap_or(Value::Nil)),
            ("tpm", sd.tpm.map(Value::Boolean).unwrap_or(Value::Nil)),
            ("guest_os_family", opt_str(sd.guest_os_family.map(GuestOsFamily::as_str))),
            ("cpu_sockets", opt_num(sd.cpu_sockets.map(i64::from))),
            ("cpu_threads", opt_num(sd.cpu_threads.map(i64::from))),
            ("disk_bus", opt_str(sd.disk_bus.map(DiskBus::as_str))),
            ("disk_storage_class", opt_str(sd.disk_storage_class.as_deref())),
            ("disk_preallocation", opt_bool(sd.disk_preallocation)),
            ("nic_model", opt_str(sd.nic_model.map(NicModel::as_str))),
            ("network_interface_multiqueue", opt_bool(sd.network_interface_multiqueue)),
            ("rng", opt_bool(sd.rng)),
            ("tablet", opt_bool(sd.tablet)),
            ("log_serial_console", opt_bool(sd.log_serial_console)),
            ("termination_grace_period_seconds", opt_num(sd.termination_grace_period_seconds.map(i64::from))),
            ("machine_type", opt_str(sd.machine_type.as_deref())),
            ("architecture", opt_str(sd.architecture.as_deref())),
            ("node_selector", map_tf(&sd.node_selector, get(like_sd, "node_selector"))),
            ("labels", map_tf(&sd.labels, get(like_sd, "labels"))),
            ("annotations", map_tf(&sd.annotations, get(like_sd, "annotations"))),
            ("instance_labels", map_tf(&sd.instance_labels, get(like_sd, "instance_labels"))),
            ("instance_annotations", map_tf(&sd.instance_annotations, get(like_sd, "instance_annotations"))),
            ("toleration", Value::Array(sd.tolerations.iter().map(toleration_tf).collect())),
            ("affinity", keep_affinity(sd.affinity.as_ref(), get(like_sd, "affinity"))),
            ("dedicated_cpus", opt_bool(sd.dedicated_cpus)),
            ("hugepages", opt_str(sd.hugepages.as_deref())),
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
                "data_disk",
                Value::Array(
                    sd.data_disks
                        .iter()
                        .map(|d| {
                            object(vec![
                                ("name", Value::from(d.name.as_str())),
                                ("size", Value::from(d.size.as_str())),
                                ("bus", opt_str(d.bus.map(DiskBus::as_str))),
                                ("storage_class", opt_str(d.storage_class.as_deref())),
                                ("preallocation", opt_bool(d.preallocation)),
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
