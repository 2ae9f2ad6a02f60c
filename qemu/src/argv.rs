//! The QEMU command line, typed: one `-blockdev`/`-device` pair per disk and
//! one `-netdev`/`-device` pair per NIC, each with its own id, built from the
//! machine spec and rendered into arguments in one place.

use std::ffi::OsString;
use std::net::Ipv4Addr;
use std::path::PathBuf;

use vmaas_model::{DiskBus, ExposedPort, MachineSpec, NicModel, Protocol};

use crate::accel::Accel;
pub use crate::hardware::HardwareArgs;
use crate::live::LiveArgs;
use crate::platform::PlatformArgs;

/// Booting a kernel directly, as the test images do.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelBoot {
    /// The kernel.
    pub kernel: PathBuf,
    /// Its initrd, if any.
    pub initrd: Option<PathBuf>,
    /// The kernel command line.
    pub append: String,
}

/// One disk: a qcow2 file on virtio-blk.
#[derive(Debug, Clone, PartialEq)]
pub struct DiskArg {
    /// Node and device id, e.g. `disk-root`.
    pub id: String,
    /// The qcow2 file.
    pub file: PathBuf,
    /// Boot order, for the boot disk.
    pub boot_index: Option<u32>,
    /// The bus it is on.
    pub bus: DiskBus,
}

/// A volume: a qcow2 file on virtio-blk carrying the volume's serial,
/// after the seed, so it can be unplugged and plugged again.
#[derive(Debug, Clone, PartialEq)]
pub struct VolumeArg {
    /// The disk's serial in the guest.
    pub serial: String,
    /// The volume's qcow2 file.
    pub file: PathBuf,
}

/// The block node of the machine's disk named `name`.
pub fn disk_node(name: &str) -> String {
    format!("disk-{name}")
}

/// The block node of the volume whose serial is `serial`.
pub fn volume_node(serial: &str) -> String {
    format!("vn-{serial}")
}

/// The device of the volume whose serial is `serial`.
pub fn volume_device(serial: &str) -> String {
    format!("vol-{serial}")
}

impl VolumeArg {
    /// Its block node's name.
    pub fn node(&self) -> String {
        volume_node(&self.serial)
    }

    /// Its device's id.
    pub fn device(&self) -> String {
        volume_device(&self.serial)
    }

    /// Its block node, as `-blockdev` and QMP's `blockdev-add` take it.
    pub fn blockdev(&self) -> serde_json::Value {
        let file = self.file.to_string_lossy();
        serde_json::json!({"driver": "qcow2", "node-name": self.node(), "discard": "unmap",
            "file": {"driver": "file", "filename": file, "cache": {"direct": false}}})
    }

    /// Its device, as `-device` takes it.
    pub fn device_arg(&self) -> String {
        format!("virtio-blk-pci,drive={},id={},serial={}", self.node(), self.device(), self.serial)
    }

    /// Its device, as QMP's `device_add` takes it.
    pub fn device_json(&self) -> serde_json::Value {
        serde_json::json!({"driver": "virtio-blk-pci", "id": self.device(), "drive": self.node(), "serial": self.serial})
    }
}

/// A forward of a host port to a guest port on QEMU's user network.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct Forward {
    /// `tcp` or `udp`.
    pub protocol: Protocol,
    /// Host address.
    pub host: Ipv4Addr,
    /// Host port.
    pub host_port: u16,
    /// Guest port.
    pub guest_port: u16,
}

impl Forward {
    /// The rule as `hostfwd` and `hostfwd_add` take it: `tcp:ADDR:PORT-:GPORT`.
    pub fn rule(&self) -> String {
        format!("{}:{}:{}-:{}", self.protocol.as_str(), self.host, self.host_port, self.guest_port)
    }

    /// The host side as `hostfwd_remove` takes it: `tcp:ADDR:PORT`.
    pub fn host_side(&self) -> String {
        format!("{}:{}:{}", self.protocol.as_str(), self.host, self.host_port)
    }
}

/// One NIC on QEMU's user network (the backend's default network).
#[derive(Debug, Clone, PartialEq)]
pub struct UserNicArg {
    /// Netdev and device id, e.g. `nic-default`.
    pub id: String,
    /// The NIC's MAC (the cloud-init network configuration names it by it).
    pub mac: String,
    /// The guest's host name offered by DHCP.
    pub hostname: String,
    /// Host ports forwarded into the guest.
    pub forwards: Vec<Forward>,
    /// Whether the guest may open connections beyond its network (as the
    /// host): off by default (`restrict=on`); forwards work either way.
    pub egress: bool,
    /// Its model.
    pub model: NicModel,
}

impl UserNicArg {
    /// Its netdev, as `-netdev` takes it, with its host forwards or
    /// without (a migration target, or a clone's NIC plugged in later).
    pub fn netdev_arg(&self, with_forwards: bool) -> String {
        let mut netdev = format!("user,id={},net={USER_NET},dhcpstart={GUEST_IP},hostname={}", self.id, self.hostname);
        if !self.egress {
            netdev.push_str(",restrict=on");
        }
        for f in self.forwards.iter().filter(|_| with_forwards) {
            netdev.push_str(&format!(",hostfwd={}", f.rule()));
        }
        netdev
    }
}

/// The device of the NIC on netdev `id` with `mac`, as `-device` takes it,
/// at PCI slot `slot` if one is given.
pub fn nic_device_arg(id: &str, mac: &str, slot: Option<u32>) -> String {
    nic_device(NicModel::Virtio, id, mac, slot)
}

/// [`nic_device_arg`] for a NIC of `model`.
pub fn nic_device(model: NicModel, id: &str, mac: &str, slot: Option<u32>) -> String {
    let addr = slot.map(|s| format!(",addr={s:#x}")).unwrap_or_default();
    format!("{},netdev={id},id=dev-{id},mac={mac}{addr}", crate::hardware::nic_driver(model))
}

/// One NIC on a subnet: a port of the subnet's segment in the user-space
/// switch, on loopback TCP (QEMU reconnects if the server restarts).
#[derive(Debug, Clone, PartialEq)]
pub struct SegmentNicArg {
    /// Netdev and device id, e.g. `nic-subnet0`.
    pub id: String,
    /// The port's address.
    pub addr: vmaas_switch::PortAddr,
    /// The NIC's MAC.
    pub mac: String,
}

impl SegmentNicArg {
    /// Its netdev, as `-netdev` takes it: a stream socket to its port.
    pub fn netdev_arg(&self) -> String {
        format!("stream,id={},server=off,{},reconnect-ms=1000", self.id, self.addr.qemu_options())
    }
}

/// Guest RAM mapped from a file (see `snapshot.rs`): a template's,
/// shared (the file is the snapshot), or a clone's, private (copy on write
/// from the snapshot; the clone waits for its state, `-incoming defer`).
/// Either has a `vmgenid` device.
#[derive(Debug, Clone, PartialEq)]
pub struct RamFile {
    /// The file.
    pub path: PathBuf,
    /// Shared (a template) or private (a clone).
    pub shared: bool,
}

/// The QMP socket kept for events, beside [`QemuArgs::qmp`] (what listens
/// on it: `io_error.rs`).
pub const EVENTS_SOCKET: &str = "qmp-events.sock";

/// A whole QEMU invocation.
#[derive(Debug, Clone, PartialEq)]
pub struct QemuArgs {
    /// `-name` (shown in `ps`) and the process name.
    pub name: String,
    /// Accelerator.
    pub accel: Accel,
    /// Virtual CPUs.
    pub cpus: u32,
    /// Memory in MiB.
    pub memory_mib: u64,
    /// Guest RAM in a file, else anonymous memory.
    pub ram: Option<RamFile>,
    /// TCG's translation cache in MiB (`tb-size`), else QEMU's default
    /// (1 GiB reserved; what is used of it is most of an idle clone's own
    /// memory under TCG).
    pub tcg_cache_mib: Option<u32>,
    /// Direct kernel boot, if the image has a kernel.
    pub kernel: Option<KernelBoot>,
    /// Disks, boot disk first.
    pub disks: Vec<DiskArg>,
    /// The NoCloud seed (a raw FAT image), read-only after the disks.
    pub seed: Option<PathBuf>,
    /// Volumes, after the seed.
    pub volumes: Vec<VolumeArg>,
    /// NICs on the host's user network.
    pub nics: Vec<UserNicArg>,
    /// NICs on subnets, after those.
    pub segment_nics: Vec<SegmentNicArg>,
    /// The seed and the user-network NICs at fixed PCI slots
    /// ([`SEED_SLOT`], [`USER_NIC_SLOT`]…), as a template and its clones
    /// have them: a clone's are those of its template's device state.
    pub fixed_slots: bool,
    /// PCI addresses of host GPUs to pass through.
    pub gpus: Vec<String>,
    /// Serial console socket.
    pub serial: PathBuf,
    /// The guest agent's socket (its virtio-serial port, [`AGENT_SLOT`]).
    pub agent: PathBuf,
    /// QMP socket.
    pub qmp: PathBuf,
    /// The display's VNC socket (RFB, no TCP port): the graphical console.
    pub vnc: PathBuf,
    /// Pid file written once daemonized.
    pub pidfile: PathBuf,
    /// Firmware, TPM and what the guest's OS family needs.
    pub platform: PlatformArgs,
    /// How far the guest can be resized while it runs.
    pub live: Option<LiveArgs>,
    /// CPU topology, machine type, RNG and tablet.
    pub hardware: HardwareArgs,
}

/// PCI slot of the guest agent's virtio-serial controller, on every VM
/// (fixed, and given before any device that takes the next free slot).
pub const AGENT_SLOT: u32 = 0x0e;

/// PCI slot of the seed disk of a template and its clones (below the NICs':
/// a guest that probes in slot order finds it first).
pub const SEED_SLOT: u32 = 0x0f;
/// PCI slot of the first user-network NIC of a template and its clones;
/// the others (plugged into a clone after its restore) follow it.
pub const USER_NIC_SLOT: u32 = 0x10;
/// PCI slot of the first subnet NIC plugged into a clone.
pub const SEGMENT_NIC_SLOT: u32 = 0x14;

/// The VGA's video memory in MiB.
pub const VGA_MIB: u32 = 8;

/// The network of QEMU's user-mode network (its `net=`), where a guest
/// has [`GUEST_IP`], the gateway [`USER_GATEWAY`] and the name server
/// [`USER_DNS`] (QEMU's own defaults, written out).
pub const USER_NET: &str = "10.0.2.0/24";
/// The address QEMU's user-mode network gives the guest.
pub const GUEST_IP: &str = "10.0.2.15";
/// The user network's gateway (QEMU itself).
pub const USER_GATEWAY: &str = "10.0.2.2";
/// The user network's name server (QEMU itself).
pub const USER_DNS: &str = "10.0.2.3";

/// What a NIC on QEMU's user network ([`USER_NET`]) is given: its
/// address, and on the first NIC the user network's gateway and name
/// server. The guest sets it from its seed: no DHCP round trip.
pub fn user_nic_address(first: bool) -> vmaas_model::nocloud::FixedAddress {
    vmaas_model::nocloud::FixedAddress {
        address: format!("{GUEST_IP}/24"),
        gateway: first.then(|| USER_GATEWAY.to_owned()),
        dns: if first { vec![USER_DNS.to_owned()] } else { Vec::new() },
    }
}

impl QemuArgs {
    /// The host forwards of a VM's exposed ports on `external`, plus its probe forward.
    pub fn forwards(exposed: &[ExposedPort], external: Ipv4Addr, probe: Option<(u16, u16)>) -> Vec<Forward> {
        let mut f: Vec<Forward> =
            exposed.iter().map(|p| Forward { protocol: p.protocol, host: external, host_port: p.port, guest_port: p.port }).collect();
        if let Some((host_port, guest_port)) = probe {
            f.push(Forward { protocol: Protocol::Tcp, host: Ipv4Addr::LOCALHOST, host_port, guest_port });
        }
        f
    }

    /// vCPUs and memory from the machine spec.
    pub fn shape(spec: &MachineSpec) -> (u32, u64) {
        (spec.cpu.vcpus(), spec.memory_bytes().div_ceil(1 << 20))
    }

    /// The arguments, in order.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut a: Vec<OsString> = Vec::new();
        let mut push = |parts: &[&str]| a.extend(parts.iter().map(OsString::from));
        push(&["-name", &self.name]);
        let mut machine = self.hardware.machine(self.platform.machine());
        if self.ram.is_some() {
            machine.push_str(",memory-backend=ram0");
        }
        let accel = match (self.tcg_cache_mib, self.accel) {
            (Some(mib), Accel::Tcg) => format!("tcg,tb-size={mib}"),
            _ => self.accel.as_str().to_owned(),
        };
        push(&["-machine", &machine, "-accel", &accel]);
        let mut cpu = if self.accel == Accel::Kvm { "host" } else { "max" }.to_owned();
        if let Some(o) = self.platform.cpu_options() {
            cpu.push_str(&format!(",{o}"));
        }
        // TCG's `max` is an AMD CPU without TopologyExtensions, whose guest
        // sees threads as cores: as an Intel one it sees them as threads.
        if self.accel == Accel::Tcg && self.hardware.threads > 1 {
            cpu.push_str(",vendor=GenuineIntel");
        }
        push(&["-cpu", &cpu]);
        match &self.live {
            Some(l) => push(&["-smp", &l.smp(self.cpus), "-m", &l.memory()]),
            None => push(&["-smp", &self.hardware.smp(self.cpus), "-m", &format!("{}M", self.memory_mib)]),
        }
        push(&["-nodefaults", "-no-user-config", "-display", "none", "-no-reboot"]);
        push(&["-chardev", &format!("socket,id=qga0,path={},server=on,wait=off", self.agent.display())]);
        push(&["-device", &format!("virtio-serial-pci,id=vser0,addr={AGENT_SLOT:#x}")]);
        push(&["-device", "virtserialport,bus=vser0.0,chardev=qga0,name=org.qemu.guest_agent.0"]);
        let platform = self.platform.args();
        push(&platform.iter().map(String::as_str).collect::<Vec<_>>());
        let live = self.live.as_ref().map(LiveArgs::devices).unwrap_or_default();
        push(&live.iter().map(String::as_str).collect::<Vec<_>>());
        let mut devices = self.hardware.devices();
        devices.extend(crate::hardware::controllers(self.disks.iter().map(|d| d.bus)));
        push(&devices.iter().map(String::as_str).collect::<Vec<_>>());
        if let Some(r) = &self.ram {
            // A clone opens the file read-only (its writes stay its own
            // pages): QEMU discards a private file mapping's freed pages by
            // punching holes in the file, which would zero them for every
            // other clone.
            let share = if r.shared { "share=on" } else { "share=off,readonly=on,rom=off" };
            let object = format!("memory-backend-file,id=ram0,size={}M,mem-path={},{share}", self.memory_mib, r.path.display());
            push(&["-object", &object, "-device", "vmgenid,guid=auto"]);
            // A guest booted by its firmware has no command line of ours:
            // it learns that it is a template from an SMBIOS OEM string.
            if self.kernel.is_none() {
                push(&["-smbios", "type=11,value=vmaas.template"]);
            }
            if !r.shared {
                push(&["-incoming", "defer"]);
            }
        }
        // Free page reporting: the guest hands pages it frees back to the
        // host (QEMU discards them), so an idle VM holds what it uses.
        push(&["-device", "virtio-balloon-pci,id=balloon0,free-page-reporting=on"]);
        if let Some(k) = &self.kernel {
            push(&["-kernel", &k.kernel.to_string_lossy()]);
            if let Some(i) = &k.initrd {
                push(&["-initrd", &i.to_string_lossy()]);
            }
            push(&["-append", &k.append]);
        }
        for (i, d) in self.disks.iter().enumerate() {
            let node = format!(
                "{{\"driver\":\"qcow2\",\"node-name\":\"{id}\",\"discard\":\"unmap\",\"file\":{{\"driver\":\"file\",\"filename\":{file},\"cache\":{{\"direct\":false}}}}}}",
                id = d.id,
                file = serde_json::Value::String(d.file.to_string_lossy().into_owned())
            );
            push(&["-blockdev", &node]);
            let port = self.disks[..i].iter().filter(|o| o.bus == d.bus).count();
            let mut dev = crate::hardware::disk_device(d.bus, &d.id, port);
            if let Some(b) = d.boot_index {
                dev.push_str(&format!(",bootindex={b}"));
            }
            push(&["-device", &dev]);
        }
        if let Some(seed) = &self.seed {
            let file = serde_json::Value::String(seed.to_string_lossy().into_owned());
            let node = format!(
                "{{\"driver\":\"raw\",\"node-name\":\"cidata\",\"read-only\":true,\"file\":{{\"driver\":\"file\",\"filename\":{file},\"read-only\":true}}}}"
            );
            let slot = if self.fixed_slots { format!(",addr={SEED_SLOT:#x}") } else { String::new() };
            push(&["-blockdev", &node, "-device", &format!("virtio-blk-pci,drive=cidata,id=dev-cidata{slot}")]);
        }
        for v in &self.volumes {
            push(&["-blockdev", &v.blockdev().to_string(), "-device", &v.device_arg()]);
        }
        for (i, n) in self.nics.iter().enumerate() {
            let slot = self.fixed_slots.then_some(USER_NIC_SLOT + i as u32);
            push(&["-netdev", &n.netdev_arg(true), "-device", &nic_device(n.model, &n.id, &n.mac, slot)]);
        }
        for n in &self.segment_nics {
            push(&["-netdev", &n.netdev_arg(), "-device", &nic_device_arg(&n.id, &n.mac, None)]);
        }
        push(&["-chardev", &format!("socket,id=serial0,path={},server=on,wait=off", self.serial.display())]);
        push(&["-serial", "chardev:serial0"]);
        push(&["-qmp", &format!("unix:{},server=on,wait=off", self.qmp.display())]);
        // A second monitor, kept for events (see io_error.rs).
        push(&["-qmp", &format!("unix:{},server=on,wait=off", self.qmp.with_file_name(EVENTS_SOCKET).display())]);
        for (i, addr) in self.gpus.iter().enumerate() {
            push(&["-device", &format!("vfio-pci,host={addr},id=gpu{i}")]);
        }
        // The graphical console: a standard VGA (its VRAM fits 1024×768 twice)
        // served over VNC on a unix socket only, never a TCP port.
        push(&["-device", &format!("VGA,id=vga0,vgamem_mb={VGA_MIB}")]);
        push(&["-vnc", &format!("unix:{}", self.vnc.display())]);
        push(&["-daemonize", "-pidfile", &self.pidfile.to_string_lossy()]);
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> QemuArgs {
        QemuArgs {
            name: "vmaas-web,process=vmaas-0b3c5e0e".into(),
            accel: Accel::Tcg,
            cpus: 2,
            memory_mib: 256,
            ram: None,
            tcg_cache_mib: None,
            kernel: None,
            disks: vec![
                DiskArg { id: "disk-root".into(), file: "/v/disk.qcow2".into(), boot_index: Some(1), bus: DiskBus::Virtio },
                DiskArg { id: "disk-data".into(), file: "/v/data.qcow2".into(), boot_index: None, bus: DiskBus::Virtio },
            ],
            nics: vec![UserNicArg {
                id: "nic-default".into(),
                hostname: "web".into(),
                forwards: QemuArgs::forwards(
                    &[ExposedPort { port: 80, protocol: vmaas_model::Protocol::Tcp, name: None }],
                    Ipv4Addr::new(127, 42, 0, 1),
                    Some((40000, 80)),
                ),
                mac: "52:54:00:12:34:56".into(),
                egress: false,
                model: NicModel::Virtio,
            }],
            segment_nics: vec![],
            fixed_slots: false,
            seed: Some("/v/cidata.img".into()),
            volumes: vec![],
            gpus: vec![],
            serial: "/v/serial.sock".into(),
            agent: "/v/qga.sock".into(),
            qmp: "/v/qmp.sock".into(),
            vnc: "/v/vnc.sock".into(),
            pidfile: "/v/qemu.pid".into(),
            platform: PlatformArgs::default(),
            live: None,
            hardware: HardwareArgs::default(),
        }
    }

    fn after<'a>(a: &'a [String], flag: &str) -> Vec<&'a str> {
        a.windows(2).filter(|w| w[0] == flag).map(|w| w[1].as_str()).collect()
    }

    #[test]
    fn one_blockdev_and_device_per_disk_and_one_netdev_per_nic() {
        let a: Vec<String> = args().to_args().into_iter().map(|s| s.into_string().unwrap()).collect();
        let blockdevs = after(&a, "-blockdev");
        assert_eq!(blockdevs.len(), 3);
        let root: serde_json::Value = serde_json::from_str(blockdevs[0]).unwrap();
        assert_eq!(root["node-name"], "disk-root");
        assert_eq!(root["file"]["filename"], "/v/disk.qcow2");
        let seed: serde_json::Value = serde_json::from_str(blockdevs[2]).unwrap();
        assert_eq!(
            (&seed["driver"], &seed["read-only"], &seed["file"]["filename"]),
            (&"raw".into(), &true.into(), &"/v/cidata.img".into())
        );
        let devices = after(&a, "-device");
        assert_eq!(
            devices,
            [
                "virtio-serial-pci,id=vser0,addr=0xe",
                "virtserialport,bus=vser0.0,chardev=qga0,name=org.qemu.guest_agent.0",
                "virtio-balloon-pci,id=balloon0,free-page-reporting=on",
                "virtio-blk-pci,drive=disk-root,id=dev-disk-root,bootindex=1",
                "virtio-blk-pci,drive=disk-data,id=dev-disk-data",
                "virtio-blk-pci,drive=cidata,id=dev-cidata",
                "virtio-net-pci,netdev=nic-default,id=dev-nic-default,mac=52:54:00:12:34:56",
                "VGA,id=vga0,vgamem_mb=8"
            ]
        );
        assert_eq!(after(&a, "-vnc"), ["unix:/v/vnc.sock"], "the display on a unix socket, no TCP port");
        assert_eq!(
            after(&a, "-netdev"),
            [
                "user,id=nic-default,net=10.0.2.0/24,dhcpstart=10.0.2.15,hostname=web,restrict=on,hostfwd=tcp:127.42.0.1:80-:80,hostfwd=tcp:127.0.0.1:40000-:80"
            ]
        );
        assert_eq!(after(&a, "-m"), ["256M"]);
        assert!(after(&a, "-chardev").contains(&"socket,id=qga0,path=/v/qga.sock,server=on,wait=off"), "the guest agent's socket");
    }

    #[test]
    fn volumes_come_after_the_seed_with_their_serial() {
        let mut q = args();
        q.volumes.push(VolumeArg { serial: "0b3c5e0e12344abc9def".into(), file: "/d/volumes/0b3c.qcow2".into() });
        let a: Vec<String> = q.to_args().into_iter().map(|s| s.into_string().unwrap()).collect();
        let node: serde_json::Value = serde_json::from_str(after(&a, "-blockdev")[3]).unwrap();
        assert_eq!((&node["node-name"], &node["file"]["filename"]), (&"vn-0b3c5e0e12344abc9def".into(), &"/d/volumes/0b3c.qcow2".into()));
        assert_eq!(node, q.volumes[0].blockdev(), "the command line and hotplug name the node alike");
        assert_eq!(
            after(&a, "-device")[6],
            "virtio-blk-pci,drive=vn-0b3c5e0e12344abc9def,id=vol-0b3c5e0e12344abc9def,serial=0b3c5e0e12344abc9def"
        );
        assert!(q.volumes[0].node().len() < 32, "QEMU's node names hold 31 characters");
    }

    #[test]
    fn a_clone_maps_its_ram_private_and_waits_for_its_state() {
        let mut q = args();
        q.ram = Some(RamFile { path: "/d/snapshots/k/ram".into(), shared: false });
        let a: Vec<String> = q.to_args().iter().map(|s| s.to_string_lossy().into_owned()).collect();
        assert_eq!(after(&a, "-machine")[0], "pc,hpet=off,memory-backend=ram0");
        assert_eq!(
            after(&a, "-object")[0],
            "memory-backend-file,id=ram0,size=256M,mem-path=/d/snapshots/k/ram,share=off,readonly=on,rom=off"
        );
        assert!(a.windows(2).any(|w| w == ["-device", "vmgenid,guid=auto"]) && a.windows(2).any(|w| w == ["-incoming", "defer"]));
        assert_eq!(after(&a, "-accel")[0], "tcg");
        q.tcg_cache_mib = Some(16);
        let a: Vec<String> = q.to_args().iter().map(|s| s.to_string_lossy().into_owned()).collect();
        assert_eq!(after(&a, "-accel")[0], "tcg,tb-size=16");
        q.fixed_slots = true;
        let a: Vec<String> = q.to_args().iter().map(|s| s.to_string_lossy().into_owned()).collect();
        let devices = after(&a, "-device");
        assert!(devices.contains(&"virtio-blk-pci,drive=cidata,id=dev-cidata,addr=0xf"), "{devices:?}");
        assert!(devices.contains(&"virtio-net-pci,netdev=nic-default,id=dev-nic-default,mac=52:54:00:12:34:56,addr=0x10"), "{devices:?}");
        q.ram = Some(RamFile { path: "/d/snapshots/k/ram".into(), shared: true });
        let a: Vec<String> = q.to_args().iter().map(|s| s.to_string_lossy().into_owned()).collect();
        assert!(after(&a, "-object")[0].ends_with("share=on") && !a.contains(&"-incoming".to_owned()), "a template boots");
        assert_eq!(after(&a, "-smbios"), ["type=11,value=vmaas.template"], "a guest its firmware boots learns it from an OEM string");
        q.kernel = Some(KernelBoot { kernel: "/i/vmlinux".into(), initrd: None, append: "console=ttyS0 vmaas.template".into() });
        let a: Vec<String> = q.to_args().iter().map(|s| s.to_string_lossy().into_owned()).collect();
        assert!(after(&a, "-smbios").is_empty(), "a booted kernel learns it from its command line");
    }

    #[test]
    fn egress_is_closed_unless_opened() {
        let mut q = args();
        q.nics[0].egress = true;
        let a: Vec<String> = q.to_args().into_iter().map(|s| s.into_string().unwrap()).collect();
        assert!(!after(&a, "-netdev")[0].contains("restrict"), "{a:?}");
    }

    #[test]
    fn a_subnet_nic_is_a_stream_netdev_on_its_port_socket() {
        let mut q = args();
        let addr = vmaas_switch::PortAddr::Tcp(40001);
        q.segment_nics.push(SegmentNicArg { id: "nic-subnet0".into(), addr, mac: "52:54:00:01:02:03".into() });
        let a: Vec<String> = q.to_args().into_iter().map(|s| s.into_string().unwrap()).collect();
        let stream = "stream,id=nic-subnet0,server=off,addr.type=inet,addr.host=127.0.0.1,addr.port=40001,reconnect-ms=1000";
        assert_eq!(after(&a, "-netdev")[1], stream);
        let devices = after(&a, "-device");
        assert_eq!(devices[devices.len() - 2], "virtio-net-pci,netdev=nic-subnet0,id=dev-nic-subnet0,mac=52:54:00:01:02:03");
    }
}
