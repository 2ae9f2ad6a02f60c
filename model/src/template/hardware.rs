//! A template's virtual hardware ([`crate::hardware`]) onto its machine:
//! the CPU topology, the disks' buses, storage classes and preallocation,
//! the first NIC's model, the machine-wide [`crate::Hardware`] and where it
//! may run ([`crate::scheduling::Scheduling`]).

use crate::hardware::{Hardware, architecture};
use crate::machine::{DiskSource, MachineSpec};
use crate::spec::{DataDisk, SpecDefaults};
use crate::validation::{ValidationErrors, check_dns_subdomain};

impl SpecDefaults {
    /// Lays this template's hardware over `spec` (its disks already made).
    pub(super) fn apply_hardware(&self, spec: &mut MachineSpec, errs: &mut ValidationErrors) {
        spec.cpu.sockets = self.cpu_sockets.unwrap_or(1);
        spec.cpu.threads = self.cpu_threads.unwrap_or(1);
        let root = spec.root_disk_mut();
        root.bus = self.disk_bus.unwrap_or_default();
        root.preallocation = self.disk_preallocation;
        root.storage_class = storage_class(self.disk_storage_class.as_deref(), "spec_defaults.disk_storage_class", errs);
        if let Some(nic) = spec.nics.first_mut() {
            nic.model = self.nic_model.unwrap_or_default();
        }
        spec.hardware = Hardware {
            machine_type: self.machine_type.clone(),
            architecture: self.architecture.as_deref().map(architecture),
            termination_grace_period_seconds: self.termination_grace_period_seconds,
            network_interface_multiqueue: self.network_interface_multiqueue.unwrap_or(false),
            rng: self.rng.unwrap_or(false),
            tablet: self.tablet.unwrap_or(false),
            log_serial_console: self.log_serial_console,
        };
        spec.scheduling = crate::scheduling::Scheduling {
            node_selector: self.node_selector.clone(),
            tolerations: self.tolerations.clone(),
            affinity: self.affinity.clone(),
            dedicated_cpus: self.dedicated_cpus.unwrap_or(false),
            hugepages: self.hugepages.clone(),
        };
        spec.kube_metadata = crate::kube_metadata::KubeMetadata {
            labels: self.labels.clone(),
            annotations: self.annotations.clone(),
            instance_labels: self.instance_labels.clone(),
            instance_annotations: self.instance_annotations.clone(),
        };
    }
}

/// A data disk's machine disk, naming its fields under `field`.
pub(super) fn data_disk(d: &DataDisk, field: &str, errs: &mut ValidationErrors) -> crate::Disk {
    let mut disk = crate::Disk::new(d.name.clone(), d.size.clone(), DiskSource::Blank);
    disk.bus = d.bus.unwrap_or_default();
    disk.preallocation = d.preallocation;
    disk.storage_class = storage_class(d.storage_class.as_deref(), &format!("{field}.storage_class"), errs);
    disk
}

/// A storage class's name, checked (a DNS subdomain, as Kubernetes names it).
fn storage_class(name: Option<&str>, field: &str, errs: &mut ValidationErrors) -> Option<String> {
    let name = name?;
    match check_dns_subdomain(name) {
        Ok(()) => Some(name.to_owned()),
        Err(e) => {
            errs.push(field, e.to_string());
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{DiskBus, NicModel, Template, VirtualMachineTemplate};

    fn compile(defaults: serde_json::Value) -> Result<Template, crate::ValidationErrors> {
        let t: VirtualMachineTemplate = serde_json::from_value(serde_json::json!({"id": "w", "spec_defaults": defaults})).unwrap();
        Template::compile(t)
    }

    #[test]
    fn seed_002_s_hardware_reaches_the_machine() {
        let t = compile(serde_json::json!({
            "cpu_cores": 4, "cpu_sockets": 2, "cpu_threads": 2, "disk_bus": "sata", "nic_model": "e1000e",
            "data_disks": [{"name": "data0", "size": "120Gi", "storage_class": "ocs-rbd", "preallocation": false}],
            "network_interface_multiqueue": true, "rng": true, "tablet": true, "log_serial_console": false,
            "termination_grace_period_seconds": 3600, "machine_type": "pc-q35-rhel9.2.0", "architecture": "x86_64"
        }))
        .unwrap();
        let m = t.resolve(&Default::default(), "p").unwrap().spec;
        assert_eq!((m.cpu.vcpus(), m.cpu.sockets, m.cpu.threads), (16, 2, 2));
        assert_eq!(m.disks[0].bus, DiskBus::Sata);
        assert_eq!(
            (m.disks[1].bus, m.disks[1].storage_class.as_deref(), m.disks[1].preallocation),
            (DiskBus::Virtio, Some("ocs-rbd"), Some(false))
        );
        assert_eq!(m.nics[0].model, NicModel::E1000e);
        let h = &m.hardware;
        assert!(h.network_interface_multiqueue && h.rng && h.tablet);
        assert_eq!((h.log_serial_console, h.termination_grace_period_seconds), (Some(false), Some(3600)));
        assert_eq!((h.machine_type.as_deref(), h.architecture.as_deref()), (Some("pc-q35-rhel9.2.0"), Some("amd64")));
    }

    #[test]
    fn bad_hardware_is_refused_by_field() {
        let e = compile(serde_json::json!({
            "cpu_sockets": 0, "architecture": "s390x", "machine_type": "virt", "max_cpu_cores": 4, "cpu_threads": 2,
            "disk_storage_class": "Not_A_Class"
        }))
        .unwrap_err();
        let fields: Vec<&str> = e.0.iter().map(|f| f.field.as_str()).collect();
        for f in
            ["spec_defaults.cpu_sockets", "spec_defaults.architecture", "spec_defaults.machine_type", "spec_defaults.disk_storage_class"]
        {
            assert!(fields.contains(&f), "{f} in {e:?}");
        }
        assert!(e.0.iter().any(|f| f.reason.contains("resized live")), "{e:?}");
    }
}
