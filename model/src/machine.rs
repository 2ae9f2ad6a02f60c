//! The machine a backend builds: a template's defaults with the tenant's
//! parameters applied, shaped like the machine itself (boot source, CPU,
//! memory, a list of disks, a list of NICs, GPUs, cloud-init, exposed ports
//! and a readiness probe). Every backend and renderer consumes a
//! [`MachineSpec`]; nothing in it is optional that a backend needs.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::hardware::{DiskBus, Hardware, NicModel};
use crate::kube_metadata::KubeMetadata;
use crate::profile::GuestProfile;
use crate::quantity::Quantity;
use crate::scheduling::Scheduling;
use crate::spec::{ExposedPort, Gpu, Probe};
use crate::validation::ValidationErrors;

/// Image a VM boots when its template names none. Each backend maps it to a real image.
pub const DEFAULT_IMAGE: &str = "default";

/// Smallest guest memory accepted, in bytes (64 MiB).
pub const MIN_MEMORY_BYTES: u64 = 64 << 20;

/// The scheme of an image in an OCI registry.
pub const REGISTRY_SCHEME: &str = "docker://";

/// Name of the disk a VM boots from.
pub const ROOT_DISK: &str = "root";

/// Name of the NIC on the backend's own network.
pub const DEFAULT_NIC: &str = "default";

/// What the VM boots.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BootSource {
    /// Base image name; each backend maps [`DEFAULT_IMAGE`] to its own
    /// default. An `http(s)://` URL names an image to import on demand, and
    /// a `docker://` reference a containerDisk in an OCI registry.
    pub image: String,
}

impl BootSource {
    /// Whether the image is a URL to import from.
    pub fn is_url(&self) -> bool {
        self.image.contains("://")
    }

    /// Whether the image is a reference into an OCI registry (`docker://`).
    pub fn is_registry(&self) -> bool {
        self.image.starts_with(REGISTRY_SCHEME)
    }

    /// The registry reference without its scheme (`HOST/REPOSITORY:TAG`),
    /// as a containerDisk or a CDI registry source names it.
    pub fn registry_reference(&self) -> Option<&str> {
        self.image.strip_prefix(REGISTRY_SCHEME)
    }

    /// Checks an image URL: `http` or `https`, with a host, no spaces; or
    /// an OCI image reference after `docker://`.
    pub fn check_url(&self) -> Result<(), UrlError> {
        let Some((scheme, rest)) = self.image.split_once("://") else { return Ok(()) };
        if scheme == "docker" {
            return match rest.parse::<oci_spec::distribution::Reference>() {
                Ok(_) if rest.chars().all(|c| c.is_ascii_graphic()) => Ok(()),
                Ok(_) => Err(UrlError::Reference(self.image.clone(), "it has blanks or control characters".into())),
                Err(e) => Err(UrlError::Reference(self.image.clone(), e.to_string())),
            };
        }
        if scheme != "http" && scheme != "https" {
            return Err(UrlError::Scheme(scheme.to_owned()));
        }
        let host = rest.split(['/', '?', '#']).next().unwrap_or("");
        if host.is_empty() || self.image.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(UrlError::NoHost(self.image.clone()));
        }
        Ok(())
    }
}

/// Why an image URL is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    /// A scheme other than `http`, `https` and `docker`.
    #[error("an image URL must be http or https, got {0:?} (docker:// names an image in an OCI registry)")]
    Scheme(String),
    /// `docker://` and what follows is not an image reference.
    #[error("{0:?} is not an OCI image reference (docker://HOST/REPOSITORY:TAG or @sha256:DIGEST): {1}")]
    Reference(String, String),
    /// No host, or blanks or control characters in it.
    #[error("{0:?} is not a URL with a host")]
    NoHost(String),
}

/// The reason, as a field error takes it.
impl From<UrlError> for String {
    fn from(e: UrlError) -> String {
        e.to_string()
    }
}

/// The virtual CPUs: `cores` per socket, `threads` per core.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cpu {
    /// Cores (per socket).
    pub cores: u32,
    /// Sockets (default 1).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub sockets: u32,
    /// Threads per core (default 1).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub threads: u32,
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

impl Cpu {
    /// `cores` cores in one socket, one thread each.
    pub fn cores(cores: u32) -> Self {
        Self { cores, sockets: 1, threads: 1 }
    }

    /// The vCPUs the guest sees: cores × sockets × threads.
    pub fn vcpus(&self) -> u32 {
        self.cores.saturating_mul(self.sockets).saturating_mul(self.threads)
    }

    /// Whether the vCPUs are laid out beyond one socket of single-thread cores.
    pub fn has_topology(&self) -> bool {
        self.sockets != 1 || self.threads != 1
    }
}

/// Where a disk's content comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "type")]
pub enum DiskSource {
    /// A copy-on-write clone of the boot image.
    Image,
    /// Empty.
    Blank,
}

/// One disk of the machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Disk {
    /// Unique within the machine, e.g. `root`.
    pub name: String,
    /// Capacity.
    pub size: Quantity,
    /// Initial content.
    pub source: DiskSource,
    /// The bus it is on (default virtio).
    #[serde(default, skip_serializing_if = "DiskBus::is_virtio")]
    pub bus: DiskBus,
    /// The storage class its volume is made in (KubeVirt; default the cluster's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class: Option<String>,
    /// Whether its space is allocated when it is made (CDI's `preallocation`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preallocation: Option<bool>,
}

impl Disk {
    /// A disk of `size` on virtio, in the default storage class.
    pub fn new(name: impl Into<String>, size: Quantity, source: DiskSource) -> Self {
        Self { name: name.into(), size, source, bus: DiskBus::Virtio, storage_class: None, preallocation: None }
    }
}

/// The network a NIC is on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "type")]
pub enum NicNetwork {
    /// The backend's own network: QEMU user networking, or the pod network on KubeVirt.
    Default,
}

/// One network interface of the machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Nic {
    /// Unique within the machine, e.g. `default`.
    pub name: String,
    /// What it is plugged into.
    pub network: NicNetwork,
    /// Its model (default virtio).
    #[serde(default, skip_serializing_if = "NicModel::is_virtio")]
    pub model: NicModel,
}

pub use crate::nocloud::CloudInit;

/// The machine to build.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MachineSpec {
    /// What it boots.
    pub boot: BootSource,
    /// Its CPUs.
    pub cpu: Cpu,
    /// Guest memory.
    pub memory: Quantity,
    /// Its disks; the first, [`ROOT_DISK`], is a clone of the boot image.
    pub disks: Vec<Disk>,
    /// Its network interfaces.
    pub nics: Vec<Nic>,
    /// GPUs to pass through.
    pub gpus: Vec<Gpu>,
    /// What cloud-init gives the guest.
    pub cloud_init: CloudInit,
    /// Guest ports exposed on the external IP.
    pub exposed_ports: Vec<ExposedPort>,
    /// Readiness probe; without one, a running guest is ready.
    pub readiness_probe: Option<Probe>,
    /// The platform the template asks for (firmware, Secure Boot, TPM, OS
    /// family); the backend lays it over the image's and builds the result.
    #[serde(default, skip_serializing_if = "GuestProfile::is_empty")]
    pub profile: GuestProfile,
    /// How far the running guest can be resized without a restart.
    #[serde(default, skip_serializing_if = "LiveLimits::is_empty")]
    pub live: LiveLimits,
    /// The name of the instance type that gave its shape, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
    /// Machine type, architecture, devices beyond disks and NICs, grace period.
    #[serde(default, skip_serializing_if = "Hardware::is_empty")]
    pub hardware: Hardware,
    /// Where it may run and what it holds there.
    #[serde(default, skip_serializing_if = "Scheduling::is_empty")]
    pub scheduling: Scheduling,
    /// Labels and annotations its template puts on its Kubernetes objects.
    #[serde(default, skip_serializing_if = "KubeMetadata::is_empty")]
    pub kube_metadata: KubeMetadata,
}

/// How far a running guest can grow (or shrink back) without a restart:
/// the template's `max_cpu_cores` and `max_memory`. Without them a new
/// CPU count or memory size waits for a restart (`RESTART_REQUIRED`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LiveLimits {
    /// The most vCPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cpu_cores: Option<u32>,
    /// The most memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_memory: Option<Quantity>,
}

impl LiveLimits {
    /// Whether no limit is set (nothing is resized live).
    pub fn is_empty(&self) -> bool {
        self.max_cpu_cores.is_none() && self.max_memory.is_none()
    }

    /// The most memory in bytes, if set.
    pub fn max_memory_bytes(&self) -> Option<u64> {
        self.max_memory.as_ref().and_then(Quantity::to_units_ceil)
    }
}

impl Default for MachineSpec {
    fn default() -> Self {
        Self {
            boot: BootSource { image: DEFAULT_IMAGE.into() },
            cpu: Cpu::cores(1),
            memory: Quantity::from_bytes(1 << 30),
            disks: vec![Disk::new(ROOT_DISK, Quantity::from_bytes(10 << 30), DiskSource::Image)],
            nics: vec![Nic { name: DEFAULT_NIC.into(), network: NicNetwork::Default, model: NicModel::Virtio }],
            gpus: Vec::new(),
            cloud_init: CloudInit::default(),
            exposed_ports: Vec::new(),
            readiness_probe: None,
            profile: GuestProfile::default(),
            live: LiveLimits::default(),
            instance_type: None,
            hardware: Hardware::default(),
            scheduling: Scheduling::default(),
            kube_metadata: KubeMetadata::default(),
        }
    }
}

impl MachineSpec {
    /// Guest memory in bytes.
    pub fn memory_bytes(&self) -> u64 {
        self.memory.to_units_ceil().unwrap_or(0)
    }

    /// The disk the VM boots from, if it has one.
    pub fn root_disk(&self) -> Option<&Disk> {
        self.disks.iter().find(|d| d.source == DiskSource::Image)
    }

    /// The root disk, added if the spec has none.
    pub fn root_disk_mut(&mut self) -> &mut Disk {
        let i = match self.disks.iter().position(|d| d.source == DiskSource::Image) {
            Some(i) => i,
            None => {
                self.disks.insert(0, Disk::new(ROOT_DISK, Quantity::from_bytes(10 << 30), DiskSource::Image));
                0
            }
        };
        &mut self.disks[i]
    }

    /// Boot disk size in bytes (0 without a root disk).
    pub fn disk_bytes(&self) -> u64 {
        self.root_disk().and_then(|d| d.size.to_units_ceil()).unwrap_or(0)
    }

    /// Checks the values no backend can build, naming each field as
    /// `spec.<field>` in the names templates use (`cpu_cores`, `disk_size`, …).
    pub fn check(&self) -> Result<(), ValidationErrors> {
        let mut errs = ValidationErrors::default();
        for (n, field) in [(self.cpu.cores, "cpu_cores"), (self.cpu.sockets, "cpu_sockets"), (self.cpu.threads, "cpu_threads")] {
            if n == 0 {
                errs.push(format!("spec.{field}"), "must be at least 1, got 0");
            }
        }
        self.hardware.check("spec", &mut errs);
        self.scheduling.check("spec", &mut errs);
        self.kube_metadata.check("spec", &mut errs);
        match self.memory.to_units_ceil() {
            Some(b) if b >= MIN_MEMORY_BYTES => {}
            _ => errs.push("spec.memory", format!("must be at least 64Mi, got {}", self.memory)),
        }
        check_disks(&self.disks, &mut errs);
        self.check_live(&mut errs);
        if self.boot.image.is_empty() {
            errs.push("spec.image", "must not be empty");
        } else if let Err(e) = self.boot.check_url() {
            errs.push("spec.image", e);
        }
        check_unique("spec.nics", self.nics.iter().map(|n| n.name.as_str()), &mut errs);
        let mut ports = BTreeSet::new();
        for (i, p) in self.exposed_ports.iter().enumerate() {
            if p.port == 0 {
                errs.push(format!("spec.exposed_ports[{i}].port"), "must be between 1 and 65535");
            }
            if !ports.insert((p.port, p.protocol)) {
                errs.push(format!("spec.exposed_ports[{i}]"), format!("{}/{} is exposed twice", p.port, p.protocol.as_str()));
            }
        }
        for (i, g) in self.gpus.iter().enumerate() {
            if g.device_name.is_empty() {
                errs.push(format!("spec.gpus[{i}].device_name"), "must not be empty");
            }
        }
        if let Err(e) = crate::nocloud::check_ssh_keys(&self.cloud_init.ssh_keys) {
            errs.push("spec.ssh_keys", e);
        }
        if let Some(Err(e)) = self.cloud_init.user_data.as_deref().map(crate::nocloud::check_user_data) {
            errs.push("spec.user_data", e);
        }
        errs.into_result(())
    }
}

impl MachineSpec {
    /// The CPU count and memory within the live-resize limits.
    fn check_live(&self, errs: &mut ValidationErrors) {
        if self.live.max_cpu_cores.is_some() && self.cpu.has_topology() {
            let why =
                "a VM resized live counts its vCPUs in sockets of one core: give max_cpu_cores or cpu_sockets and cpu_threads, not both";
            errs.push("spec.cpu_sockets", why);
        }
        if let Some(max) = self.live.max_cpu_cores
            && self.cpu.cores > max
        {
            errs.push("spec.cpu_cores", format!("must be at most max_cpu_cores ({max}), got {}", self.cpu.cores));
        }
        if let Some(max) = self.live.max_memory_bytes()
            && self.memory_bytes() > max
        {
            let limit = self.live.max_memory.as_ref().map(Quantity::as_str).unwrap_or_default();
            errs.push("spec.memory", format!("must be at most max_memory ({limit}), got {}", self.memory));
        }
    }
}

fn check_disks(disks: &[Disk], errs: &mut ValidationErrors) {
    for (i, d) in disks.iter().enumerate() {
        let field = if d.source == DiskSource::Image { "spec.disk_size".to_owned() } else { format!("spec.disks[{i}].size") };
        match d.size.to_units_ceil() {
            Some(b) if b > 0 => {}
            _ => errs.push(field, format!("must be greater than 0, got {}", d.size)),
        }
    }
    if disks.iter().filter(|d| d.source == DiskSource::Image).count() > 1 {
        errs.push("spec.disks", "only one disk can be a clone of the boot image");
    }
    check_unique("spec.disks", disks.iter().map(|d| d.name.as_str()), errs);
}

fn check_unique<'a>(path: &str, names: impl Iterator<Item = &'a str>, errs: &mut ValidationErrors) {
    let mut seen = BTreeSet::new();
    for (i, n) in names.enumerate() {
        if !seen.insert(n) {
            errs.push(format!("{path}[{i}].name"), format!("{n:?} is used twice"));
        }
    }
}

/// Stored specs are read in the current shape, or in the flat shape of the
/// first release (`cpu_cores`, `disk_size`, `image`, `user_data`, `ssh_keys`).
impl<'de> Deserialize<'de> for MachineSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Lives only while one spec is read.
        #[allow(clippy::large_enum_variant)]
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Stored {
            Current(Current),
            Flat(Flat),
        }
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Current {
            boot: BootSource,
            cpu: Cpu,
            memory: Quantity,
            disks: Vec<Disk>,
            nics: Vec<Nic>,
            gpus: Vec<Gpu>,
            cloud_init: CloudInit,
            exposed_ports: Vec<ExposedPort>,
            readiness_probe: Option<Probe>,
            #[serde(default)]
            profile: GuestProfile,
            #[serde(default)]
            live: LiveLimits,
            #[serde(default)]
            instance_type: Option<String>,
            #[serde(default)]
            hardware: Hardware,
            #[serde(default)]
            scheduling: Scheduling,
            #[serde(default)]
            kube_metadata: KubeMetadata,
        }
        #[derive(Deserialize)]
        struct Flat {
            cpu_cores: u32,
            memory: Quantity,
            disk_size: Quantity,
            image: String,
            gpus: Vec<Gpu>,
            exposed_ports: Vec<ExposedPort>,
            readiness_probe: Option<Probe>,
            user_data: Option<String>,
            ssh_keys: Vec<String>,
        }
        Ok(match Stored::deserialize(d)? {
            Stored::Current(c) => Self {
                boot: c.boot,
                cpu: c.cpu,
                memory: c.memory,
                disks: c.disks,
                nics: c.nics,
                gpus: c.gpus,
                cloud_init: c.cloud_init,
                exposed_ports: c.exposed_ports,
                readiness_probe: c.readiness_probe,
                profile: c.profile,
                live: c.live,
                instance_type: c.instance_type,
                hardware: c.hardware,
                scheduling: c.scheduling,
                kube_metadata: c.kube_metadata,
            },
            Stored::Flat(f) => {
                let mut m = Self {
                    boot: BootSource { image: f.image },
                    cpu: Cpu::cores(f.cpu_cores),
                    memory: f.memory,
                    gpus: f.gpus,
                    cloud_init: CloudInit { user_data: f.user_data, ssh_keys: f.ssh_keys },
                    exposed_ports: f.exposed_ports,
                    readiness_probe: f.readiness_probe,
                    ..Self::default()
                };
                m.root_disk_mut().size = f.disk_size;
                m
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_reads_the_first_release_shape() {
        let m = MachineSpec::default();
        let back: MachineSpec = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert_eq!(back, m);
        let flat = r##"{"cpu_cores":4,"memory":"4Gi","disk_size":"30Gi","image":"debian-12","gpus":[],"exposed_ports":[{"port":80,"protocol":"tcp"}],
            "readiness_probe":null,"user_data":"#cloud-config","ssh_keys":["ssh-ed25519 AAAA"]}"##;
        let old: MachineSpec = serde_json::from_str(flat).unwrap();
        assert_eq!(old.cpu.cores, 4);
        assert_eq!(old.disk_bytes(), 30 << 30);
        assert_eq!(old.boot.image, "debian-12");
        assert_eq!(old.nics.len(), 1);
        assert_eq!(old.cloud_init.ssh_keys, ["ssh-ed25519 AAAA"]);
        assert!(serde_json::from_str::<MachineSpec>(r#"{"cpu":{"cores":1}}"#).is_err());
    }

    #[test]
    fn check_names_each_field() {
        let mut m = MachineSpec::default();
        m.cpu.cores = 0;
        m.root_disk_mut().size = Quantity::from_bytes(0);
        m.disks.push(Disk::new(ROOT_DISK, Quantity::from_bytes(1 << 30), DiskSource::Blank));
        m.cloud_init = CloudInit { user_data: Some("a\0b".into()), ssh_keys: vec!["not a key".into()] };
        m.boot.image = "ftp://mirror/disk.qcow2".into();
        let e = m.check().unwrap_err();
        let fields: Vec<&str> = e.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(fields, ["spec.cpu_cores", "spec.disk_size", "spec.disks[1].name", "spec.image", "spec.ssh_keys", "spec.user_data"]);
        assert!(e.iter().any(|f| f.reason.contains("must be http or https, got \"ftp\"")), "{e}");
    }

    #[test]
    fn image_urls_are_http_with_a_host() {
        let b = |i: &str| BootSource { image: i.into() };
        assert!(b("debian-12").check_url().is_ok() && !b("debian-12").is_url());
        assert!(b("https://images.example/debian.qcow2").check_url().is_ok() && b("https://x/y").is_url());
        assert!(b("file:///etc/shadow").check_url().unwrap_err().to_string().contains("http or https"));
        assert!(b("http:///nohost").check_url().unwrap_err().to_string().contains("with a host"));
        assert!(b("http://a b/c").check_url().is_err());
        assert!(b("docker://127.0.0.1:5000/disks/guest:1").check_url().is_ok());
        assert_eq!(b("docker://127.0.0.1:5000/disks/guest:1").registry_reference(), Some("127.0.0.1:5000/disks/guest:1"));
        let digest = format!("docker://quay.io/x/y@sha256:{}", "a".repeat(64));
        assert!(b(&digest).check_url().is_ok() && b(&digest).is_registry());
        for bad in ["docker://UPPER/Case:1", "docker://x/y@sha256:short", "docker://"] {
            assert!(b(bad).check_url().unwrap_err().to_string().contains("OCI image reference"), "{bad}");
        }
    }
}
