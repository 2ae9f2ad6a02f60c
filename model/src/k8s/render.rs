//! Pure rendering: a VM (or a private network) in the vmaas model, resolved
//! with the shared model crate, into the Kubernetes objects that run it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Namespace, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta as K8sMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use crate::{ParameterValue, PowerState, ProbeCheck, Protocol, ResolvedSpec, Template, ValidationErrors, VirtualMachineTemplate};

use super::crd::*;

/// Label on the launcher pod that the LoadBalancer selects.
pub const VM_LABEL: &str = "vmaas.io/vm";
/// Label of a namespace whose primary network is a user-defined network.
pub const PRIMARY_UDN_LABEL: &str = "k8s.ovn.org/primary-user-defined-network";

/// How floating IPs are implemented.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FloatingIp {
    /// `metallb` (default) or `esi`.
    #[serde(default = "metallb")]
    pub provider: String,
    /// MetalLB address pool (or ESI network) to take the IP from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address_pool: Option<String>,
}

fn metallb() -> String {
    "metallb".into()
}

/// The function's input (`vmaas.fn.io/v1alpha1` `Input`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FunctionInput {
    /// Always `vmaas.fn.io/v1alpha1`.
    #[serde(default)]
    pub api_version: String,
    /// Always `Input`.
    #[serde(default)]
    pub kind: String,
    /// Template catalog, inline.
    #[serde(default)]
    pub templates: Vec<VirtualMachineTemplate>,
    /// Also read cluster-scoped `VirtualMachineTemplate` objects (`vmaas.io/v1alpha1`).
    #[serde(default)]
    pub templates_from_cluster: bool,
    /// Floating IP implementation.
    #[serde(default)]
    pub floating_ip: FloatingIp,
    /// Namespace of the CDI DataSources that images name.
    #[serde(default = "default_ds_namespace")]
    pub data_source_namespace: String,
    /// Storage class of boot disks (the cluster default when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class: Option<String>,
}

fn default_ds_namespace() -> String {
    "openshift-virtualization-os-images".into()
}

/// The `spec` of a `VirtualMachine` XR.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VmXrSpec {
    /// Template id.
    pub template: String,
    /// Parameters: `{name: value}` or `{name: {value: ...}}`.
    #[serde(default)]
    pub template_parameters: BTreeMap<String, Value>,
    /// `started` (default) or `stopped`.
    #[serde(default)]
    pub state: PowerState,
    /// A `VirtualPrivateNetwork` XR's name, or an inline CIDR such as `10.200.0.0/16`.
    #[serde(default)]
    pub network: Option<String>,
    /// Ports exposed on the floating IP (the template's when empty).
    #[serde(default)]
    pub expose: Vec<u16>,
    /// SSH public keys.
    #[serde(default)]
    pub ssh_keys: Vec<String>,
    /// Cloud-init user data.
    #[serde(default)]
    pub user_data: Option<String>,
    /// Crossplane's own fields are passed through untouched.
    #[serde(flatten)]
    pub crossplane: BTreeMap<String, Value>,
}

/// The `spec` of a `VirtualPrivateNetwork` XR.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkXrSpec {
    /// The subnet, e.g. `192.168.100.0/24`.
    pub ipv4_cidr: String,
    /// Attach to this physical network (localnet) instead of an overlay.
    #[serde(default)]
    pub localnet: Option<String>,
}

/// Everything rendered for one VM.
#[derive(Debug, Clone, Serialize)]
pub struct RenderedVm {
    /// The namespace the VM lives in.
    pub namespace_name: String,
    /// The namespace, when the VM owns it.
    pub namespace: Option<Namespace>,
    /// Its private network, when given inline.
    pub udn: Option<UserDefinedNetwork>,
    /// The KubeVirt VM.
    pub vm: VirtualMachine,
    /// The floating IP, when ports are exposed.
    pub service: Option<Service>,
}

/// Namespace of a VM's own objects.
pub fn vm_namespace(xr_name: &str) -> String {
    format!("vmaas-{xr_name}")
}

/// Namespace of a private network (and the VMs on it).
pub fn network_namespace(network: &str) -> String {
    format!("vmaas-net-{network}")
}

fn namespace(name: &str, primary_udn: bool) -> Namespace {
    let mut labels = BTreeMap::from([("app.kubernetes.io/managed-by".to_owned(), "function-vmaas".to_owned())]);
    if primary_udn {
        labels.insert(PRIMARY_UDN_LABEL.into(), String::new());
    }
    Namespace { metadata: K8sMeta { name: Some(name.into()), labels: Some(labels), ..Default::default() }, ..Default::default() }
}

fn udn(name: &str, ns: &str, cidr: &str) -> UserDefinedNetwork {
    let mut u = UserDefinedNetwork::new(
        name,
        UserDefinedNetworkSpec {
            topology: "Layer2".into(),
            layer2: Layer2 { role: "Primary".into(), subnets: vec![cidr.into()], ipam: Ipam { lifecycle: "Persistent".into() } },
        },
    );
    u.metadata.namespace = Some(ns.into());
    u
}

/// Wraps bare parameter values as `{"value": ...}`.
pub fn wrap_parameters(p: &BTreeMap<String, Value>) -> BTreeMap<String, ParameterValue> {
    p.iter()
        .map(|(k, v)| {
            let value = match v {
                Value::Object(o) if o.len() == 1 && o.contains_key("value") => o["value"].clone(),
                other => other.clone(),
            };
            (k.clone(), ParameterValue::new(value))
        })
        .collect()
}

fn cloud_init(spec: &ResolvedSpec, xr: &VmXrSpec) -> String {
    let keys: Vec<&String> = spec.ssh_keys.iter().chain(xr.ssh_keys.iter()).collect();
    let user = xr.user_data.as_ref().or(spec.user_data.as_ref());
    match user {
        Some(u) if keys.is_empty() => u.clone(),
        Some(u) if u.starts_with("#cloud-config") => {
            let list: Vec<String> = keys.iter().map(|k| format!("  - {k}")).collect();
            format!("{}\nssh_authorized_keys:\n{}\n", u.trim_end(), list.join("\n"))
        }
        _ => {
            let mut s = String::from("#cloud-config\n");
            if !keys.is_empty() {
                s.push_str("ssh_authorized_keys:\n");
                for k in keys {
                    s.push_str(&format!("  - {k}\n"));
                }
            }
            s
        }
    }
}

/// Renders the VM of XR `name`: validates its parameters against `template`
/// (every problem, with the same messages as the server), then builds the objects.
pub fn render_vm(name: &str, xr: &VmXrSpec, template: &Template, input: &FunctionInput) -> Result<RenderedVm, ValidationErrors> {
    let resolved = template.resolve(&wrap_parameters(&xr.template_parameters), "spec.templateParameters")?;
    let spec = resolved.spec;
    let (ns, own_ns, inline_cidr) = match xr.network.as_deref() {
        Some(cidr) if cidr.contains('/') => (vm_namespace(name), true, Some(cidr)),
        Some(net) => (network_namespace(net), false, None),
        None => (vm_namespace(name), true, None),
    };
    let on_udn = xr.network.is_some();
    let mut ports: Vec<(u16, Protocol)> = spec.exposed_ports.iter().map(|p| (p.port, p.protocol)).collect();
    if !xr.expose.is_empty() {
        ports = xr.expose.iter().map(|p| (*p, Protocol::Tcp)).collect();
    }
    let proto = |p: Protocol| if p == Protocol::Udp { "UDP" } else { "TCP" }.to_owned();
    let interface = if on_udn {
        Interface { name: "default".into(), masquerade: None, binding: Some(Binding { name: "l2bridge".into() }), ports: vec![] }
    } else {
        Interface { name: "default".into(), masquerade: Some(json!({})), binding: None, ports: ports.iter().map(|(p, pr)| Port { port: *p, protocol: proto(*pr) }).collect() }
    };
    let readiness_probe = spec.readiness_probe.as_ref().map(|p| {
        let check = match &p.check {
            ProbeCheck::Http { port, path } => json!({"httpGet": {"port": port, "path": path}}),
            ProbeCheck::Tcp { port } => json!({"tcpSocket": {"port": port}}),
        };
        let mut v = check;
        v["periodSeconds"] = json!(p.period_seconds);
        v["failureThreshold"] = json!((p.timeout_seconds / p.period_seconds.max(1)).max(1));
        v
    });
    let root = format!("{name}-root");
    let labels = BTreeMap::from([(VM_LABEL.to_owned(), name.to_owned())]);
    let mut vm = VirtualMachine::new(
        name,
        VirtualMachineSpec {
            run_strategy: if xr.state == PowerState::Started { "Always" } else { "Halted" }.into(),
            data_volume_templates: vec![DataVolumeTemplate {
                metadata: ObjectMeta { name: Some(root.clone()), ..Default::default() },
                spec: DataVolumeSpec {
                    source_ref: SourceRef { kind: "DataSource".into(), name: spec.image.clone(), namespace: Some(input.data_source_namespace.clone()) },
                    storage: Storage {
                        resources: Resources { requests: BTreeMap::from([("storage".to_owned(), spec.disk_size.as_str().to_owned())]) },
                        storage_class_name: input.storage_class.clone(),
                    },
                },
            }],
            template: VmiTemplate {
                metadata: ObjectMeta { name: None, labels: labels.clone(), annotations: BTreeMap::new() },
                spec: VmiSpec {
                    domain: Domain {
                        cpu: Cpu { cores: spec.cpu_cores },
                        memory: Memory { guest: spec.memory.as_str().to_owned() },
                        devices: Devices {
                            disks: vec![
                                Disk { name: "rootdisk".into(), disk: DiskTarget { bus: "virtio".into() } },
                                Disk { name: "cloudinitdisk".into(), disk: DiskTarget { bus: "virtio".into() } },
                            ],
                            interfaces: vec![interface],
                            gpus: spec.gpus.iter().map(|g| GpuDevice { name: g.name.clone(), device_name: g.device_name.clone() }).collect(),
                        },
                    },
                    eviction_strategy: "LiveMigrate".into(),
                    networks: vec![Network { name: "default".into(), pod: json!({}) }],
                    volumes: vec![
                        Volume { name: "rootdisk".into(), data_volume: Some(NamedRef { name: root }), cloud_init_no_cloud: None },
                        Volume { name: "cloudinitdisk".into(), data_volume: None, cloud_init_no_cloud: Some(CloudInit { user_data: cloud_init(&spec, xr) }) },
                    ],
                    readiness_probe,
                },
            },
        },
    );
    vm.metadata.namespace = Some(ns.clone());
    vm.metadata.labels = Some(labels.clone());
    let service = (!ports.is_empty()).then(|| {
        let mut annotations = BTreeMap::from([("vmaas.io/floating-ip-provider".to_owned(), input.floating_ip.provider.clone())]);
        if let Some(pool) = &input.floating_ip.address_pool {
            let key = if input.floating_ip.provider == "esi" { "vmaas.io/esi-network" } else { "metallb.io/address-pool" };
            annotations.insert(key.into(), pool.clone());
        }
        Service {
            metadata: K8sMeta { name: Some(format!("{name}-floating-ip")), namespace: Some(ns.clone()), annotations: Some(annotations), labels: Some(labels.clone()), ..Default::default() },
            spec: Some(ServiceSpec {
                type_: Some("LoadBalancer".into()),
                selector: Some(labels.clone()),
                ports: Some(
                    ports
                        .iter()
                        .map(|(p, pr)| ServicePort { name: Some(format!("{}-{p}", proto(*pr).to_lowercase())), port: i32::from(*p), target_port: Some(IntOrString::Int(i32::from(*p))), protocol: Some(proto(*pr)), ..Default::default() })
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }
    });
    Ok(RenderedVm {
        namespace: own_ns.then(|| namespace(&ns, inline_cidr.is_some())),
        udn: inline_cidr.map(|c| udn(name, &ns, c)),
        namespace_name: ns,
        vm,
        service,
    })
}

/// What a private network renders to.
#[derive(Debug, Clone, Serialize)]
pub struct RenderedNetwork {
    /// Its namespace (labelled for a primary UDN).
    pub namespace: Namespace,
    /// The overlay network.
    pub udn: Option<UserDefinedNetwork>,
    /// The localnet variant.
    pub cudn: Option<ClusterUserDefinedNetwork>,
}

/// Renders the `VirtualPrivateNetwork` XR `name`.
pub fn render_network(name: &str, spec: &NetworkXrSpec) -> RenderedNetwork {
    let ns = network_namespace(name);
    match &spec.localnet {
        None => RenderedNetwork { namespace: namespace(&ns, true), udn: Some(udn(name, &ns, &spec.ipv4_cidr)), cudn: None },
        Some(physical) => RenderedNetwork {
            namespace: namespace(&ns, false),
            udn: None,
            cudn: Some(ClusterUserDefinedNetwork::new(
                name,
                ClusterUserDefinedNetworkSpec {
                    namespace_selector: json!({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": [ns]}]}),
                    network: json!({
                        "topology": "Localnet",
                        "localnet": {"role": "Secondary", "physicalNetworkName": physical, "subnets": [spec.ipv4_cidr], "ipam": {"mode": "Enabled", "lifecycle": "Persistent"}}
                    }),
                },
            )),
        },
    }
}
