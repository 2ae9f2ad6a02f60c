//! Pure rendering: a [`MachineSpec`] plus plain options into the Kubernetes
//! objects that run it (a KubeVirt VM with its disks, a LoadBalancer
//! Service), and the namespaces and OVN-K user-defined networks they live
//! in. The Crossplane function and a KubeVirt backend both render through here.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Namespace, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta as K8sMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Value, json};

pub use super::cloud_init::cloud_init_user_data;
use super::crd::*;
use super::devices::{cpu, disks, extra_devices, interfaces, machine, proto, toleration};
use super::names::derived;
pub use super::options::{Attachment, FloatingIp, PodNetwork, RenderedVm, VmOptions};
use super::platform::Matcher;
pub use super::platform::Shapes;
use crate::machine::MachineSpec;
use crate::{PowerState, ProbeCheck};

/// Label on the launcher pod that the LoadBalancer selects.
pub const VM_LABEL: &str = "vmaas.io/vm";
/// KubeVirt's label of a VM's instances by the VM's name, as its common
/// templates write it.
pub const DOMAIN_LABEL: &str = "kubevirt.io/domain";
/// Label of a namespace whose primary network is a user-defined network.
pub const PRIMARY_UDN_LABEL: &str = "k8s.ovn.org/primary-user-defined-network";
/// Label naming the tenant (a team's namespace) a vmaas namespace serves.
pub const TENANT_LABEL: &str = "vmaas.io/tenant";
/// Annotation of a VMI template asking OVN-K's IPAM for fixed addresses,
/// by the VM's network name: `{"default": ["10.0.0.5/24"]}` (KubeVirt's
/// IPAM extensions turn it into the launcher pod's network request).
pub const ADDRESSES_ANNOTATION: &str = "network.kubevirt.io/addresses";

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

/// Subnet `name` as a secondary layer-2 CUDN for its tenant's namespaces
/// (`tenants`: their [`TENANT_LABEL`] values), so that a VM may have a NIC
/// on it beside others. OVN-K makes a NetworkAttachmentDefinition named
/// `name` in each namespace it selects. With `ipam` (the subnet's range),
/// OVN-K gives the addresses and keeps each VM's for its life (persistent
/// IPAM: IPAMClaims); without, OVN-K keeps none (`ipam` disabled): the
/// server's IPAM gives them, and cloud-init tells each guest its own
/// ([`super::cloud_init::network_data`]).
pub fn subnet_cudn(name: &str, ipam: Option<&str>, tenants: &[String]) -> ClusterUserDefinedNetwork {
    let layer2 = match ipam {
        Some(cidr) => json!({"role": "Secondary", "subnets": [cidr], "ipam": {"lifecycle": "Persistent"}}),
        None => json!({"role": "Secondary", "ipam": {"mode": "Disabled"}}),
    };
    ClusterUserDefinedNetwork::new(
        name,
        ClusterUserDefinedNetworkSpec {
            namespace_selector: json!({"matchExpressions": [{"key": TENANT_LABEL, "operator": "In", "values": tenants}]}),
            network: json!({"topology": "Layer2", "layer2": layer2}),
        },
    )
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

/// Why a physical network cannot carry a localnet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LocalnetError {
    /// Not a bridge mapping's name.
    #[error("must be a bridge mapping's name, without ',' or ':'")]
    BridgeMapping,
    /// Not a VLAN id.
    #[error("must be between 1 and 4094")]
    Vlan,
}

/// Checks that `name` can be a bridge mapping's name (OVN-K's
/// `physicalNetworkName`): not empty, without `,` or `:` (OVN-K's own
/// separators in its bridge mappings).
pub fn check_bridge_mapping(name: &str) -> Result<(), LocalnetError> {
    if name.is_empty() || name.contains([',', ':']) {
        return Err(LocalnetError::BridgeMapping);
    }
    Ok(())
}

/// Checks that `id` is a VLAN id a localnet may be tagged with (1 to 4094).
pub fn check_vlan(id: u16) -> Result<(), LocalnetError> {
    if !(1..=4094).contains(&id) {
        return Err(LocalnetError::Vlan);
    }
    Ok(())
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

/// How the VM leaves a node being drained: live migration needs a VM that
/// can move (no host GPU); `LiveMigrateIfPossible` does not block the drain
/// when its storage cannot follow it (no ReadWriteMany).
fn eviction_strategy(spec: &MachineSpec) -> &'static str {
    if spec.gpus.is_empty() { "LiveMigrateIfPossible" } else { "None" }
}

/// Renders the KubeVirt VM of `spec`, and its floating-IP Service when ports are exposed.
pub fn render_vm(spec: &MachineSpec, o: &VmOptions) -> RenderedVm {
    let meta = Metadata::of(spec, o);
    let (data_volume_templates, disks, volumes) = disks(spec, o);
    let (interfaces, networks) = interfaces(spec, o);
    let (shapes, instancetype, preference) = shape_objects(spec, o);
    let platform = if preference.is_some() { Default::default() } else { super::platform::render(&spec.profile.platform()) };
    let mut vm = VirtualMachine::new(
        &o.name,
        VirtualMachineSpec {
            run_strategy: if o.power == PowerState::Stopped { "Halted" } else { "Always" }.into(),
            data_volume_templates,
            instancetype: None,
            preference: None,
            template: VmiTemplate {
                metadata: ObjectMeta { name: None, labels: meta.instance_labels, annotations: meta.instance_annotations },
                spec: VmiSpec {
                    domain: Domain {
                        cpu: instancetype.is_none().then(|| cpu(spec)),
                        memory: instancetype.is_none().then(|| Memory {
                            guest: spec.memory.as_str().to_owned(),
                            max_guest: spec.live.max_memory.as_ref().map(|m| m.as_str().to_owned()),
                            hugepages: spec.scheduling.hugepages.clone().map(|page_size| Hugepages { page_size }),
                        }),
                        devices: Devices {
                            disks,
                            interfaces,
                            host_devices: spec
                                .gpus
                                .iter()
                                .filter(|_| instancetype.is_none())
                                .map(|g| GpuDevice { name: g.name.clone(), device_name: g.device_name.clone() })
                                .collect(),
                            tpm: platform.tpm,
                            extra: extra_devices(spec),
                        },
                        firmware: platform.firmware,
                        features: platform.features,
                        clock: platform.clock,
                        machine: machine(spec),
                    },
                    eviction_strategy: eviction_strategy(spec).into(),
                    networks,
                    volumes,
                    readiness_probe: readiness_probe(spec),
                    architecture: spec.hardware.architecture.clone(),
                    termination_grace_period_seconds: spec.hardware.termination_grace_period_seconds,
                    node_selector: spec.scheduling.node_selector.clone(),
                    tolerations: spec.scheduling.tolerations.iter().map(toleration).collect(),
                    affinity: spec.scheduling.affinity.clone(),
                },
            },
        },
    );
    vm.metadata.namespace = Some(o.namespace.clone());
    vm.metadata.labels = Some(meta.labels);
    vm.metadata.annotations = (!meta.annotations.is_empty()).then_some(meta.annotations);
    (vm.spec.instancetype, vm.spec.preference) = (instancetype, preference);
    RenderedVm { vm, service: service(spec, o), shape_objects: shapes }
}

/// The labels and annotations of a VM and its instance template: the
/// tenant's (under the tenant domain), then the template's, then vmaas's own.
struct Metadata {
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    instance_labels: BTreeMap<String, String>,
    instance_annotations: BTreeMap<String, String>,
}

impl Metadata {
    fn of(spec: &MachineSpec, o: &VmOptions) -> Self {
        use crate::kube_metadata::tenant_map;
        let k = &spec.kube_metadata;
        let layered = |tenant: BTreeMap<String, String>, template: &BTreeMap<String, String>| {
            let mut m = tenant;
            m.extend(template.iter().map(|(k, v)| (k.clone(), v.clone())));
            m
        };
        let tenant = tenant_map(&o.tenant_labels);
        let mut by_domain = tenant.clone();
        by_domain.insert(DOMAIN_LABEL.to_owned(), o.name.clone());
        let mut labels = layered(tenant, &k.labels);
        let mut instance_labels = layered(by_domain, &k.instance_labels);
        for l in [&mut labels, &mut instance_labels] {
            l.insert(VM_LABEL.to_owned(), o.name.clone());
        }
        let mut instance_annotations = k.instance_annotations.clone();
        if let (PodNetwork::PrimaryUdn, Some(address)) = (o.network, &o.address) {
            instance_annotations.insert(ADDRESSES_ANNOTATION.to_owned(), json!({"default": [address]}).to_string());
        }
        Self { labels, annotations: layered(tenant_map(&o.tenant_annotations), &k.annotations), instance_labels, instance_annotations }
    }
}

/// Unless [`VmOptions::shapes`] is inline: the instance type (a VM of a
/// vmaas instance type that is not resized live) and the preference (a
/// platform beyond KubeVirt's defaults) as objects, and the VM's references.
fn shape_objects(spec: &MachineSpec, o: &VmOptions) -> (Vec<Value>, Option<Matcher>, Option<Matcher>) {
    if o.shapes == Shapes::Inline {
        return (Vec::new(), None, None);
    }
    // A topology, dedicated CPUs or huge pages stay in the domain: a
    // cluster instance type's `cpu.guest` and `memory.guest` have none.
    let inline = spec.cpu.has_topology() || spec.scheduling.dedicated_cpus || spec.scheduling.hugepages.is_some();
    let typed = spec.instance_type.as_deref().filter(|_| spec.live.is_empty() && !inline).map(|n| super::platform::instancetype(n, spec));
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
    use crate::Protocol;
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
            pod_mac: None,
            data_source_namespace: "images".into(),
            storage_class: None,
            floating_ip: FloatingIp::default(),
            shapes: Shapes::Inline,
            claims: Default::default(),
            arrived: Default::default(),
            tenant_labels: Default::default(),
            tenant_annotations: Default::default(),
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
        let vm = vm_json(&gpu, PowerState::Started);
        assert_eq!(vm["spec"]["template"]["spec"]["evictionStrategy"], "None");
        let devices = &vm["spec"]["template"]["spec"]["domain"]["devices"];
        assert_eq!(devices["hostDevices"], json!([{"name": "g", "deviceName": "nvidia.com/A10"}]), "a GPU is a host device");
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
    fn the_machine_s_hardware_renders_as_kubevirt_writes_it() {
        let mut m = probed_on(22);
        m.cpu = crate::Cpu { cores: 4, sockets: 2, threads: 2 };
        m.disks[0].bus = crate::DiskBus::Sata;
        let mut data = crate::Disk::new("data0", crate::Quantity::parse("120Gi").unwrap(), crate::DiskSource::Blank);
        (data.storage_class, data.preallocation) = (Some("ocs-rbd".into()), Some(false));
        m.disks.push(data);
        m.nics[0].model = crate::NicModel::E1000e;
        m.hardware = crate::Hardware {
            machine_type: Some("pc-q35-rhel9.2.0".into()),
            architecture: Some("amd64".into()),
            termination_grace_period_seconds: Some(3600),
            network_interface_multiqueue: true,
            rng: true,
            tablet: true,
            log_serial_console: Some(false),
        };
        let vm = serde_json::to_value(render_vm(&m, &options(PowerState::Started)).vm).unwrap();
        let t = &vm["spec"]["template"]["spec"];
        let d = &t["domain"];
        assert_eq!(d["cpu"], json!({"cores": 4, "sockets": 2, "threads": 2}));
        assert_eq!(d["machine"], json!({"type": "pc-q35-rhel9.2.0"}));
        assert_eq!((&t["architecture"], &t["terminationGracePeriodSeconds"]), (&json!("amd64"), &json!(3600)));
        let dev = &d["devices"];
        assert_eq!(dev["disks"][0]["disk"]["bus"], "sata");
        assert_eq!(dev["disks"][1]["disk"]["bus"], "virtio");
        assert_eq!(dev["interfaces"][0]["model"], "e1000e");
        assert_eq!(dev["inputs"], json!([{"bus": "usb", "name": "tablet", "type": "tablet"}]));
        assert_eq!((&dev["rng"], &dev["networkInterfaceMultiqueue"], &dev["logSerialConsole"]), (&json!({}), &json!(true), &json!(false)));
        let dv = &vm["spec"]["dataVolumeTemplates"][1]["spec"];
        assert_eq!((&dv["storage"]["storageClassName"], &dv["preallocation"]), (&json!("ocs-rbd"), &json!(false)));
    }

    #[test]
    fn where_a_vm_may_run_renders_as_kubevirt_writes_it() {
        let mut m = probed_on(22);
        m.scheduling = serde_json::from_value(json!({
            "node_selector": {"zone": "a"},
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoExecute", "toleration_seconds": 30}],
            "affinity": {"nodeAffinity": {}},
            "dedicated_cpus": true,
            "hugepages": "1Gi"
        }))
        .unwrap();
        m.instance_type = Some("general.small".into());
        let o = VmOptions { shapes: Shapes::Cluster, ..options(PowerState::Started) };
        let r = render_vm(&m, &o);
        assert!(r.vm.spec.instancetype.is_none(), "dedicated CPUs and huge pages keep the shape inline");
        let vm = serde_json::to_value(r.vm).unwrap();
        let t = &vm["spec"]["template"]["spec"];
        assert_eq!(t["nodeSelector"], json!({"zone": "a"}));
        assert_eq!(t["tolerations"], json!([{"key": "gpu", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}]));
        assert_eq!(t["affinity"], json!({"nodeAffinity": {}}));
        assert_eq!(t["domain"]["cpu"]["dedicatedCpuPlacement"], true);
        assert_eq!(t["domain"]["memory"]["hugepages"], json!({"pageSize": "1Gi"}));
    }

    #[test]
    fn attachments_are_bridged_multus_nics_beside_the_pod_network() {
        let mut o = options(PowerState::Started);
        o.attachments = vec![Attachment { name: "physical".into(), network_name: "lab".into(), mac: None, address: None }];
        let vm = serde_json::to_value(render_vm(&probed_on(22), &o).vm).unwrap();
        let t = &vm["spec"]["template"]["spec"];
        assert_eq!(t["domain"]["devices"]["interfaces"][1], json!({"name": "physical", "bridge": {}, "model": "virtio"}));
        assert_eq!(t["networks"], json!([{"name": "default", "pod": {}}, {"name": "physical", "multus": {"networkName": "lab"}}]));
        assert!(t["domain"]["devices"]["interfaces"][0]["masquerade"].is_object(), "the pod network stays first");
        o.network = PodNetwork::PrimaryUdn;
        let vm = serde_json::to_value(render_vm(&probed_on(22), &o).vm).unwrap();
        let first = &vm["spec"]["template"]["spec"]["domain"]["devices"]["interfaces"][0];
        assert_eq!(first, &json!({"name": "default", "binding": {"name": "l2bridge"}, "model": "virtio"}), "a primary UDN is bridged");
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
    fn a_subnet_as_a_secondary_network_is_told_to_the_guest_by_mac() {
        let c = serde_json::to_value(subnet_cudn("subnet-a", None, &["acme".to_owned()])).unwrap();
        assert_eq!(c["spec"]["network"], json!({"topology": "Layer2", "layer2": {"role": "Secondary", "ipam": {"mode": "Disabled"}}}));
        let mut o = options(PowerState::Started);
        let nic = |i: u8, address: Option<&str>| Attachment {
            name: format!("subnet-{i}"),
            network_name: format!("ns/subnet-{i}"),
            mac: Some(format!("52:54:00:00:00:0{i}")),
            address: address.map(str::to_owned),
        };
        o.attachments = vec![nic(1, Some("10.0.1.5/24")), nic(2, None)];
        o.pod_mac = Some("52:54:00:00:00:00".into());
        let vm = serde_json::to_value(render_vm(&probed_on(22), &o).vm).unwrap();
        let t = &vm["spec"]["template"]["spec"];
        assert_eq!(t["domain"]["devices"]["interfaces"][0]["macAddress"], "52:54:00:00:00:00");
        assert_eq!(t["domain"]["devices"]["interfaces"][1]["macAddress"], "52:54:00:00:00:01");
        let data = t["volumes"].as_array().unwrap().iter().find_map(|v| v["cloudInitNoCloud"]["networkData"].as_str()).unwrap();
        assert!(data.starts_with("version: 2\n") && data.contains("52:54:00:00:00:00\"\n    dhcp4: true"), "{data}");
        assert!(data.contains("macaddress: \"52:54:00:00:00:01\"\n    addresses: [\"10.0.1.5/24\"]") && !data.contains(":02"), "{data}");
        o.attachments = vec![nic(2, None)];
        let vm = serde_json::to_value(render_vm(&probed_on(22), &o).vm).unwrap();
        let vols = vm["spec"]["template"]["spec"]["volumes"].clone();
        assert!(!vols.to_string().contains("networkData"), "no fixed address: cloud-init's own DHCP");
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
