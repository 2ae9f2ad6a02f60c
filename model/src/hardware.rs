//! The virtual hardware a guest sees beyond its CPUs, memory and disk
//! sizes, as KubeVirt's VirtualMachine writes it (seed 002): the bus each
//! disk sits on, the model of the first NIC, multiqueue, a random number
//! generator, a USB tablet, serial console logging, the machine type, the
//! architecture and how long a guest has to shut down.
//!
//! A template publishes them ([`crate::spec::SpecDefaults`]); the machine
//! carries them ([`Hardware`], [`DiskBus`] on each disk, [`NicModel`] on
//! each NIC). Every backend renders what it can express and refuses the
//! rest, naming the field and itself (`vmaas_backend::Backend::unsupported`).

use serde::{Deserialize, Serialize};

use crate::validation::ValidationErrors;

/// The bus a disk is attached to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum DiskBus {
    /// Paravirtual (virtio-blk): fastest, needs virtio drivers in the guest.
    #[default]
    Virtio,
    /// SATA (AHCI): what a guest without virtio drivers (Windows) boots from.
    Sata,
    /// SCSI (virtio-scsi).
    Scsi,
}

impl DiskBus {
    /// Its word, as KubeVirt's `disk.bus` takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Virtio => "virtio",
            Self::Sata => "sata",
            Self::Scsi => "scsi",
        }
    }

    /// Whether it is the default (left out of the JSON).
    pub fn is_virtio(&self) -> bool {
        *self == Self::Virtio
    }

    /// The bus its word names.
    pub fn parse(word: &str) -> Option<Self> {
        [Self::Virtio, Self::Sata, Self::Scsi].into_iter().find(|b| b.as_str() == word)
    }
}

/// The model of a network interface.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum NicModel {
    /// Paravirtual (virtio-net).
    #[default]
    Virtio,
    /// Intel 82574L (`e1000e`): a driver every Windows has.
    E1000e,
    /// Intel 82540EM (`e1000`).
    E1000,
    /// Realtek RTL8139.
    Rtl8139,
}

impl NicModel {
    /// Its word, as KubeVirt's `interface.model` takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Virtio => "virtio",
            Self::E1000e => "e1000e",
            Self::E1000 => "e1000",
            Self::Rtl8139 => "rtl8139",
        }
    }

    /// Whether it is the default (left out of the JSON).
    pub fn is_virtio(&self) -> bool {
        *self == Self::Virtio
    }

    /// The model its word names.
    pub fn parse(word: &str) -> Option<Self> {
        [Self::Virtio, Self::E1000e, Self::E1000, Self::Rtl8139].into_iter().find(|m| m.as_str() == word)
    }
}

/// The one architecture VMs run on here, as KubeVirt's `spec.architecture`
/// names it.
pub const ARCHITECTURE: &str = "amd64";

/// The machine-wide hardware of a VM. Every field is optional: absent, the
/// backend's default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hardware {
    /// The machine type, e.g. `q35` or `pc-q35-rhel9.2.0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_type: Option<String>,
    /// The architecture, written out ([`ARCHITECTURE`]) when asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub architecture: Option<String>,
    /// Seconds the guest has to power off after the ACPI button before it
    /// is stopped hard.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period_seconds: Option<u32>,
    /// One queue per vCPU on each virtio NIC.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub network_interface_multiqueue: bool,
    /// A virtio random number generator fed by the host's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rng: bool,
    /// A USB tablet: an absolute pointer, so the graphical console's mouse
    /// follows the client's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tablet: bool,
    /// Whether the serial console is logged (KubeVirt's
    /// `logSerialConsole`; default: the backend's, on for both here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_serial_console: Option<bool>,
}

/// The longest grace period taken (a day).
pub const MAX_GRACE_SECONDS: u32 = 86_400;

impl Hardware {
    /// Whether nothing is set.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// Checks the values, naming fields under `prefix` (`spec_defaults`).
    pub fn check(&self, prefix: &str, errs: &mut ValidationErrors) {
        if let Some(t) = &self.machine_type
            && let Err(why) = check_machine_type(t)
        {
            errs.push(format!("{prefix}.machine_type"), why.to_string());
        }
        if let Some(a) = &self.architecture
            && a != ARCHITECTURE
        {
            errs.push(format!("{prefix}.architecture"), format!("only {ARCHITECTURE} (x86_64) runs here, got {a:?}"));
        }
        if let Some(s) = self.termination_grace_period_seconds
            && s > MAX_GRACE_SECONDS
        {
            errs.push(
                format!("{prefix}.termination_grace_period_seconds"),
                format!("must be at most {MAX_GRACE_SECONDS} (a day), got {s}"),
            );
        }
    }
}

/// The architecture a template writes, in KubeVirt's word: `x86_64` is
/// taken as [`ARCHITECTURE`]; any other word is kept, and refused by
/// [`Hardware::check`].
pub fn architecture(word: &str) -> String {
    if word == "x86_64" { ARCHITECTURE.to_owned() } else { word.to_owned() }
}

/// A machine type: a `q35` or `pc` machine (`q35`, `pc-q35-rhel9.2.0`,
/// `pc-i440fx-8.2`), at most 63 characters of lower-case letters, digits,
/// dots, dashes and underscores.
fn check_machine_type(t: &str) -> Result<(), MachineTypeError> {
    let family = t == "q35" || t == "pc" || t.starts_with("pc-q35-") || t.starts_with("pc-i440fx-");
    if !family {
        return Err(MachineTypeError::Family(t.to_owned()));
    }
    if t.len() > 63 || !t.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '-' | '_')) {
        return Err(MachineTypeError::Characters(t.to_owned()));
    }
    Ok(())
}

/// Why a word is not a machine type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MachineTypeError {
    /// Not of the q35 or i440fx family.
    #[error("{0:?} is not an x86 machine type: expected q35, pc, pc-q35-… or pc-i440fx-…")]
    Family(String),
    /// Too long, or characters a machine type does not have.
    #[error("{0:?} has characters a machine type does not: lower-case letters, digits, '.', '-' and '_', at most 63")]
    Characters(String),
}

/// Whether the machine type is a `q35` one (PCI Express, built-in AHCI).
pub fn is_q35(t: &str) -> bool {
    t == "q35" || t.starts_with("pc-q35-")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(h: &Hardware) -> Vec<String> {
        let mut errs = ValidationErrors::default();
        h.check("spec_defaults", &mut errs);
        errs.0.into_iter().map(|e| format!("{}: {}", e.field, e.reason)).collect()
    }

    #[test]
    fn checks_name_the_field_and_the_reason() {
        let seed = Hardware {
            machine_type: Some("pc-q35-rhel9.2.0".into()),
            architecture: Some(architecture("x86_64")),
            termination_grace_period_seconds: Some(3600),
            ..Default::default()
        };
        assert!(fields(&seed).is_empty(), "{:?}", fields(&seed));
        let bad = Hardware {
            machine_type: Some("virt".into()),
            architecture: Some(architecture("arm64")),
            termination_grace_period_seconds: Some(MAX_GRACE_SECONDS + 1),
            ..Default::default()
        };
        let f = fields(&bad);
        assert_eq!(f.len(), 3, "{f:?}");
        assert!(f[0].starts_with("spec_defaults.machine_type: \"virt\" is not an x86 machine type"), "{f:?}");
        assert!(f[1].starts_with("spec_defaults.architecture: only amd64"), "{f:?}");
        assert!(f[2].starts_with("spec_defaults.termination_grace_period_seconds: must be at most 86400"), "{f:?}");
        let upper = Hardware { machine_type: Some("pc-q35-RHEL".into()), ..Default::default() };
        assert!(fields(&upper)[0].contains("has characters"), "{:?}", fields(&upper));
        assert!(is_q35("pc-q35-8.2") && is_q35("q35") && !is_q35("pc-i440fx-8.2"));
    }

    #[test]
    fn words_are_kubevirt_s() {
        assert_eq!(serde_json::to_value(DiskBus::Sata).unwrap(), "sata");
        assert_eq!(serde_json::to_value(NicModel::E1000e).unwrap(), "e1000e");
        assert!(serde_json::from_value::<NicModel>(serde_json::json!("ne2k")).is_err());
        assert_eq!(DiskBus::parse("scsi"), Some(DiskBus::Scsi));
        assert_eq!(NicModel::parse("e1000"), Some(NicModel::E1000));
        assert_eq!(NicModel::parse("ne2k"), None);
        assert_eq!(NicModel::Rtl8139.as_str(), "rtl8139");
    }
}
