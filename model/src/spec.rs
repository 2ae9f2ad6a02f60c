//! The machine a template describes: the defaults a template publishes
//! ([`SpecDefaults`], all optional) and the fully resolved spec a backend
//! builds ([`ResolvedSpec`], nothing optional that a backend needs).

use serde::{Deserialize, Serialize};

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
}

impl SpecDefaults {
    /// Whether nothing is set (so it is left out of the JSON).
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
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

/// The machine to build: the template's defaults with the tenant's parameters
/// applied. This is what every backend and renderer consumes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResolvedSpec {
    /// Virtual CPU cores.
    pub cpu_cores: u32,
    /// Guest memory.
    pub memory: Quantity,
    /// Boot disk size.
    pub disk_size: Quantity,
    /// Base image name.
    pub image: String,
    /// GPUs to pass through.
    pub gpus: Vec<Gpu>,
    /// Guest ports exposed on the external IP.
    pub exposed_ports: Vec<ExposedPort>,
    /// Readiness probe; without one, a running guest is ready.
    pub readiness_probe: Option<Probe>,
    /// Cloud-init user data.
    pub user_data: Option<String>,
    /// SSH public keys.
    pub ssh_keys: Vec<String>,
}

impl Default for ResolvedSpec {
    fn default() -> Self {
        Self {
            cpu_cores: 1,
            memory: Quantity::from_bytes(1 << 30),
            disk_size: Quantity::from_bytes(10 << 30),
            image: DEFAULT_IMAGE.into(),
            gpus: Vec::new(),
            exposed_ports: Vec::new(),
            readiness_probe: None,
            user_data: None,
            ssh_keys: Vec::new(),
        }
    }
}

impl ResolvedSpec {
    /// Guest memory in bytes.
    pub fn memory_bytes(&self) -> u64 {
        self.memory.to_units_ceil().unwrap_or(0)
    }

    /// Boot disk size in bytes.
    pub fn disk_bytes(&self) -> u64 {
        self.disk_size.to_units_ceil().unwrap_or(0)
    }

    /// Checks the values no backend can build, naming each field as `spec.<field>`.
    pub fn check(&self) -> Result<(), ValidationErrors> {
        let mut errs = ValidationErrors::default();
        if self.cpu_cores == 0 {
            errs.push("spec.cpu_cores", "must be at least 1, got 0");
        }
        match self.memory.to_units_ceil() {
            Some(b) if b >= MIN_MEMORY_BYTES => {}
            _ => errs.push("spec.memory", format!("must be at least 64Mi, got {}", self.memory)),
        }
        match self.disk_size.to_units_ceil() {
            Some(b) if b > 0 => {}
            _ => errs.push("spec.disk_size", format!("must be greater than 0, got {}", self.disk_size)),
        }
        if self.image.is_empty() {
            errs.push("spec.image", "must not be empty");
        }
        let mut ports = std::collections::BTreeSet::new();
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
        errs.into_result(())
    }
}
