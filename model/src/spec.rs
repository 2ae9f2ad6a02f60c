//! What a template publishes about the machine: [`SpecDefaults`] (all
//! optional) and the parts it is made of (GPUs, exposed ports, probes). The
//! resolved machine a backend builds is [`crate::machine::MachineSpec`].

use serde::{Deserialize, Serialize};

use crate::hardware::{DiskBus, NicModel};
use crate::quantity::Quantity;
use crate::validation::ValidationErrors;

/// Image a VM boots when its template names none. Each backend maps it to a real image.
pub const DEFAULT_IMAGE: &str = "default";

/// Smallest guest memory accepted, in bytes (64 MiB).
pub const MIN_MEMORY_BYTES: u64 = 64 << 20;

/// Spec values a template sets for its VMs, as published. Every field is
/// optional; absent fields take the built-in defaults of [`ResolvedSpec`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SpecDefaults {
    /// Virtual CPU cores (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_cores: Option<u32>,
    /// Guest memory (default `1Gi`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, example = "2Gi"))]
    pub memory: Option<Quantity>,
    /// Boot disk size (default `10Gi`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, example = "20Gi"))]
    pub disk_size: Option<Quantity>,
    /// Base image name (default `default`, which each backend maps to its default image).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// GPUs passed through to the guest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<Gpu>,
    /// Guest ports reachable on the VM's external IP.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exposed_ports: Vec<ExposedPort>,
    /// How to tell that the guest really answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness_probe: Option<ReadinessProbe>,
    /// Cloud-init user data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    /// SSH public keys installed in the guest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ssh_keys: Vec<String>,
    /// Empty data disks beside the boot disk, e.g. `[{name: data0, size: 120Gi}]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data_disks: Vec<DataDisk>,
    /// The instance type a VM of this template gets when it names none
    /// (by name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
    /// The instance types a VM of this template may name (by name); any
    /// when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instance_types: Vec<String>,
    /// The most vCPUs a running VM can be resized to without a restart
    /// (default: none, a new count waits for a restart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cpu_cores: Option<u32>,
    /// The most memory a running VM can be resized to without a restart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, example = "4Gi"))]
    pub max_memory: Option<Quantity>,
    /// Firmware, `bios` or `efi` (default: the image's, else by the OS family).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firmware: Option<crate::profile::Firmware>,
    /// Secure Boot (EFI only; default: the image's, else on for Windows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secure_boot: Option<bool>,
    /// A persistent TPM 2.0 (default: the image's, else on for Windows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpm: Option<bool>,
    /// `linux` or `windows` (default: the image's, else `linux`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_os_family: Option<crate::profile::GuestOsFamily>,
    /// CPU sockets (default 1); the vCPUs are cores × sockets × threads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_sockets: Option<u32>,
    /// Threads per core (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_threads: Option<u32>,
    /// The boot disk's bus: `virtio` (default), `sata` or `scsi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_bus: Option<DiskBus>,
    /// The storage class of the boot disk's volume (KubeVirt only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_storage_class: Option<String>,
    /// Whether the boot disk's space is allocated when it is made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_preallocation: Option<bool>,
    /// The first NIC's model: `virtio` (default), `e1000e`, `e1000` or `rtl8139`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic_model: Option<NicModel>,
    /// One queue per vCPU on each virtio NIC (KubeVirt's `networkInterfaceMultiqueue`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_interface_multiqueue: Option<bool>,
    /// A virtio random number generator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rng: Option<bool>,
    /// A USB tablet (an absolute pointer for the graphical console).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tablet: Option<bool>,
    /// Whether the serial console is logged (default on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_serial_console: Option<bool>,
    /// Seconds the guest has to power off when stopped, before it is
    /// stopped hard (default: the backend's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period_seconds: Option<u32>,
    /// The machine type, e.g. `q35` or `pc-q35-rhel9.2.0` (default: the backend's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_type: Option<String>,
    /// The architecture: `amd64` (or `x86_64`), the only one here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub architecture: Option<String>,
    /// Node labels a node must have to run the VM (KubeVirt only).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub node_selector: std::collections::BTreeMap<String, String>,
    /// Taints the VM tolerates (KubeVirt only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<crate::scheduling::Toleration>,
    /// Kubernetes' `affinity`, as Kubernetes writes it (KubeVirt only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub affinity: Option<serde_json::Value>,
    /// Each vCPU pinned to a host CPU of its own (KubeVirt only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedicated_cpus: Option<bool>,
    /// Guest memory on huge pages of this size: `2Mi` or `1Gi` (KubeVirt only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hugepages: Option<String>,
    /// Labels of the KubeVirt `VirtualMachine` (`vm.kubevirt.io/template`;
    /// not under `vmaas.io`; KubeVirt only).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: std::collections::BTreeMap<String, String>,
    /// Annotations of the KubeVirt `VirtualMachine` (KubeVirt only).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub annotations: std::collections::BTreeMap<String, String>,
    /// Labels of its instance template, so of its pod (`kubevirt.io/size`;
    /// KubeVirt only).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub instance_labels: std::collections::BTreeMap<String, String>,
    /// Annotations of its instance template (`vm.kubevirt.io/os`; KubeVirt only).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub instance_annotations: std::collections::BTreeMap<String, String>,
}

impl SpecDefaults {
    /// Whether nothing is set (so it is left out of the JSON).
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// The guest profile these defaults set.
    pub fn profile(&self) -> crate::profile::GuestProfile {
        crate::profile::GuestProfile {
            firmware: self.firmware,
            secure_boot: self.secure_boot,
            tpm: self.tpm,
            guest_os_family: self.guest_os_family,
        }
    }
}

/// An empty data disk a template gives its VMs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct DataDisk {
    /// Its name, a DNS label other than `root`, e.g. `data0`.
    pub name: String,
    /// Its size, e.g. `120Gi`.
    #[cfg_attr(feature = "openapi", schema(value_type = String, example = "120Gi"))]
    pub size: Quantity,
    /// Its bus: `virtio` (default), `sata` or `scsi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bus: Option<DiskBus>,
    /// The storage class of its volume (KubeVirt only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class: Option<String>,
    /// Whether its space is allocated when it is made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preallocation: Option<bool>,
}

/// A GPU request, as KubeVirt writes it: `{name, device_name}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Gpu {
    /// Name of the device inside the VM spec, e.g. `gpu0`.
    pub name: String,
    /// Resource name of the host device, e.g. `nvidia.com/GA102GL_A10`.
    pub device_name: String,
    /// The PCI vendor and device ids it may also be matched by, e.g.
    /// `10DE:2236` (an instance type's GPU has both).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_device_selector: Option<String>,
}

/// A transport protocol.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// TCP.
    #[default]
    #[serde(alias = "TCP")]
    Tcp,
    /// UDP.
    #[serde(alias = "UDP")]
    Udp,
}

impl Protocol {
    /// `tcp` or `udp`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tcp => "tcp",
            Self::Udp => "udp",
        }
    }
}

/// A guest port exposed on the VM's external IP.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ExposedPort {
    /// The guest port, also used as the external port.
    pub port: u16,
    /// `tcp` (default) or `udp`.
    #[serde(default)]
    pub protocol: Protocol,
    /// Optional name, e.g. `http`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// A readiness probe as published: exactly one of `tcp` or `http`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ReadinessProbe {
    /// Ready once a TCP connection to this guest port succeeds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpProbe>,
    /// Ready once an HTTP GET of this guest port and path returns 2xx or 3xx.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpProbe>,
    /// Seconds between attempts (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_seconds: Option<u32>,
    /// Seconds after start before the VM is declared FAILED (default 300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u32>,
}

/// A TCP readiness check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TcpProbe {
    /// Guest port.
    pub port: u16,
}

/// An HTTP readiness check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct HttpProbe {
    /// Guest port.
    pub port: u16,
    /// Path to GET (default `/`).
    #[serde(default = "root_path")]
    pub path: String,
}

fn root_path() -> String {
    "/".into()
}

/// A checked readiness probe: one check, with its timing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Probe {
    /// What to check.
    pub check: ProbeCheck,
    /// Seconds between attempts.
    pub period_seconds: u32,
    /// Seconds after start before giving up.
    pub timeout_seconds: u32,
}

/// One readiness check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeCheck {
    /// A TCP connect to a guest port.
    Tcp {
        /// Guest port.
        port: u16,
    },
    /// An HTTP GET of a guest port and path.
    Http {
        /// Guest port.
        port: u16,
        /// Path.
        path: String,
    },
}

impl ProbeCheck {
    /// The guest port probed.
    pub fn port(&self) -> u16 {
        match self {
            Self::Tcp { port } | Self::Http { port, .. } => *port,
        }
    }
}

impl ReadinessProbe {
    /// Checks the probe and fills in its timing defaults, naming fields under `path`.
    pub fn compile(&self, path: &str) -> Result<Probe, ValidationErrors> {
        let mut errs = ValidationErrors::default();
        let check = match (&self.tcp, &self.http) {
            (Some(t), None) => Some(ProbeCheck::Tcp { port: t.port }),
            (None, Some(h)) => {
                if !h.path.starts_with('/') {
                    errs.push(format!("{path}.http.path"), format!("must start with '/', got {:?}", h.path));
                }
                Some(ProbeCheck::Http { port: h.port, path: h.path.clone() })
            }
            (None, None) => {
                errs.push(path, "must set exactly one of tcp or http");
                None
            }
            (Some(_), Some(_)) => {
                errs.push(path, "must set exactly one of tcp or http, not both");
                None
            }
        };
        for (v, what) in [(self.period_seconds, "period_seconds"), (self.timeout_seconds, "timeout_seconds")] {
            if v == Some(0) {
                errs.push(format!("{path}.{what}"), "must be at least 1");
            }
        }
        match check {
            Some(check) if errs.is_empty() => {
                Ok(Probe { check, period_seconds: self.period_seconds.unwrap_or(1), timeout_seconds: self.timeout_seconds.unwrap_or(300) })
            }
            _ => Err(errs),
        }
    }
}

/// Why a text is not an exposed port.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PortError {
    /// Not a number from 1 to 65535.
    #[error("{0:?} is not a port: expected 1-65535 with an optional /tcp or /udp")]
    Number(String),
    /// A protocol other than TCP or UDP.
    #[error("{text:?} has protocol {protocol:?}: expected tcp or udp")]
    Protocol {
        /// The text.
        text: String,
        /// The protocol it names.
        protocol: String,
    },
}

impl ExposedPort {
    /// Parses `80`, `80/tcp` or `53/udp`.
    pub fn parse(s: &str) -> Result<Self, PortError> {
        let (port, proto) = s.split_once('/').unwrap_or((s, "tcp"));
        let port: u16 = port.parse().ok().filter(|p| *p > 0).ok_or_else(|| PortError::Number(s.to_owned()))?;
        let protocol = match proto {
            "tcp" | "TCP" => Protocol::Tcp,
            "udp" | "UDP" => Protocol::Udp,
            other => return Err(PortError::Protocol { text: s.to_owned(), protocol: other.to_owned() }),
        };
        Ok(Self { port, protocol, name: None })
    }
}
