//! A machine's devices as KubeVirt writes them: its disks (DataVolume
//! templates, disks on their buses and volumes), its interfaces and their
//! networks, its CPU topology, and the devices beyond those (a tablet, an
//! RNG, multiqueue, serial console logging).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::cloud_init::cloud_init_user_data;
use super::crd::*;
use super::names::derived;
use super::options::{PodNetwork, VmOptions};
use crate::Protocol;
use crate::machine::{DiskSource, MachineSpec};

/// KubeVirt's word for a protocol.
pub(super) fn proto(p: Protocol) -> String {
    if p == Protocol::Udp { "UDP" } else { "TCP" }.to_owned()
}

/// One DataVolume template, disk and volume per machine disk; the root disk
/// is named `rootdisk` and clones the boot image's DataSource (or imports
/// it over HTTP when the image is a URL).
pub(super) fn disks(spec: &MachineSpec, o: &VmOptions) -> (Vec<DataVolumeTemplate>, Vec<Disk>, Vec<Volume>) {
    let (mut dvs, mut disks, mut volumes) = (Vec::new(), Vec::new(), Vec::new());
    for d in &spec.disks {
        let (disk_name, dv_name, source_ref, source) = match d.source {
            // An image given as a URL (or a docker:// reference) is imported
            // by CDI on demand (seed 004's vmDiskImageTemplate); a name
            // clones a DataSource.
            DiskSource::Image if spec.boot.is_url() => {
                ("rootdisk".to_owned(), derived(&o.name, "root"), None, Some(super::volume::import_source(&spec.boot.image)))
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
        disks.push(Disk { name: disk_name.clone(), disk: DiskTarget { bus: d.bus.as_str().into() }, serial: None });
        let data_volume = Some(DataVolumeRef { name: dv_name.clone(), hotpluggable: false });
        volumes.push(Volume { name: disk_name.clone(), data_volume, cloud_init_no_cloud: None });
        if o.arrived.contains(&disk_name) {
            continue;
        }
        dvs.push(DataVolumeTemplate {
            metadata: ObjectMeta { name: Some(dv_name), ..Default::default() },
            spec: DataVolumeSpec {
                source_ref,
                source,
                storage: Storage {
                    resources: Resources { requests: BTreeMap::from([("storage".to_owned(), d.size.as_str().to_owned())]) },
                    storage_class_name: d.storage_class.clone().or_else(|| o.storage_class.clone()),
                },
                preallocation: d.preallocation,
            },
        });
    }
    disks.push(Disk { name: "cloudinitdisk".into(), disk: DiskTarget { bus: "virtio".into() }, serial: None });
    volumes.push(Volume {
        name: "cloudinitdisk".into(),
        data_volume: None,
        cloud_init_no_cloud: Some(CloudInit {
            user_data: cloud_init_user_data(&spec.cloud_init),
            network_data: super::cloud_init::network_data(o),
        }),
    });
    (dvs, disks, volumes)
}

/// The first NIC (`default`: the pod network masqueraded, or the primary
/// UDN bridged, of the machine's first NIC's model) and one bridged virtio
/// NIC per attachment.
pub(super) fn interfaces(spec: &MachineSpec, o: &VmOptions) -> (Vec<Interface>, Vec<Network>) {
    let nic = |name: &str| Interface {
        name: name.into(),
        masquerade: None,
        bridge: None,
        binding: None,
        ports: vec![],
        model: Some(crate::NicModel::Virtio.as_str().into()),
        mac_address: None,
    };
    let model = spec.nics.first().map(|n| n.model).unwrap_or_default();
    let first = match o.network {
        PodNetwork::PrimaryUdn => Interface { binding: Some(Binding { name: "l2bridge".into() }), ..nic("default") },
        PodNetwork::Masquerade => Interface { masquerade: Some(json!({})), ports: masquerade_ports(spec), ..nic("default") },
    };
    let first = Interface { model: Some(model.as_str().into()), mac_address: o.pod_mac.clone(), ..first };
    let mut nics = vec![first];
    let mut nets = vec![Network { name: "default".into(), pod: Some(json!({})), multus: None }];
    for a in &o.attachments {
        nics.push(Interface { bridge: Some(json!({})), mac_address: a.mac.clone(), ..nic(&a.name) });
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

/// The CPU topology, as the machine lays it out (sockets and threads
/// written when there is more than one); a VM resized live counts
/// its vCPUs in sockets of one core, which KubeVirt's `LiveUpdate` rollout
/// adds up to `maxSockets`.
pub(super) fn cpu(spec: &MachineSpec) -> Cpu {
    let (cores, sockets, threads, max_sockets) = match spec.live.max_cpu_cores {
        Some(max) => (1, Some(spec.cpu.cores), None, Some(max)),
        None if spec.cpu.has_topology() => (spec.cpu.cores, Some(spec.cpu.sockets), Some(spec.cpu.threads), None),
        None => (spec.cpu.cores, None, None, None),
    };
    Cpu { cores, sockets, threads, max_sockets, dedicated_cpu_placement: spec.scheduling.dedicated_cpus.then_some(true) }
}

/// A toleration as Kubernetes writes it.
pub(super) fn toleration(t: &crate::scheduling::Toleration) -> k8s_openapi::api::core::v1::Toleration {
    let word = |v: Value| v.as_str().map(str::to_owned);
    k8s_openapi::api::core::v1::Toleration {
        key: t.key.clone(),
        operator: t.operator.and_then(|o| word(json!(o))),
        value: t.value.clone(),
        effect: t.effect.and_then(|e| word(json!(e))),
        toleration_seconds: t.toleration_seconds,
    }
}

/// The devices beyond disks and interfaces that the machine's hardware
/// asks for: a USB tablet, a virtio RNG, multiqueue, serial console logging.
pub(super) fn extra_devices(spec: &MachineSpec) -> ExtraDevices {
    let h = &spec.hardware;
    let tablet = Input { bus: "usb".into(), name: "tablet".into(), kind: "tablet".into() };
    ExtraDevices {
        inputs: if h.tablet { vec![tablet] } else { Vec::new() },
        network_interface_multiqueue: h.network_interface_multiqueue.then_some(true),
        rng: h.rng.then(|| json!({})),
        log_serial_console: h.log_serial_console,
    }
}

/// The machine type, if the machine names one.
pub(super) fn machine(spec: &MachineSpec) -> Option<Machine> {
    spec.hardware.machine_type.clone().map(|kind| Machine { kind })
}
