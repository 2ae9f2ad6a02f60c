//! Guest profiles: the platform a guest expects. Its firmware (BIOS or EFI,
//! with or without Secure Boot), a persistent TPM 2.0, and its OS family
//! (a Windows guest gets what Windows needs), as OSAC's
//! `DiskImage.guest_os_family` and KubeVirt's preferences name them.
//!
//! A template and an image each say what they know ([`GuestProfile`], every
//! field optional). The template's choice wins over the image's, and what
//! neither says comes from the family's defaults ([`GuestProfile::platform`]).
//!
//! | family    | firmware | Secure Boot | TPM | also                                    |
//! |-----------|----------|-------------|-----|-----------------------------------------|
//! | `linux`   | `bios`   | off         | off |                                         |
//! | `windows` | `efi`    | on          | on  | Hyper-V enlightenments, RTC in local time |

use serde::{Deserialize, Serialize};

use crate::validation::ValidationErrors;

/// The firmware a guest boots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Firmware {
    /// Legacy BIOS (SeaBIOS on qemu).
    #[default]
    Bios,
    /// UEFI (OVMF on qemu), with a persistent variable store.
    Efi,
}

/// The guest's operating system family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum GuestOsFamily {
    /// Linux and other guests that need nothing special.
    #[default]
    #[serde(alias = "GUEST_OS_FAMILY_LINUX")]
    Linux,
    /// Windows: EFI, Secure Boot and a TPM by default, Hyper-V
    /// enlightenments and an RTC in local time.
    #[serde(alias = "GUEST_OS_FAMILY_WINDOWS")]
    Windows,
}

impl Firmware {
    /// Its JSON word.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Bios => "bios",
            Self::Efi => "efi",
        }
    }

    /// The firmware its JSON word names.
    pub fn parse(word: &str) -> Option<Self> {
        [Self::Bios, Self::Efi].into_iter().find(|f| f.as_str() == word)
    }
}

impl GuestOsFamily {
    /// Its JSON word.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Linux => "linux",
            Self::Windows => "windows",
        }
    }

    /// The family its JSON word names.
    pub fn parse(word: &str) -> Option<Self> {
        [Self::Linux, Self::Windows].into_iter().find(|f| f.as_str() == word)
    }
}

/// What a template or an image says about the guest's platform. Every field
/// is optional: see [`GuestProfile::platform`] for what fills the gaps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuestProfile {
    /// `bios` or `efi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firmware: Option<Firmware>,
    /// Secure Boot (EFI only): the firmware boots only signed code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secure_boot: Option<bool>,
    /// A persistent TPM 2.0: its state outlives a stop, a restart of the
    /// server and a migration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpm: Option<bool>,
    /// `linux` or `windows`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_os_family: Option<GuestOsFamily>,
}

/// A guest profile with every choice made: what a backend builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Platform {
    /// The firmware.
    pub firmware: Firmware,
    /// Secure Boot on (always with EFI).
    pub secure_boot: bool,
    /// A persistent TPM 2.0.
    pub tpm: bool,
    /// The OS family.
    pub guest_os_family: GuestOsFamily,
}

impl Platform {
    /// Whether the guest boots EFI.
    pub fn efi(&self) -> bool {
        self.firmware == Firmware::Efi
    }

    /// Whether the guest is Windows (Hyper-V enlightenments, local-time RTC).
    pub fn windows(&self) -> bool {
        self.guest_os_family == GuestOsFamily::Windows
    }

    /// SMM, which Secure Boot needs to keep its variables from the guest's OS.
    pub fn smm(&self) -> bool {
        self.secure_boot
    }
}

impl GuestProfile {
    /// Whether nothing is said.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// This profile, with `under`'s choices where this one makes none
    /// (a template's profile over its image's).
    pub fn over(&self, under: &GuestProfile) -> GuestProfile {
        GuestProfile {
            firmware: self.firmware.or(under.firmware),
            secure_boot: self.secure_boot.or(under.secure_boot),
            tpm: self.tpm.or(under.tpm),
            guest_os_family: self.guest_os_family.or(under.guest_os_family),
        }
    }

    /// Every choice made: the family's defaults fill the gaps (see the
    /// module's table). Secure Boot is never on without EFI.
    pub fn platform(&self) -> Platform {
        let family = self.guest_os_family.unwrap_or_default();
        let windows = family == GuestOsFamily::Windows;
        let default_firmware = if windows || self.secure_boot == Some(true) { Firmware::Efi } else { Firmware::Bios };
        let firmware = self.firmware.unwrap_or(default_firmware);
        let efi = firmware == Firmware::Efi;
        Platform {
            firmware,
            secure_boot: efi && self.secure_boot.unwrap_or(windows),
            tpm: self.tpm.unwrap_or(windows),
            guest_os_family: family,
        }
    }

    /// Checks what no backend can build, naming fields under `prefix`
    /// (`spec_defaults`): Secure Boot with BIOS firmware.
    pub fn check(&self, prefix: &str, errs: &mut ValidationErrors) {
        if self.secure_boot == Some(true) && self.firmware == Some(Firmware::Bios) {
            errs.push(format!("{prefix}.secure_boot"), "needs firmware efi: BIOS firmware has no Secure Boot");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(json: &str) -> GuestProfile {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn families_fill_the_gaps_and_the_template_wins_over_the_image() {
        assert_eq!(GuestProfile::default().platform(), Platform::default());
        let win = p(r#"{"guest_os_family":"windows"}"#).platform();
        assert_eq!((win.firmware, win.secure_boot, win.tpm, win.smm()), (Firmware::Efi, true, true, true));
        let old_windows = p(r#"{"guest_os_family":"windows","firmware":"bios"}"#).platform();
        assert_eq!((old_windows.firmware, old_windows.secure_boot, old_windows.tpm), (Firmware::Bios, false, true));
        let image = p(r#"{"firmware":"efi","secure_boot":true}"#);
        let template = p(r#"{"secure_boot":false,"tpm":true}"#);
        let both = template.over(&image).platform();
        assert_eq!((both.firmware, both.secure_boot, both.tpm), (Firmware::Efi, false, true));
        assert_eq!(p(r#"{"secure_boot":true}"#).platform().firmware, Firmware::Efi, "Secure Boot implies EFI");
    }

    #[test]
    fn secure_boot_with_bios_is_refused_by_name() {
        let mut errs = ValidationErrors::default();
        p(r#"{"firmware":"bios","secure_boot":true}"#).check("spec_defaults", &mut errs);
        let e = errs.into_result(()).unwrap_err();
        assert_eq!(e.iter().next().unwrap().field, "spec_defaults.secure_boot");
        assert!(serde_json::from_str::<GuestProfile>(r#"{"firmware":"uefi"}"#).is_err());
        for f in [Firmware::Bios, Firmware::Efi] {
            assert_eq!(serde_json::to_value(f).unwrap(), f.as_str());
            assert_eq!(Firmware::parse(f.as_str()), Some(f));
        }
        assert_eq!(serde_json::from_str::<GuestOsFamily>("\"GUEST_OS_FAMILY_WINDOWS\"").unwrap(), GuestOsFamily::Windows, "OSAC's words");
        for f in [GuestOsFamily::Linux, GuestOsFamily::Windows] {
            assert_eq!(serde_json::to_value(f).unwrap(), f.as_str());
            assert_eq!(GuestOsFamily::parse(f.as_str()), Some(f));
        }
    }
}
