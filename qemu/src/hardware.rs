//! A machine's virtual hardware ([`vmaas_model::hardware`]) on QEMU: the
//! CPU topology (`-smp`), the machine type, each disk on its bus (virtio-blk,
//! SATA on an AHCI controller, SCSI on virtio-scsi), the first NIC's model,
//! a virtio RNG and a USB tablet; and what of it (and of where a VM may
//! run) this backend cannot express ([`unsupported`]), refused at the API
//! naming the field.

use std::collections::BTreeSet;
use std::path::Path;

use vmaas_model::hardware::is_q35;
use vmaas_model::{DiskBus, DiskSource, MachineSpec, NicModel};

/// The AHCI controller SATA disks sit on (its ports are `sata0.0`…).
const SATA: &str = "sata0";
/// The virtio-scsi controller SCSI disks sit on.
const SCSI: &str = "scsi0";
/// Ports of one AHCI controller.
pub const SATA_PORTS: usize = 6;

/// What of the hardware reaches QEMU's command line beyond disks and NICs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HardwareArgs {
    /// Sockets (1 by default).
    pub sockets: u32,
    /// Threads per core (1 by default).
    pub threads: u32,
    /// The machine type in place of the platform's `pc` or `q35`.
    pub machine_type: Option<String>,
    /// A virtio RNG fed by the host's `/dev/urandom`.
    pub rng: bool,
    /// A USB tablet on an xHCI controller.
    pub tablet: bool,
}

impl HardwareArgs {
    /// The hardware `m` asks for.
    pub fn of(m: &MachineSpec) -> Self {
        Self {
            sockets: m.cpu.sockets.max(1),
            threads: m.cpu.threads.max(1),
            machine_type: m.hardware.machine_type.clone(),
            rng: m.hardware.rng,
            tablet: m.hardware.tablet,
        }
    }

    /// Whether it is what every VM has (one socket of single-thread
    /// cores, the platform's machine, no extra device).
    pub fn is_plain(&self) -> bool {
        self.sockets <= 1 && self.threads <= 1 && self.machine_type.is_none() && !self.rng && !self.tablet
    }

    /// `-smp` for `cpus` vCPUs laid out as asked.
    pub fn smp(&self, cpus: u32) -> String {
        let (s, t) = (self.sockets.max(1), self.threads.max(1));
        if s == 1 && t == 1 {
            return cpus.to_string();
        }
        format!("{cpus},sockets={s},cores={},threads={t}", (cpus / (s * t)).max(1))
    }

    /// `-machine`: the platform's (`q35,smm=on,hpet=off`) with its
    /// family replaced by the machine type asked for.
    pub fn machine(&self, platform: &str) -> String {
        match &self.machine_type {
            Some(t) => match platform.split_once(',') {
                Some((_, options)) => format!("{t},{options}"),
                None => t.clone(),
            },
            None => platform.to_owned(),
        }
    }

    /// The RNG's and the tablet's arguments.
    pub fn devices(&self) -> Vec<String> {
        let mut a = Vec::new();
        if self.rng {
            a.extend(
                ["-object", "rng-random,id=rng0,filename=/dev/urandom", "-device", "virtio-rng-pci,rng=rng0,id=rng"].map(String::from),
            );
        }
        if self.tablet {
            a.extend(["-device", "qemu-xhci,id=usb0", "-device", "usb-tablet,bus=usb0.0,id=tablet"].map(String::from));
        }
        a
    }
}

/// The controllers the disks on `buses` need, as `-device` arguments.
pub fn controllers(buses: impl Iterator<Item = DiskBus>) -> Vec<String> {
    let buses: Vec<DiskBus> = buses.collect();
    let mut a = Vec::new();
    if buses.contains(&DiskBus::Sata) {
        a.extend(["-device".to_owned(), format!("ahci,id={SATA}")]);
    }
    if buses.contains(&DiskBus::Scsi) {
        a.extend(["-device".to_owned(), format!("virtio-scsi-pci,id={SCSI}")]);
    }
    a
}

/// The `-device` of the disk on block node `node` on `bus`; `port` is its
/// place among the disks on that bus.
pub fn disk_device(bus: DiskBus, node: &str, port: usize) -> String {
    match bus {
        DiskBus::Virtio => format!("virtio-blk-pci,drive={node},id=dev-{node}"),
        DiskBus::Sata => format!("ide-hd,drive={node},id=dev-{node},bus={SATA}.{port}"),
        DiskBus::Scsi => format!("scsi-hd,drive={node},id=dev-{node},bus={SCSI}.0"),
    }
}

/// QEMU's device for a NIC of `model`.
pub fn nic_driver(model: NicModel) -> &'static str {
    match model {
        NicModel::Virtio => "virtio-net-pci",
        NicModel::E1000e => "e1000e",
        NicModel::E1000 => "e1000",
        NicModel::Rtl8139 => "rtl8139",
    }
}

/// The machine types `qemu` knows (`-machine help`); empty if it cannot
/// be asked.
pub fn machines(qemu: &Path) -> BTreeSet<String> {
    let Ok(out) = std::process::Command::new(qemu).args(["-machine", "help"]).output() else { return BTreeSet::new() };
    String::from_utf8_lossy(&out.stdout).lines().skip(1).filter_map(|l| l.split_whitespace().next()).map(str::to_owned).collect()
}

/// What of `m`'s hardware the qemu backend cannot express: the field (as
/// a template names it) and why. `known` is QEMU's machine types.
pub fn unsupported(m: &MachineSpec, known: &BTreeSet<String>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut no = |field: String, why: &str| out.push((field, why.to_owned()));
    for d in &m.disks {
        let field = match d.source {
            DiskSource::Image => "disk_storage_class".to_owned(),
            _ => format!("data_disks.{}.storage_class", d.name),
        };
        if d.storage_class.is_some() {
            no(field, "the qemu backend keeps disks as files on this host: it has no storage classes");
        }
    }
    if m.disks.iter().filter(|d| d.bus == DiskBus::Sata).count() > SATA_PORTS {
        no("disk_bus".into(), "the qemu backend's SATA controller has 6 ports");
    }
    if m.root_disk().is_some_and(|d| d.preallocation == Some(true)) {
        no("disk_preallocation".into(), "the qemu backend's boot disk is a copy-on-write layer over its image, which is not preallocated");
    }
    if m.hardware.network_interface_multiqueue {
        no("network_interface_multiqueue".into(), "the qemu backend's NICs (user-mode networking and stream sockets) have one queue each");
    }
    if m.hardware.log_serial_console == Some(false) {
        no("log_serial_console".into(), "the qemu backend reads the serial console's log to see a guest boot or panic: it is always kept");
    }
    let sched = &m.scheduling;
    let one_host = "the qemu backend runs every VM on this one host: there are no nodes to choose among";
    for (set, field) in [
        (!sched.node_selector.is_empty(), "node_selector"),
        (!sched.tolerations.is_empty(), "tolerations"),
        (sched.affinity.is_some(), "affinity"),
    ] {
        if set {
            no(field.into(), one_host);
        }
    }
    if sched.dedicated_cpus {
        no("dedicated_cpus".into(), "the qemu backend does not pin vCPUs to host CPUs");
    }
    if sched.hugepages.is_some() {
        no("hugepages".into(), "the qemu backend does not back guest memory with huge pages");
    }
    for field in m.kube_metadata.fields() {
        no(field.into(), "the qemu backend makes no Kubernetes objects to carry them");
    }
    if let Some(t) = &m.hardware.machine_type {
        if !known.is_empty() && !known.contains(t) {
            no("machine_type".into(), &format!("QEMU here has no machine type {t:?} (`qemu-system-x86_64 -machine help` lists them)"));
        } else if !is_q35(t) && m.profile.secure_boot == Some(true) {
            no("machine_type".into(), &format!("Secure Boot needs SMM, which only a q35 machine has; {t:?} is not one"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_says_what_the_machine_asks() {
        let h = HardwareArgs { sockets: 2, threads: 2, machine_type: Some("pc-q35-8.2".into()), rng: true, tablet: true };
        assert_eq!(h.smp(8), "8,sockets=2,cores=2,threads=2");
        assert_eq!(HardwareArgs::default().smp(3), "3");
        assert_eq!(h.machine("q35,smm=on,hpet=off"), "pc-q35-8.2,smm=on,hpet=off");
        assert_eq!(HardwareArgs::default().machine("pc,hpet=off"), "pc,hpet=off");
        assert!(h.devices().join(" ").contains("virtio-rng-pci,rng=rng0") && h.devices().join(" ").contains("usb-tablet"));
        assert!(!h.is_plain() && HardwareArgs::of(&MachineSpec::default()).is_plain());
        assert_eq!(disk_device(DiskBus::Sata, "disk-root", 0), "ide-hd,drive=disk-root,id=dev-disk-root,bus=sata0.0");
        assert_eq!(controllers([DiskBus::Sata, DiskBus::Virtio, DiskBus::Sata].into_iter()), ["-device", "ahci,id=sata0"]);
        assert_eq!(nic_driver(NicModel::E1000e), "e1000e");
    }

    #[test]
    fn what_qemu_cannot_do_is_named() {
        let mut m = MachineSpec::default();
        m.disks[0].storage_class = Some("fast".into());
        m.hardware.network_interface_multiqueue = true;
        m.hardware.machine_type = Some("pc-q35-rhel9.2.0".into());
        m.hardware.log_serial_console = Some(false);
        m.scheduling.node_selector.insert("zone".into(), "a".into());
        m.scheduling.hugepages = Some("2Mi".into());
        m.kube_metadata.instance_labels.insert("kubevirt.io/size".into(), "small".into());
        let known: BTreeSet<String> = ["pc-q35-8.2", "q35", "pc"].map(String::from).into();
        let fields: Vec<String> = unsupported(&m, &known).into_iter().map(|(f, _)| f).collect();
        assert_eq!(
            fields,
            [
                "disk_storage_class",
                "network_interface_multiqueue",
                "log_serial_console",
                "node_selector",
                "hugepages",
                "instance_labels",
                "machine_type"
            ]
        );
        m.hardware = Default::default();
        m.kube_metadata = Default::default();
        m.scheduling = Default::default();
        m.disks[0].storage_class = None;
        assert!(unsupported(&m, &known).is_empty());
    }
}
