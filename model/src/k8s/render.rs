//! Pure rendering: a [`MachineSpec`] plus plain options into the Kubernetes
//! objects that run it (a KubeVirt VM with its disks, a LoadBalancer
//! Service), and the namespaces and OVN-K user-defined networks they live
//! in. The Crossplane function and a KubeVirt backend both render through here.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Namespace, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta as K8sMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::crd::*;
use super::names::derived;
use super::platform::Matcher;
pub use super::platform::Shapes;
use crate::machine::{DiskSource, MachineSpec};
use crate::{PowerState, ProbeCheck, Protocol};

/// Label on the launcher pod that the LoadBalancer selects.
pub const VM_LABEL: &str = "vmaas.io/vm";
/// Label of a namespace whose primary network is a user-defined network.
pub const PRIMARY_UDN_LABEL: &str = "k8s.ovn.org/primary-user-defined-network";
/// Label naming the tenant (a team's namespace) a vmaas namespace serves.
pub const TENANT_LABEL: &str = "vmaas.io/tenant";
/// Annotation of a VMI template asking OVN-K's IPAM for fixed addresses,
/// by the VM's network name: `{"default": ["10.0.0.5/24"]}` (KubeVirt's
/// IPAM extensions turn it into the launcher pod's network request).
pub const ADDRESSES_ANNOTATION: &str = "network.kubevirt.io/addresses";

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

impl FloatingIp {
    /// The annotations that ask the cluster's load balancer for an address
    /// of this kind, on a Service of type `LoadBalancer`.
    pub fn annotations(&self) -> BTreeMap<String, String> {
        let mut a = BTreeMap::from([("vmaas.io/floating-ip-provider".to_owned(), self.provider.clone())]);
        if let Some(pool) = &self.address_pool {
            let key = if self.provider == "esi" { "vmaas.io/esi-network" } else { "metallb.io/address-pool" };
            a.insert(key.into(), pool.clone());
        }
        a
    }
}

/// How a VM's first NIC is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodNetwork {
    /// The cluster's pod network, masqueraded.
    Masquerade,
    /// The namespace's primary user-defined network, bridged at layer 2.
    PrimaryUdn,
}

/// A secondary NIC: bridged onto a Multus network, the attachment
/// definition OVN-K creates for a user-defined network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// The interface's (and network's) name in the VM.
    pub name: String,
    /// The network attachment definition, `[namespace/]name`.
    pub network_name: String,
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
    /// How the first NIC (`default`, which carries the floating IP and the
    /// readiness probe) is attached.
    pub network: PodNetwork,
    /// The first NIC's fixed address on a primary UDN, in CIDR form
    /// (`10.0.0.5/24`): the guest gets exactly it from OVN-K's IPAM.
    pub address: Option<String>,
    /// NICs beside the first one (a physical network).
    pub attachments: Vec<Attachment>,
    /// Namespace of the CDI DataSources that images name.
    pub data_source_namespace: String,
    /// Storage class of the disks (the cluster default when absent).
    pub storage_class: Option<String>,
    /// How the floating IP is implemented.
    pub floating_ip: FloatingIp,
    /// Whether the VM carries its instance type and guest profile in its
    /// domain or references KubeVirt objects for them, cluster-wide or its own.
    pub shapes: Shapes,
    /// Claims the VM's disks already are, by disk (volume) name: a clone's,
    /// made by KubeVirt's clone from its source (`rootdisk` → `restore-…`).
    /// A disk named here keeps its DataVolume template under that name.
    pub claims: BTreeMap<String, String>,
}

/// Everything rendered for one VM.
#[derive(Debug, Clone, Serialize)]
pub struct RenderedVm {
    /// The KubeVirt VM.
    pub vm: VirtualMachine,
    /// The floating IP, when ports are exposed.
    pub service: Option<Service>,
    /// The instance type and preference the VM references (unless
    /// [`VmOptions::shapes`] is inline), to apply before it.
    pub shape_objects: Vec<Value>,
}

/// A namespace managed by vmaas for `tenant`, labelled for a primary UDN when asked.
pub fn namespace(name: &str, primary_udn: bool, tenant: &str) -> Namespace {
    let mut labels = BTreeMap::from([
        ("app.kubernetes.io/managed-by".to_owned(), "function-vmaas".to_owned()),
        (TENANT_LABEL.to_owned(), tenant.to_owned()),
    ]);
    if primary_udn {
        labels.insert(PRIMARY_UDN_LABEL.into(), String::new());
    }
    // The annotation records the tenant exactly (a label value is cut and cleaned).
    let annotations = BTreeMap::from([(TENANT_LABEL.to_owned(), tenant.to_owned())]);
    let metadata = K8sMeta { name: Some(name.into()), labels: Some(labels), annotations: Some(annotations), ..Default::default() };
    Namespace { metadata, ..Default::default() }
}

/// A primary layer-2 UDN `name` in namespace `ns` with subnet `cidr`, with
/// persistent IPAM (a VM keeps its address across live migrations, which
/// KubeVirt supports on layer-2 UDNs).
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

/// A physical (localnet) network as OVN-K offers it to namespaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Localnet<'a> {
    /// The bridge mapping's name on the nodes.
    pub physical_network: &'a str,
    /// The subnet OVN-K assigns addresses from, or none (the guests bring
    /// their own addresses, e.g. from the physical network's DHCP).
    pub cidr: Option<&'a str>,
    /// The access VLAN, if the network is tagged.
    pub vlan: Option<u16>,
    /// The tenants (teams' namespaces) whose VMs may attach: the CUDN
    /// selects the vmaas namespaces labelled for them.
    pub tenants: &'a [String],
}

/// A secondary localnet CUDN `name` on `net`, selecting its tenants' namespaces.
pub fn localnet_cudn(name: &str, net: &Localnet<'_>) -> ClusterUserDefinedNetwork {
    let mut localnet = json!({"role": "Secondary", "physicalNetworkName": net.physical_network});
    match net.cidr {
        Some(c) => {
            localnet["subnets"] = json!([c]);
            localnet["ipam"] = json!({"mode": "Enabled", "lifecycle": "Persistent"});
        }
        None => localnet["ipam"] = json!({"mode": "Disabled"}),
    }
    if let Some(id) = net.vlan {
        localnet["vlan"] = json!({"mode": "Access", "access": {"id": id}});
    }
    ClusterUserDefinedNetwork::new(
        name,
        ClusterUserDefinedNetworkSpec {
            namespace_selector: json!({"matchExpressions": [{"key": TENANT_LABEL, "operator": "In", "values": net.tenants}]}),
            network: json!({"topology": "Localnet", "localnet": localnet}),
        },
    )
}

/// Boundary of the MIME multipart user data (cloud-init's own format for
/// several parts).
const BOUNDARY: &str = "vmaas-user-data-part";

/// A `#cloud-config` document holding only `keys`.
fn keys_config(keys: &[String]) -> String {
    let mut s = String::from("#cloud-config\n");
    if !keys.is_empty() {
        s.push_str("ssh_authorized_keys:\n");
        for k in keys {
            s.push_str(&format!("  - {k}\n"));
        }
    }
    s
}

/// cloud-init's MIME type of a user-data document, from its first line.
fn user_data_type(u: &str) -> &'static str {
    const TYPES: [(&str, &str); 5] = [
        ("#!", "text/x-shellscript"),
        ("#cloud-boothook", "text/cloud-boothook"),
        ("#include", "text/x-include-url"),
        ("#part-handler", "text/part-handler"),
        ("## template: jinja", "text/jinja2"),
    ];
    TYPES.iter().find(|(prefix, _)| u.starts_with(prefix)).map(|(_, t)| *t).unwrap_or("text/plain")
}

/// The cloud-init user data of a machine: its user data as written, with
/// its SSH keys added: into a `#cloud-config`, or, beside any other kind of
/// user data (a script), as a second part of a MIME multipart document, so
/// that neither is lost.
pub fn cloud_init_user_data(c: &crate::machine::CloudInit) -> String {
    match &c.user_data {
        Some(u) if c.ssh_keys.is_empty() => u.clone(),
        Some(u) if u.starts_with("#cloud-config") => {
            let list: Vec<String> = c.ssh_keys.iter().map(|k| format!("  - {k}")).collect();
            format!("{}\nssh_authorized_keys:\n{}\n", u.trim_end(), list.join("\n"))
        }
        Some(u) => format!(
            "Content-Type: multipart/mixed; boundary=\"{BOUNDARY}\"\nMIME-Version: 1.0\n\n\
             --{BOUNDARY}\nContent-Type: text/cloud-config; charset=\"utf-8\"\n\n{keys}\n\
             --{BOUNDARY}\nContent-Type: {kind}; charset=\"utf-8\"\n\n{u}\n--{BOUNDARY}--\n",
            keys = keys_config(&c.ssh_keys),
            kind = user_data_type(u),
        ),
        None => keys_config(&c.ssh_keys),
    }
}

fn proto(p: Protocol) -> String {
    if p == Protocol::Udp { "UDP" } else { "TCP" }.to_owned()
}

/// Missed probes before a running guest counts as not ready.
const PROBE_FAILURES: u32 = 3;

fn readiness_probe(spec: &MachineSpec) -> Option<Value> {
    spec.readiness_probe.as_ref().map(|p| {
        let mut v = match &p.check {
            ProbeCheck::Http { port, path } => json!({"httpGet": {"port": port, "path": path}}),
            ProbeCheck::Tcp { port } => json!({"tcpSocket": {"port": port}}),
        };
        // A guest that stops answering is not ready after three misses; how
        // long it may take to boot is the status's business, not the probe's.
        v["periodSeconds"] = json!(p.period_seconds);
        v["failureThreshold"] = json!(PROBE_FAILURES);
        v
    })
}

/// One DataVolume template, disk and volume per machine disk; the root disk
/// is named `rootdisk` and clones the boot image's DataSource (or imports
/// it over HTTP when the image is a URL).
fn disks(spec: &MachineSpec, o: &VmOptions) -> (Vec<DataVolumeTemplate>, Vec<Disk>, Vec<Volume>) {
    let (mut dvs, mut disks, mut volumes) = (Vec::new(), Vec::new(), Vec::new());
    for d in &spec.disks {
        let (disk_name, dv_name, source_ref, source) = match d.source {
            // An image given as a URL is imported by CDI on demand (seed
            // 004's vmDiskImageTemplate); a name clones a DataSource.
            DiskSource::Image if spec.boot.is_url() => {
                ("rootdisk".to_owned(), derived(&o.name, "root"), None, Some(json!({"http": {"url": spec.boot.image}})))
            }
            DiskSource::Image => (
                "rootdisk".to_owned(),
                derived(&o.name, "root"),
                Some(SourceRef {
                    kind: "DataSource".into(),
                    name: spec.boot.image.clone(),
                    namespace: Some(o.data_source_namespace.clone()),
                }),
                None,
            ),
            DiskSource::Blank => (d.name.clone(), derived(&o.name, &d.name), None, Some(json!({"blank": {}}))),
        };
        let dv_name = o.claims.get(&disk_name).cloned().unwrap_or(dv_name);
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
        disks.push(Disk { name: disk_name.clone(), disk: DiskTarget { bus: "virtio".into() }, serial: None });
        let data_volume = Some(DataVolumeRef { name: dv_name, hotpluggable: false });
        volumes.push(Volume { name: disk_name, data_volume, cloud_init_no_cloud: None });
    }
    disks.push(Disk { name: "cloudinitdisk".into(), disk: DiskTarget { bus: "virtio".into() }, serial: None });
    volumes.push(Volume {
        name: "cloudinitdisk".into(),
        data_volume: None,
        cloud_init_no_cloud: Some(CloudInit { user_data: cloud_init_user_data(&spec.cloud_init) }),
    });
    (dvs, disks, volumes)
}

/// The first NIC (`default`: the pod network masqueraded, or the primary
/// UDN bridged) and one bridged NIC per attachment.
fn interfaces(spec: &MachineSpec, o: &VmOptions) -> (Vec<Interface>, Vec<Network>) {
    let nic = |name: &str| Interface { name: name.into(), masquerade: None, bridge: None, binding: None, ports: vec![] };
    let first = match o.network {
        PodNetwork::PrimaryUdn => Interface { binding: Some(Binding { name: "l2bridge".into() }), ..nic("default") },
        PodNetwork::Masquerade => Interface { masquerade: Some(json!({})), ports: masquerade_ports(spec), ..nic("default") },
    };
    let mut nics = vec![first];
    let mut nets = vec![Network { name: "default".into(), pod: Some(json!({})), multus: None }];
    for a in &o.attachments {
        nics.push(Interface { bridge: Some(json!({})), ..nic(&a.name) });
        nets.push(Network { name: a.name.clone(), pod: None, multus: Some(Multus { network_name: a.network_name.clone() }) });
    }
    (nics, nets)
}

/// The ports KubeVirt forwards into a masqueraded guest: the exposed ones,
/// plus the readiness probe's (else the probe never reaches the guest).
fn masquerade_ports(spec: &MachineSpec) -> Vec<Port> {
    let mut ports: Vec<Port> = spec.exposed_ports.iter().map(|p| Port { port: p.port, protocol: proto(p.protocol) }).collect();
    if let Some(p) = &spec.readiness_probe {
        let port = p.check.port();
        if !ports.iter().any(|x| x.port == port && x.protocol == "TCP") {
            ports.push(Port { port, protocol: "TCP".into() });
        }
    }
    ports
}

/// How the VM leaves a node being drained: live migration needs a VM that
/// can move (no host GPU); `LiveMigrateIfPossible` does not block the drain
/// when its storage cannot follow it (no ReadWriteMany).
fn eviction_strategy(spec: &MachineSpec) -> &'static str {
    if spec.gpus.is_empty() { "LiveMigrateIfPossible" } else { "None" }
}

/// The CPU topology: a VM resized live counts its vCPUs in sockets of one
/// core, which KubeVirt's `LiveUpdate` rollout adds up to `maxSockets`.
fn cpu(spec: &MachineSpec) -> Cpu {
    match spec.live.max_cpu_cores {
        Some(max) => Cpu { cores: 1, sockets: Some(spec.cpu.cores), max_sockets: Some(max) },
        None => Cpu { cores: spec.cpu.cores, sockets: None, max_sockets: None },
    }
}

/// Renders the KubeVirt VM of `spec`, and its floating-IP Service when ports are exposed.
pub fn render_vm(spec: &MachineSpec, o: &VmOptions) -> RenderedVm {
    let labels = BTreeMap::from([(VM_LABEL.to_owned(), o.name.clone())]);
    let (data_volume_templates, disks, volumes) = disks(spec, o);
    let (interfaces, networks) = interfaces(spec, o);
    let mut annotations = BTreeMap::new();
    if let (PodNetwork::PrimaryUdn, Some(address)) = (o.network, &o.address) {
        annotations.insert(ADDRESSES_ANNOTATION.to_owned(), json!({"default": [address]}).to_string());
    }
    let (shapes, instancetype, preference) = shape_objects(spec, o);
    let platform = if preference.is_some() { Default::default() } else { super::platform::render(&spec.profile.platform()) };
    let mut vm = VirtualMachine::new(
        &o.name,
        VirtualMachineSpec {
            run_strategy: if o.power == PowerState::Started { "Always" } else { "Halted" }.into(),
            data_volume_templates,
            instancetype: None,
            preference: None,
            template: VmiTemplate {
                metadata: ObjectMeta { name: None, labels: labels.clone(), annotations },
                spec: VmiSpec {
                    domain: Domain {
                        cpu: instancetype.is_none().then(|| cpu(spec)),
                        memory: instancetype.is_none().then(|| Memory {
                            guest: spec.memory.as_str().to_owned(),
                            max_guest: spec.live.max_memory.as_ref().map(|m| m.as_str().to_owned()),
                        }),
                        devices: Devices {
                            disks,
                            interfaces,
                            gpus: spec
                                .gpus
                                .iter()
                                .filter(|_| instancetype.is_none())
                                .map(|g| GpuDevice { name: g.name.clone(), device_name: g.device_name.clone() })
                                .collect(),
                            tpm: platform.tpm,
                        },
                        firmware: platform.firmware,
                        features: platform.features,
                        clock: platform.clock,
                    },
                    eviction_strategy: eviction_strategy(spec).into(),
                    networks,
                    volumes,
                    readiness_probe: readiness_probe(spec),
                },
            },
        },
    );
    vm.metadata.namespace = Some(o.namespace.clone());
    vm.metadata.labels = Some(labels);
    (vm.spec.instancetype, vm.spec.preference) = (instancetype, preference);
    RenderedVm { vm, service: service(spec, o), shape_objects: shapes }
}

/// Unless [`VmOptions::shapes`] is inline: the instance type (a VM of a
/// vmaas instance type that is not resized live) and the preference (a
/// platform beyond KubeVirt's defaults) as objects, and the VM's references.
fn shape_objects(spec: &MachineSpec, o: &VmOptions) -> (Vec<Value>, Option<Matcher>, Option<Matcher>) {
    if o.shapes == Shapes::Inline {
        return (Vec::new(), None, None);
    }
    let typed = spec.instance_type.as_deref().filter(|_| spec.live.is_empty()).map(|n| super::platform::instancetype(n, spec));
    let preferred = super::platform::preference(&spec.profile.platform());
    let scoped = |obj: Value| if o.shapes == Shapes::Namespaced { super::platform::owned(obj, &o.name, &o.namespace) } else { obj };
    let (typed, preferred) = (typed.map(scoped), preferred.map(scoped));
    let (it, pref) = (typed.as_ref().map(super::platform::matcher), preferred.as_ref().map(super::platform::matcher));
    (typed.into_iter().chain(preferred).collect(), it, pref)
}

/// The floating IP of a running VM with exposed ports (a stopped VM has none).
fn service(spec: &MachineSpec, o: &VmOptions) -> Option<Service> {
    if spec.exposed_ports.is_empty() || o.power == PowerState::Stopped {
        return None;
    }
    let labels = BTreeMap::from([(VM_LABEL.to_owned(), o.name.clone())]);
    let annotations = o.floating_ip.annotations();
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
            name: Some(derived(&o.name, "floating-ip")),
            namespace: Some(o.namespace.clone()),
            annotations: Some(annotations),
            labels: Some(labels.clone()),
            ..Default::default()
        },
        spec: Some(ServiceSpec { type_: Some("LoadBalancer".into()), selector: Some(labels), ports: Some(ports), ..Default::default() }),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::CloudInit as Ci;
    use crate::spec::{ExposedPort, Gpu, Probe};

    fn options(power: PowerState) -> VmOptions {
        VmOptions {
            name: "web".into(),
            namespace: "team-a".into(),
            power,
            network: PodNetwork::Masquerade,
            address: None,
            attachments: vec![],
            data_source_namespace: "images".into(),
            storage_class: None,
            floating_ip: FloatingIp::default(),
            shapes: Shapes::Inline,
            claims: Default::default(),
        }
    }

    fn probed_on(port: u16) -> MachineSpec {
        MachineSpec {
            exposed_ports: vec![ExposedPort { port: 443, protocol: Protocol::Tcp, name: None }],
            readiness_probe: Some(Probe { check: ProbeCheck::Tcp { port }, period_seconds: 5, timeout_seconds: 600 }),
            ..MachineSpec::default()
        }
    }

    fn vm_json(spec: &MachineSpec, power: PowerState) -> Value {
        serde_json::to_value(render_vm(spec, &options(power)).vm).unwrap()
    }

    #[test]
    fn the_probe_port_is_forwarded_into_a_masqueraded_guest() {
        let vm = vm_json(&probed_on(8080), PowerState::Started);
        let ports = &vm["spec"]["template"]["spec"]["domain"]["devices"]["interfaces"][0]["ports"];
        assert_eq!(ports, &json!([{"port": 443, "protocol": "TCP"}, {"port": 8080, "protocol": "TCP"}]));
        let vm = vm_json(&probed_on(443), PowerState::Started);
        assert_eq!(vm["spec"]["template"]["spec"]["domain"]["devices"]["interfaces"][0]["ports"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn a_dead_guest_is_not_ready_after_three_missed_probes() {
        let vm = vm_json(&probed_on(80), PowerState::Started);
        let probe = &vm["spec"]["template"]["spec"]["readinessProbe"];
        assert_eq!((probe["periodSeconds"].as_u64(), probe["failureThreshold"].as_u64()), (Some(5), Some(3)), "{probe}");
    }

    #[test]
    fn only_a_vm_that_can_move_is_live_migrated_and_none_blocks_a_drain() {
        let vm = vm_json(&MachineSpec::default(), PowerState::Started);
        assert_eq!(vm["spec"]["template"]["spec"]["evictionStrategy"], "LiveMigrateIfPossible");
        let gpu = MachineSpec {
            gpus: vec![Gpu { name: "g".into(), device_name: "nvidia.com/A10".into(), pci_device_selector: None }],
            ..MachineSpec::default()
        };
        assert_eq!(vm_json(&gpu, PowerState::Started)["spec"]["template"]["spec"]["evictionStrategy"], "None");
    }

    #[test]
    fn a_stopped_vm_has_no_floating_ip() {
        let spec = probed_on(443);
        assert!(render_vm(&spec, &options(PowerState::Started)).service.is_some());
        assert!(render_vm(&spec, &options(PowerState::Stopped)).service.is_none());
    }

    #[test]
    fn a_script_and_ssh_keys_both_reach_the_guest() {
        let keys = vec!["ssh-ed25519 AAAA k@x".to_owned()];
        let script = Ci { user_data: Some("#!/bin/sh\necho hi > /tmp/hi\n".into()), ssh_keys: keys.clone() };
        let out = cloud_init_user_data(&script);
        assert!(out.starts_with("Content-Type: multipart/mixed"), "{out}");
        assert!(out.contains("Content-Type: text/x-shellscript") && out.contains("echo hi > /tmp/hi"), "{out}");
        assert!(out.contains("Content-Type: text/cloud-config") && out.contains("  - ssh-ed25519 AAAA k@x"), "{out}");
        let config = Ci { user_data: Some("#cloud-config\npackages: [nginx]\n".into()), ssh_keys: keys.clone() };
        assert_eq!(cloud_init_user_data(&config), "#cloud-config\npackages: [nginx]\nssh_authorized_keys:\n  - ssh-ed25519 AAAA k@x\n");
        assert_eq!(
            cloud_init_user_data(&Ci { user_data: None, ssh_keys: keys }),
            "#cloud-config\nssh_authorized_keys:\n  - ssh-ed25519 AAAA k@x\n"
        );
        let alone = Ci { user_data: Some("#!/bin/sh\n".into()), ssh_keys: vec![] };
        assert_eq!(cloud_init_user_data(&alone), "#!/bin/sh\n");
    }

    #[test]
    fn attachments_are_bridged_multus_nics_beside_the_pod_network() {
        let mut o = options(PowerState::Started);
        o.attachments = vec![Attachment { name: "physical".into(), network_name: "lab".into() }];
        let vm = serde_json::to_value(render_vm(&probed_on(22), &o).vm).unwrap();
        let t = &vm["spec"]["template"]["spec"];
        assert_eq!(t["domain"]["devices"]["interfaces"][1], json!({"name": "physical", "bridge": {}}));
        assert_eq!(t["networks"], json!([{"name": "default", "pod": {}}, {"name": "physical", "multus": {"networkName": "lab"}}]));
        assert!(t["domain"]["devices"]["interfaces"][0]["masquerade"].is_object(), "the pod network stays first");
        o.network = PodNetwork::PrimaryUdn;
        let vm = serde_json::to_value(render_vm(&probed_on(22), &o).vm).unwrap();
        let first = &vm["spec"]["template"]["spec"]["domain"]["devices"]["interfaces"][0];
        assert_eq!(first, &json!({"name": "default", "binding": {"name": "l2bridge"}}), "a primary UDN is bridged");
    }

    #[test]
    fn a_fixed_address_is_asked_of_ovn_k_on_a_primary_udn_only() {
        let mut o = options(PowerState::Started);
        o.address = Some("10.0.0.5/24".into());
        let vm = serde_json::to_value(render_vm(&probed_on(22), &o).vm).unwrap();
        assert!(
            vm["spec"]["template"]["metadata"]["annotations"].get(ADDRESSES_ANNOTATION).is_none(),
            "the pod network has no fixed address"
        );
        o.network = PodNetwork::PrimaryUdn;
        let vm = serde_json::to_value(render_vm(&probed_on(22), &o).vm).unwrap();
        let asked = vm["spec"]["template"]["metadata"]["annotations"][ADDRESSES_ANNOTATION].as_str().unwrap();
        assert_eq!(serde_json::from_str::<Value>(asked).unwrap(), json!({"default": ["10.0.0.5/24"]}));
    }

    #[test]
    fn a_localnet_without_a_subnet_disables_ipam_and_a_vlan_is_access_mode() {
        let ns = vec!["team-a".to_owned()];
        let net = Localnet { physical_network: "physnet1", cidr: None, vlan: Some(120), tenants: &ns };
        let c = serde_json::to_value(localnet_cudn("lab", &net)).unwrap();
        let l = &c["spec"]["network"]["localnet"];
        assert_eq!((l["ipam"].clone(), l.get("subnets")), (json!({"mode": "Disabled"}), None));
        assert_eq!(l["vlan"], json!({"mode": "Access", "access": {"id": 120}}));
        assert_eq!(
            c["spec"]["namespaceSelector"]["matchExpressions"][0],
            json!({"key": "vmaas.io/tenant", "operator": "In", "values": ["team-a"]})
        );
    }
}
