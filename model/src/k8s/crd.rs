//! Typed subsets of the objects rendered: KubeVirt `VirtualMachine`, CDI
//! `DataVolume` templates, OVN-Kubernetes `UserDefinedNetwork` and
//! `ClusterUserDefinedNetwork`. Only the fields vmaas sets are modelled;
//! tests check every rendered object against the upstream schemas.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `kubevirt.io/v1` VirtualMachine spec (subset).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(group = "kubevirt.io", version = "v1", kind = "VirtualMachine", namespaced)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineSpec {
    /// `Always` (started) or `Halted` (stopped).
    pub run_strategy: String,
    /// Disks created with the VM.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data_volume_templates: Vec<DataVolumeTemplate>,
    /// The VMI template.
    pub template: VmiTemplate,
    /// The cluster instance type that gives the vCPUs, memory and GPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instancetype: Option<super::platform::Matcher>,
    /// The cluster preference that gives the firmware, features, clock and TPM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preference: Option<super::platform::Matcher>,
}

/// A CDI DataVolume template inside a VM.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataVolumeTemplate {
    /// Object metadata (the name).
    pub metadata: ObjectMeta,
    /// The DataVolume spec.
    pub spec: DataVolumeSpec,
}

/// Minimal object metadata.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    /// Name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// `cdi.kubevirt.io/v1beta1` DataVolume spec (subset): in a VM's
/// templates, or a DataVolume of its own (a volume that outlives VMs).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(group = "cdi.kubevirt.io", version = "v1beta1", kind = "DataVolume", namespaced)]
#[serde(rename_all = "camelCase")]
pub struct DataVolumeSpec {
    /// The image to clone, as a DataSource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_ref: Option<SourceRef>,
    /// Another source, e.g. `{"blank": {}}` for an empty disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Value>,
    /// Size (and class) of the volume.
    pub storage: Storage,
    /// Whether its space is allocated when it is made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preallocation: Option<bool>,
}

/// A reference to a CDI DataSource.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceRef {
    /// Always `DataSource`.
    pub kind: String,
    /// The DataSource (the image name).
    pub name: String,
    /// Where the DataSources live.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// Storage of a DataVolume.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Storage {
    /// `{requests: {storage: 30Gi}}`.
    pub resources: Resources,
    /// Storage class, if not the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,
}

/// Resource requests.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct Resources {
    /// e.g. `storage: 30Gi`.
    pub requests: BTreeMap<String, String>,
}

/// The VMI template of a VM.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct VmiTemplate {
    /// Labels (propagated to the launcher pod) and annotations.
    pub metadata: ObjectMeta,
    /// The VMI spec.
    pub spec: VmiSpec,
}

/// VMI spec (subset).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VmiSpec {
    /// CPU, memory and devices.
    pub domain: Domain,
    /// `LiveMigrate`: survive node maintenance.
    pub eviction_strategy: String,
    /// Networks the interfaces attach to.
    pub networks: Vec<Network>,
    /// Volumes the disks use.
    pub volumes: Vec<Volume>,
    /// Readiness probe, from the template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Value>")]
    pub readiness_probe: Option<Value>,
    /// `amd64`, when the template names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub architecture: Option<String>,
    /// Seconds the guest has to shut down when stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period_seconds: Option<u32>,
    /// Node labels a node must have.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Taints tolerated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(with = "Vec<serde_json::Value>")]
    pub tolerations: Vec<k8s_openapi::api::core::v1::Toleration>,
    /// Kubernetes' affinity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Value>")]
    pub affinity: Option<Value>,
}

/// Domain (subset).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct Domain {
    /// CPU topology (none when an instance type gives it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Cpu>,
    /// Guest memory (none when an instance type gives it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Memory>,
    /// Disks, interfaces, GPUs.
    pub devices: Devices,
    /// EFI, when the guest's profile asks for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firmware: Option<super::platform::Firmware>,
    /// SMM (Secure Boot) and Hyper-V (Windows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub features: Option<super::platform::Features>,
    /// The clock, for Windows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Value>")]
    pub clock: Option<Value>,
    /// The machine type, when the template names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<Machine>,
}

/// The emulated machine.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct Machine {
    /// e.g. `pc-q35-rhel9.2.0`.
    #[serde(rename = "type")]
    pub kind: String,
}

/// CPU topology.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Cpu {
    /// Cores (per socket).
    pub cores: u32,
    /// Sockets (a VM resized live has one core in each, and KubeVirt's
    /// `LiveUpdate` adds sockets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sockets: Option<u32>,
    /// Threads per core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<u32>,
    /// The most sockets the running VM can grow to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_sockets: Option<u32>,
    /// Each vCPU pinned to a host CPU of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedicated_cpu_placement: Option<bool>,
}

/// Guest memory.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Memory {
    /// e.g. `4Gi`.
    pub guest: String,
    /// The most memory the running VM can grow to (`LiveUpdate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_guest: Option<String>,
    /// Huge pages backing it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hugepages: Option<Hugepages>,
}

/// Huge pages.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Hugepages {
    /// `2Mi` or `1Gi`.
    pub page_size: String,
}

/// Devices (subset).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct Devices {
    /// Disks.
    pub disks: Vec<Disk>,
    /// Interfaces.
    pub interfaces: Vec<Interface>,
    /// GPUs passed through, as host devices (KubeVirt's current way: the
    /// cluster's KubeVirt CR lists them in `permittedHostDevices`).
    #[serde(default, skip_serializing_if = "Vec::is_empty", rename = "hostDevices")]
    pub host_devices: Vec<GpuDevice>,
    /// A persistent TPM 2.0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpm: Option<super::platform::Tpm>,
    /// A tablet, an RNG, multiqueue, serial console logging.
    #[serde(flatten)]
    pub extra: ExtraDevices,
}

/// The devices beyond disks, interfaces, GPUs and the TPM.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExtraDevices {
    /// A USB tablet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<Input>,
    /// One queue per vCPU on each virtio NIC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_interface_multiqueue: Option<bool>,
    /// `{}`: a virtio RNG.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Value>")]
    pub rng: Option<Value>,
    /// Whether the serial console is logged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_serial_console: Option<bool>,
}

/// An input device.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct Input {
    /// `usb`.
    pub bus: String,
    /// `tablet`.
    pub name: String,
    /// `tablet`.
    #[serde(rename = "type")]
    pub kind: String,
}

/// A disk.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct Disk {
    /// Name of its volume.
    pub name: String,
    /// `{bus: virtio}` (`scsi` for a hotpluggable volume).
    pub disk: DiskTarget,
    /// The serial the guest sees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
}

/// Disk bus.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct DiskTarget {
    /// `virtio`.
    pub bus: String,
}

/// A network interface.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct Interface {
    /// Name of its network.
    pub name: String,
    /// `masquerade` on the pod network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Value>")]
    pub masquerade: Option<Value>,
    /// `bridge` on a secondary (Multus) network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Value>")]
    pub bridge: Option<Value>,
    /// `{name: l2bridge}` on a primary user-defined network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binding: Option<Binding>,
    /// Guest ports (masquerade).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<Port>,
    /// `virtio`, `e1000e`…
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Its MAC; none: KubeVirt picks one.
    #[serde(default, rename = "macAddress", skip_serializing_if = "Option::is_none")]
    pub mac_address: Option<String>,
}

/// A network binding plugin.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct Binding {
    /// e.g. `l2bridge`.
    pub name: String,
}

/// A port on an interface.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct Port {
    /// Port number.
    pub port: u16,
    /// `TCP` or `UDP`.
    pub protocol: String,
}

/// A GPU: `{name, deviceName}`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GpuDevice {
    /// Name in the VM.
    pub name: String,
    /// Host resource name.
    pub device_name: String,
}

/// A network: the pod network, or a Multus network (the attachment
/// definition OVN-K creates for a user-defined network).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct Network {
    /// Name.
    pub name: String,
    /// `{}` for the pod network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Value>")]
    pub pod: Option<Value>,
    /// The Multus network, for a secondary one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multus: Option<Multus>,
}

/// A Multus network reference.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Multus {
    /// `[namespace/]name` of the network attachment definition.
    pub network_name: String,
}

/// A volume.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    /// Name.
    pub name: String,
    /// From a DataVolume (a template of the VM's, or one of its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_volume: Option<DataVolumeRef>,
    /// Cloud-init.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_init_no_cloud: Option<CloudInit>,
}

/// A volume's DataVolume.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct DataVolumeRef {
    /// The DataVolume's name.
    pub name: String,
    /// Whether it can be plugged into and out of the running VM.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hotpluggable: bool,
}

/// Cloud-init NoCloud data.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloudInit {
    /// User data (with the SSH keys).
    pub user_data: String,
    /// Network configuration (version 2), when the guest's NICs are not
    /// all configured by DHCP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_data: Option<String>,
}

/// `k8s.ovn.org/v1` UserDefinedNetwork spec.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(group = "k8s.ovn.org", version = "v1", kind = "UserDefinedNetwork", namespaced)]
pub struct UserDefinedNetworkSpec {
    /// `Layer2`.
    pub topology: String,
    /// The layer-2 network.
    pub layer2: Layer2,
}

/// A layer-2 network.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct Layer2 {
    /// `Primary`: the network replaces the pod network in its namespace.
    pub role: String,
    /// CIDRs.
    pub subnets: Vec<String>,
    /// `{lifecycle: Persistent}`: VMs keep their IPs across migrations.
    pub ipam: Ipam,
}

/// IP address management.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct Ipam {
    /// `Persistent`.
    pub lifecycle: String,
}

/// `k8s.ovn.org/v1` ClusterUserDefinedNetwork spec (the localnet variant).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(group = "k8s.ovn.org", version = "v1", kind = "ClusterUserDefinedNetwork")]
#[serde(rename_all = "camelCase")]
pub struct ClusterUserDefinedNetworkSpec {
    /// Which namespaces get the network.
    #[schemars(with = "serde_json::Value")]
    pub namespace_selector: Value,
    /// The network.
    #[schemars(with = "serde_json::Value")]
    pub network: Value,
}
