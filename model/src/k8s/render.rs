//! Pure rendering: a [`MachineSpec`] plus plain options into the Kubernetes
//! objects that run it (a KubeVirt VM with its disks, a LoadBalancer
//! Service), and the namespaces and OVN-K networks they live in. The
//! Crossplane function and a KubeVirt backend both render through here.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Namespace, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta as K8sMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::crd::*;
use crate::machine::{DiskSource, MachineSpec};
use crate::{PowerState, ProbeCheck, Protocol};

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

/// How a VM's default NIC is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodNetwork {
    /// The cluster's pod network, masqueraded.
    Masquerade,
    /// The namespace's primary user-defined network, bridged at layer 2.
    PrimaryUdn,
}

/// Everything besides the machine that decides how a VM renders.
#[derive(Debug, Clone)]
pub struct VmOptions {
    /// Name of the KubeVirt VM (and prefix of its other objects).
    pub name: String,
    /// Namespace of the VM and its Service.
    pub namespace: String,
    /// Run or stay off.
    pub power: PowerState,
    /// How the default NIC is attached.
    pub network: PodNetwork,
    /// Namespace of the CDI DataSources that images name.
    pub data_source_namespace: String,
    /// Storage class of the disks (the cluster default when absent).
    pub storage_class: Option<String>,
    /// How the floating IP is implemented.
    pub floating_ip: FloatingIp,
}

/// Everything rendered for one VM.
#[derive(Debug, Clone, Serialize)]
pub struct RenderedVm {
    /// The KubeVirt VM.
    pub vm: VirtualMachine,
    /// The floating IP, when ports are exposed.
    pub service: Option<Service>,
}

/// A namespace managed by vmaas, labelled for a primary UDN when asked.
pub fn namespace(name: &str, primary_udn: bool) -> Namespace {
    let mut labels = BTreeMap::from([("app.kubernetes.io/managed-by".to_owned(), "function-vmaas".to_owned())]);
    if primary_udn {
        labels.insert(PRIMARY_UDN_LABEL.into(), String::new());
    }
    Namespace { metadata: K8sMeta { name: Some(name.into()), labels: Some(labels), ..Default::default() }, ..Default::default() }
}

/// A primary layer-2 UDN `name` in namespace `ns` with subnet `cidr`, with persistent IPAM.
pub fn udn(name: &str, ns: &str, cidr: &str) -> UserDefinedNetwork {
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

/// A secondary localnet CUDN `name` on physical network `physical`, selecting namespace `ns`.
pub fn localnet_cudn(name: &str, ns: &str, physical: &str, cidr: &str) -> ClusterUserDefinedNetwork {
    ClusterUserDefinedNetwork::new(
        name,
        ClusterUserDefinedNetworkSpec {
            namespace_selector: json!({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": [ns]}]}),
            network: json!({
                "topology": "Localnet",
                "localnet": {"role": "Secondary", "physicalNetworkName": physical, "subnets": [cidr], "ipam": {"mode": "Enabled", "lifecycle": "Persistent"}}
            }),
        },
    )
}

/// The cloud-init user data of a machine: its user data as written, with
/// its SSH keys added (to a `#cloud-config`, or as one of its own).
pub fn cloud_init_user_data(c: &crate::machine::CloudInit) -> String {
    match &c.user_data {
        Some(u) if c.ssh_keys.is_empty() => u.clone(),
        Some(u) if u.starts_with("#cloud-config") => {
            let list: Vec<String> = c.ssh_keys.iter().map(|k| format!("  - {k}")).collect();
            format!("{}\nssh_authorized_keys:\n{}\n", u.trim_end(), list.join("\n"))
        }
        _ => {
            let mut s = String::from("#cloud-config\n");
            if !c.ssh_keys.is_empty() {
                s.push_str("ssh_authorized_keys:\n");
                for k in &c.ssh_keys {
                    s.push_str(&format!("  - {k}\n"));
                }
            }
            s
        }
    }
}

fn proto(p: Protocol) -> String {
    if p == Protocol::Udp { "UDP" } else { "TCP" }.to_owned()
}

fn readiness_probe(spec: &MachineSpec) -> Option<Value> {
    spec.readiness_probe.as_ref().map(|p| {
        let mut v = match &p.check {
            ProbeCheck::Http { port, path } => json!({"httpGet": {"port": port, "path": path}}),
            ProbeCheck::Tcp { port } => json!({"tcpSocket": {"port": port}}),
        };
        v["periodSeconds"] = json!(p.period_seconds);
        v["failureThreshold"] = json!((p.timeout_seconds / p.period_seconds.max(1)).max(1));
        v
    })
}

/// One DataVolume template, disk and volume per machine disk; the root disk
/// is named `rootdisk` and clones the boot image's DataSource.
fn disks(spec: &MachineSpec, o: &VmOptions) -> (Vec<DataVolumeTemplate>, Vec<Disk>, Vec<Volume>) {
    let (mut dvs, mut disks, mut volumes) = (Vec::new(), Vec::new(), Vec::new());
    for d in &spec.disks {
        let (disk_name, dv_name, source_ref, source) = match d.source {
            DiskSource::Image => (
                "rootdisk".to_owned(),
                format!("{}-root", o.name),
                Some(SourceRef {
                    kind: "DataSource".into(),
                    name: spec.boot.image.clone(),
                    namespace: Some(o.data_source_namespace.clone()),
                }),
                None,
            ),
            DiskSource::Blank => (d.name.clone(), format!("{}-{}", o.name, d.name), None, Some(json!({"blank": {}}))),
        };
        dvs.push(DataVolumeTemplate {
            metadata: ObjectMeta { name: Some(dv_name.clone()), ..Default::default() },
            spec: DataVolumeSpec {
                source_ref,
                source,
                storage: Storage {
                    resources: Resources { requests: BTreeMap::from([("storage".to_owned(), d.size.as_str().to_owned())]) },
                    storage_class_name: o.storage_class.clone(),
                },
            },
        });
        disks.push(Disk { name: disk_name.clone(), disk: DiskTarget { bus: "virtio".into() } });
        volumes.push(Volume { name: disk_name, data_volume: Some(NamedRef { name: dv_name }), cloud_init_no_cloud: None });
    }
    disks.push(Disk { name: "cloudinitdisk".into(), disk: DiskTarget { bus: "virtio".into() } });
    volumes.push(Volume {
        name: "cloudinitdisk".into(),
        data_volume: None,
        cloud_init_no_cloud: Some(CloudInit { user_data: cloud_init_user_data(&spec.cloud_init) }),
    });
    (dvs, disks, volumes)
}

fn interface(spec: &MachineSpec, o: &VmOptions) -> Interface {
    match o.network {
        PodNetwork::PrimaryUdn => {
            Interface { name: "default".into(), masquerade: None, binding: Some(Binding { name: "l2bridge".into() }), ports: vec![] }
        }
        PodNetwork::Masquerade => Interface {
            name: "default".into(),
            masquerade: Some(json!({})),
            binding: None,
            ports: spec.exposed_ports.iter().map(|p| Port { port: p.port, protocol: proto(p.protocol) }).collect(),
        },
    }
}

/// Renders the KubeVirt VM of `spec`, and its floating-IP Service when ports are exposed.
pub fn render_vm(spec: &MachineSpec, o: &VmOptions) -> RenderedVm {
    let labels = BTreeMap::from([(VM_LABEL.to_owned(), o.name.clone())]);
    let (data_volume_templates, disks, volumes) = disks(spec, o);
    let mut vm = VirtualMachine::new(
        &o.name,
        VirtualMachineSpec {
            run_strategy: if o.power == PowerState::Started { "Always" } else { "Halted" }.into(),
            data_volume_templates,
            template: VmiTemplate {
                metadata: ObjectMeta { name: None, labels: labels.clone(), annotations: BTreeMap::new() },
                spec: VmiSpec {
                    domain: Domain {
                        cpu: Cpu { cores: spec.cpu.cores },
                        memory: Memory { guest: spec.memory.as_str().to_owned() },
                        devices: Devices {
                            disks,
                            interfaces: vec![interface(spec, o)],
                            gpus: spec
                                .gpus
                                .iter()
                                .map(|g| GpuDevice { name: g.name.clone(), device_name: g.device_name.clone() })
                                .collect(),
                        },
                    },
                    eviction_strategy: "LiveMigrate".into(),
                    networks: vec![Network { name: "default".into(), pod: json!({}) }],
                    volumes,
                    readiness_probe: readiness_probe(spec),
                },
            },
        },
    );
    vm.metadata.namespace = Some(o.namespace.clone());
    vm.metadata.labels = Some(labels);
    RenderedVm { vm, service: service(spec, o) }
}

fn service(spec: &MachineSpec, o: &VmOptions) -> Option<Service> {
    if spec.exposed_ports.is_empty() {
        return None;
    }
    let labels = BTreeMap::from([(VM_LABEL.to_owned(), o.name.clone())]);
    let mut annotations = BTreeMap::from([("vmaas.io/floating-ip-provider".to_owned(), o.floating_ip.provider.clone())]);
    if let Some(pool) = &o.floating_ip.address_pool {
        let key = if o.floating_ip.provider == "esi" { "vmaas.io/esi-network" } else { "metallb.io/address-pool" };
        annotations.insert(key.into(), pool.clone());
    }
    let ports = spec
        .exposed_ports
        .iter()
        .map(|p| ServicePort {
            name: Some(format!("{}-{}", proto(p.protocol).to_lowercase(), p.port)),
            port: i32::from(p.port),
            target_port: Some(IntOrString::Int(i32::from(p.port))),
            protocol: Some(proto(p.protocol)),
            ..Default::default()
        })
        .collect();
    Some(Service {
        metadata: K8sMeta {
            name: Some(format!("{}-floating-ip", o.name)),
            namespace: Some(o.namespace.clone()),
            annotations: Some(annotations),
            labels: Some(labels.clone()),
            ..Default::default()
        },
        spec: Some(ServiceSpec { type_: Some("LoadBalancer".into()), selector: Some(labels), ports: Some(ports), ..Default::default() }),
        ..Default::default()
    })
}
