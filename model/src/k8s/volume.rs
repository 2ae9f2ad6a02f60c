//! Volumes on Kubernetes: a CDI `DataVolume` of their own (blank, a clone
//! of an image's `DataSource`, or an HTTP import), which outlives the VMs
//! it is attached to, and its hotpluggable disk on a KubeVirt VM (bus
//! `scsi`, the only bus KubeVirt hotplugs, with the volume's serial).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::crd::{DataVolume, DataVolumeRef, DataVolumeSpec, Disk, DiskTarget, Resources, SourceRef, Storage, VirtualMachine, Volume};
use super::names::derived;
use crate::volume::{VolumeSpec, VolumeState};

/// The name of volume `volume`'s DataVolume (and of its disk on a VM).
pub fn data_volume_name(volume: &str) -> String {
    derived(volume, "vol")
}

/// Where a volume's image comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageSources {
    /// The namespace of the CDI DataSources that image names refer to.
    pub data_source_namespace: String,
    /// The storage class of volumes (the cluster default when absent).
    pub storage_class: Option<String>,
}

/// The CDI source importing `url`: an `http` source for an `http(s)` URL,
/// a `registry` source for a `docker://` reference (a containerDisk, which
/// CDI pulls and converts like any other import).
pub fn import_source(url: &str) -> Value {
    if url.starts_with(crate::machine::REGISTRY_SCHEME) { json!({"registry": {"url": url}}) } else { json!({"http": {"url": url}}) }
}

/// The CDI source pulling `url` from a registry with the credentials in
/// Secret `secret` (see [`pull_secret`]).
pub fn registry_source(url: &str, secret: &str) -> Value {
    json!({"registry": {"url": url, "secretRef": secret}})
}

/// The Secret `name` in `namespace` CDI's registry importer reads a user
/// name and password from (its `accessKeyId` and `secretKey` keys).
pub fn pull_secret(name: &str, namespace: &str, username: &str, password: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": name, "namespace": namespace},
        "stringData": {"accessKeyId": username, "secretKey": password},
    })
}

/// The DataVolume of volume `name` in `namespace`.
pub fn data_volume(name: &str, namespace: &str, spec: &VolumeSpec, sources: &ImageSources) -> DataVolume {
    let (source_ref, source) = match spec.source_image.as_deref() {
        Some(url) if url.contains("://") => (None, Some(import_source(url))),
        Some(image) => (
            Some(SourceRef { kind: "DataSource".into(), name: image.to_owned(), namespace: Some(sources.data_source_namespace.clone()) }),
            None,
        ),
        None => (None, Some(json!({"blank": {}}))),
    };
    let storage = Storage {
        resources: Resources { requests: BTreeMap::from([("storage".to_owned(), spec.size.as_str().to_owned())]) },
        storage_class_name: sources.storage_class.clone(),
    };
    let mut dv = DataVolume::new(&data_volume_name(name), DataVolumeSpec { source_ref, source, storage, preallocation: None });
    dv.metadata.namespace = Some(namespace.to_owned());
    dv
}

/// One volume to put on a VM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeDisk {
    /// The volume's name (its DataVolume is [`data_volume_name`] of it).
    pub volume: String,
    /// The serial the guest sees.
    pub serial: String,
}

/// Adds `volumes` to `vm` as hotpluggable disks, after its own.
pub fn attach(vm: &mut VirtualMachine, volumes: &[VolumeDisk]) {
    let spec = &mut vm.spec.template.spec;
    for v in volumes {
        let name = data_volume_name(&v.volume);
        spec.domain.devices.disks.push(Disk {
            name: name.clone(),
            disk: DiskTarget { bus: "scsi".into() },
            serial: Some(v.serial.clone()),
        });
        let data_volume = Some(DataVolumeRef { name: name.clone(), hotpluggable: true });
        spec.volumes.push(Volume { name, data_volume, cloud_init_no_cloud: None });
    }
}

/// A volume's state from its observed DataVolume (`None`: not created
/// yet), with why it is not ready.
pub fn observe_data_volume(dv: Option<&Value>) -> (VolumeState, Option<String>) {
    let Some(dv) = dv else { return (VolumeState::Pending, Some("waiting for CDI to create the DataVolume".into())) };
    let status = &dv["status"];
    let message = || {
        let conds = status["conditions"].as_array().into_iter().flatten();
        conds.filter_map(|c| c["message"].as_str()).filter(|m| !m.is_empty()).collect::<Vec<_>>().join("; ")
    };
    match status["phase"].as_str().unwrap_or("") {
        "Succeeded" => (VolumeState::Ready, None),
        "Failed" => (VolumeState::Failed, Some(message()).filter(|m| !m.is_empty()).or(Some("CDI could not make the volume".into()))),
        "" => (VolumeState::Pending, Some("waiting for CDI".into())),
        phase => {
            let progress =
                status["progress"].as_str().filter(|p| !p.is_empty() && *p != "N/A").map(|p| format!(" ({p})")).unwrap_or_default();
            (VolumeState::Pending, Some(format!("CDI: {phase}{progress}")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::render::{PodNetwork, VmOptions, render_vm};
    use crate::{MachineSpec, PowerState};

    fn sources() -> ImageSources {
        ImageSources { data_source_namespace: "os-images".into(), storage_class: None }
    }

    #[test]
    fn a_volume_is_a_blank_clone_or_import_data_volume() {
        let blank: VolumeSpec = serde_json::from_value(json!({"size": "10Gi"})).unwrap();
        let dv = serde_json::to_value(data_volume("data", "ns1", &blank, &sources())).unwrap();
        assert_eq!(dv["apiVersion"], "cdi.kubevirt.io/v1beta1");
        assert_eq!((&dv["metadata"]["name"], &dv["metadata"]["namespace"]), (&json!("data-vol"), &json!("ns1")));
        assert_eq!(dv["spec"]["source"], json!({"blank": {}}));
        assert_eq!(dv["spec"]["storage"]["resources"]["requests"]["storage"], "10Gi");
        let image: VolumeSpec = serde_json::from_value(json!({"size": "20Gi", "source_image": "fedora"})).unwrap();
        let dv = serde_json::to_value(data_volume("sys", "ns1", &image, &sources())).unwrap();
        assert_eq!(dv["spec"]["sourceRef"], json!({"kind": "DataSource", "name": "fedora", "namespace": "os-images"}));
        let url: VolumeSpec = serde_json::from_value(json!({"size": "20Gi", "source_image": "https://example.com/a.qcow2"})).unwrap();
        let dv = serde_json::to_value(data_volume("imp", "ns1", &url, &sources())).unwrap();
        assert_eq!(dv["spec"]["source"]["http"]["url"], "https://example.com/a.qcow2");
        assert_eq!(import_source("docker://127.0.0.1:5000/d/g:1"), json!({"registry": {"url": "docker://127.0.0.1:5000/d/g:1"}}));
    }

    #[test]
    fn attached_volumes_are_hotpluggable_scsi_disks_with_their_serial() {
        let o = VmOptions {
            name: "web".into(),
            namespace: "ns1".into(),
            power: PowerState::Started,
            network: PodNetwork::PrimaryUdn,
            address: None,
            attachments: vec![],
            pod_mac: None,
            data_source_namespace: "os-images".into(),
            storage_class: None,
            floating_ip: Default::default(),
            shapes: Default::default(),
            claims: Default::default(),
            arrived: Default::default(),
            tenant_labels: Default::default(),
            tenant_annotations: Default::default(),
        };
        let mut vm = render_vm(&MachineSpec::default(), &o).vm;
        attach(&mut vm, &[VolumeDisk { volume: "data".into(), serial: "dataxyz".into() }]);
        let t = serde_json::to_value(&vm.spec.template.spec).unwrap();
        let disk = t["domain"]["devices"]["disks"].as_array().unwrap().last().unwrap().clone();
        assert_eq!(disk, json!({"name": "data-vol", "disk": {"bus": "scsi"}, "serial": "dataxyz"}));
        let volume = t["volumes"].as_array().unwrap().last().unwrap().clone();
        assert_eq!(volume, json!({"name": "data-vol", "dataVolume": {"name": "data-vol", "hotpluggable": true}}));
    }

    #[test]
    fn a_data_volume_reports_its_phase() {
        assert_eq!(observe_data_volume(None).0, VolumeState::Pending);
        assert_eq!(observe_data_volume(Some(&json!({"status": {"phase": "Succeeded"}}))), (VolumeState::Ready, None));
        let (s, m) = observe_data_volume(Some(&json!({"status": {"phase": "ImportInProgress", "progress": "42.0%"}})));
        assert_eq!((s, m.as_deref()), (VolumeState::Pending, Some("CDI: ImportInProgress (42.0%)")));
        let failed = json!({"status": {"phase": "Failed", "conditions": [{"type": "Running", "message": "404 Not Found"}]}});
        assert_eq!(observe_data_volume(Some(&failed)), (VolumeState::Failed, Some("404 Not Found".into())));
    }
}
