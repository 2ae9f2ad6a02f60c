//! A guest's [`Platform`] in KubeVirt's terms: the domain's firmware
//! (`bootloader.efi {secureBoot, persistent}`), its features (SMM for
//! Secure Boot, Hyper-V enlightenments for Windows), its clock (a Windows
//! RTC keeps local time) and its TPM (`devices.tpm {persistent: true}`).
//! What the qemu backend builds from the same platform is in
//! `qemu/src/platform.rs`; `docs/machine-shapes.md` has both side by side.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::profile::Platform;

/// `domain.firmware`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct Firmware {
    /// `{efi: {secureBoot, persistent}}`.
    #[schemars(with = "serde_json::Value")]
    pub bootloader: Value,
}

/// `domain.features` (the subset vmaas sets).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
pub struct Features {
    /// `{enabled: true}`: Secure Boot needs SMM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Value>")]
    pub smm: Option<Value>,
    /// Hyper-V enlightenments, for Windows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Value>")]
    pub hyperv: Option<Value>,
}

/// `devices.tpm`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct Tpm {
    /// The TPM's state outlives the VM's restarts.
    pub persistent: bool,
}

/// The parts of a KubeVirt domain a platform sets.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct DomainPlatform {
    /// The firmware, for EFI.
    pub firmware: Option<Firmware>,
    /// SMM and Hyper-V.
    pub features: Option<Features>,
    /// The clock, for Windows.
    pub clock: Option<Value>,
    /// The TPM.
    pub tpm: Option<Tpm>,
}

/// Hyper-V enlightenments as KubeVirt names them, the same set the qemu
/// backend gives (`hv-relaxed`, `hv-vapic`, `hv-spinlocks=0x1fff`,
/// `hv-vpindex`, `hv-synic`, `hv-stimer`; `hv-time` is the clock's
/// `hyperv` timer).
fn hyperv() -> Value {
    json!({
        "relaxed": {}, "vapic": {}, "spinlocks": {"spinlocks": 8191},
        "vpindex": {}, "synic": {}, "synictimer": {"enabled": true}
    })
}

/// The KubeVirt domain's parts for `p`: nothing for a BIOS Linux guest
/// without a TPM (KubeVirt's defaults).
pub fn render(p: &Platform) -> DomainPlatform {
    let firmware = p.efi().then(|| Firmware { bootloader: json!({"efi": {"secureBoot": p.secure_boot, "persistent": true}}) });
    let features = Features { smm: p.smm().then(|| json!({"enabled": true})), hyperv: p.windows().then(hyperv) };
    // A Windows guest reads its RTC as local time: the clock keeps the
    // zone's time (UTC, the zone vmaas gives every guest), with Hyper-V's
    // clock and the timers KubeVirt's Windows preferences set.
    let clock = p.windows().then(|| {
        json!({"timezone": "UTC", "timer": {
            "hyperv": {}, "rtc": {"tickPolicy": "catchup"}, "pit": {"tickPolicy": "delay"}, "hpet": {"present": false}
        }})
    });
    DomainPlatform {
        firmware,
        features: (features != Features::default()).then_some(features),
        clock,
        tpm: p.tpm.then_some(Tpm { persistent: true }),
    }
}

/// The API group and version of KubeVirt's instance types and preferences.
pub const INSTANCETYPE_API: &str = "instancetype.kubevirt.io/v1beta1";

/// Where a VM's instance type and preference are rendered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Shapes {
    /// In the VM's domain: no objects of their own.
    #[default]
    Inline,
    /// `VirtualMachineClusterInstancetype` and `VirtualMachineClusterPreference`
    /// objects named after the type and the platform, shared by every VM
    /// that has them (the kubevirt backend).
    Cluster,
    /// `VirtualMachineInstancetype` and `VirtualMachinePreference` objects of
    /// the VM's own, in its namespace and named after it (the function:
    /// each composite owns what it composes, so none is shared).
    Namespaced,
}

/// A VM's reference to an instance type or a preference.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct Matcher {
    /// `VirtualMachineClusterInstancetype`, `VirtualMachineClusterPreference`,
    /// `VirtualMachineInstancetype` or `VirtualMachinePreference`.
    pub kind: String,
    /// Its name.
    pub name: String,
}

/// The `VirtualMachineClusterPreference` of platform `p` (none for a BIOS
/// Linux guest without a TPM): one per distinct platform, named after it
/// (`vmaas-efi-sb-tpm-windows`), shared by every VM of that platform.
pub fn preference(p: &Platform) -> Option<Value> {
    let d = render(p);
    if d == DomainPlatform::default() {
        return None;
    }
    let mut name = format!("vmaas-{}", p.firmware.as_str());
    for (on, part) in [(p.secure_boot, "-sb"), (p.tpm, "-tpm"), (p.windows(), "-windows")] {
        if on {
            name.push_str(part);
        }
    }
    let mut spec = json!({});
    if let Some(f) = &d.firmware {
        spec["firmware"] = json!({"preferredEfi": f.bootloader["efi"]});
    }
    if let Some(f) = &d.features {
        if let Some(smm) = &f.smm {
            spec["features"]["preferredSmm"] = smm.clone();
        }
        if let Some(hv) = &f.hyperv {
            spec["features"]["preferredHyperv"] = hv.clone();
        }
    }
    if let Some(t) = &d.tpm {
        spec["devices"] = json!({"preferredTPM": {"persistent": t.persistent}});
    }
    if let Some(c) = &d.clock {
        spec["clock"] = json!({"preferredClockOffset": {"timezone": c["timezone"]}, "preferredTimer": c["timer"]});
    }
    Some(json!({"apiVersion": INSTANCETYPE_API, "kind": "VirtualMachineClusterPreference", "metadata": {"name": name}, "spec": spec}))
}

/// The `VirtualMachineClusterInstancetype` of vmaas's instance type `name`,
/// whose shape `m` has: its vCPUs, memory and GPUs as host devices
/// (`vmaas-general.small`).
pub fn instancetype(name: &str, m: &crate::MachineSpec) -> Value {
    let gpus: Vec<Value> = m.gpus.iter().map(|g| json!({"name": g.name, "deviceName": g.device_name})).collect();
    let mut spec = json!({"cpu": {"guest": m.cpu.vcpus()}, "memory": {"guest": m.memory.as_str()}});
    if !gpus.is_empty() {
        spec["hostDevices"] = json!(gpus);
    }
    json!({"apiVersion": INSTANCETYPE_API, "kind": "VirtualMachineClusterInstancetype",
        "metadata": {"name": format!("vmaas-{name}")}, "spec": spec})
}

/// The cluster object `obj` (an instance type or a preference) as an
/// object of VM `vm`'s own in `namespace`: the namespaced kind, named
/// after the VM (`VirtualMachinePreference` `web-preference`).
pub fn owned(mut obj: Value, vm: &str, namespace: &str) -> Value {
    let kind = obj["kind"].as_str().unwrap_or_default().replace("VirtualMachineCluster", "VirtualMachine");
    let suffix = if kind.ends_with("Preference") { "preference" } else { "instancetype" };
    obj["kind"] = kind.into();
    obj["metadata"] = json!({"name": super::names::derived(vm, suffix), "namespace": namespace});
    obj
}

/// The reference to an object `obj` (an instance type or a preference).
pub fn matcher(obj: &Value) -> Matcher {
    Matcher {
        kind: obj["kind"].as_str().unwrap_or_default().to_owned(),
        name: obj["metadata"]["name"].as_str().unwrap_or_default().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::GuestProfile;

    fn platform(json: &str) -> Platform {
        serde_json::from_str::<GuestProfile>(json).unwrap().platform()
    }

    #[test]
    fn a_bios_linux_guest_sets_nothing() {
        assert_eq!(render(&Platform::default()), DomainPlatform::default());
    }

    #[test]
    fn secure_boot_is_efi_with_smm_and_a_persistent_nvram() {
        let d = render(&platform(r#"{"firmware":"efi","secure_boot":true,"tpm":true}"#));
        assert_eq!(d.firmware.unwrap().bootloader, json!({"efi": {"secureBoot": true, "persistent": true}}));
        assert_eq!(d.features.unwrap().smm, Some(json!({"enabled": true})));
        assert_eq!(d.tpm, Some(Tpm { persistent: true }));
        assert_eq!(d.clock, None);
        let plain = render(&platform(r#"{"firmware":"efi"}"#));
        assert_eq!(plain.firmware.unwrap().bootloader["efi"]["secureBoot"], false, "KubeVirt's default is on: it is said");
        assert_eq!(plain.features, None);
    }

    #[test]
    fn a_platform_is_one_shared_preference_named_after_it() {
        assert_eq!(preference(&Platform::default()), None, "nothing to prefer");
        let p = preference(&platform(r#"{"guest_os_family":"windows"}"#)).unwrap();
        assert_eq!(p["metadata"]["name"], "vmaas-efi-sb-tpm-windows");
        assert_eq!(p["spec"]["firmware"]["preferredEfi"], json!({"secureBoot": true, "persistent": true}));
        assert_eq!(p["spec"]["features"]["preferredSmm"], json!({"enabled": true}));
        assert_eq!(p["spec"]["features"]["preferredHyperv"]["spinlocks"]["spinlocks"], 8191);
        assert_eq!(p["spec"]["devices"]["preferredTPM"], json!({"persistent": true}));
        assert_eq!(p["spec"]["clock"]["preferredClockOffset"], json!({"timezone": "UTC"}));
        let efi = preference(&platform(r#"{"firmware":"efi"}"#)).unwrap();
        assert_eq!(efi["metadata"]["name"], "vmaas-efi");
    }

    #[test]
    fn windows_gets_hyperv_and_a_local_clock() {
        let d = render(&platform(r#"{"guest_os_family":"windows"}"#));
        let f = d.features.unwrap();
        assert_eq!(f.hyperv.unwrap()["spinlocks"]["spinlocks"], 8191);
        assert!(f.smm.is_some() && d.tpm.is_some(), "Secure Boot and a TPM by default");
        assert_eq!(d.clock.unwrap()["timer"]["hyperv"], json!({}));
    }
}
