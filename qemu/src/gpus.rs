//! GPUs passed through to guests: the host's display controllers bound to
//! `vfio-pci`, each held by at most one VM at a time. A VM's GPU asks for a
//! model by its template's `device_name`: the PCI ids (`10de:2236`), or a
//! name the administrator gave those ids (`--gpu-alias
//! nvidia.com/A10=10de:2236`, the Kubernetes resource name).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

use serde::Serialize;
use vmaas_model::Reason;
use vmaas_model::spec::Gpu;

/// One GPU of the host, bound to vfio-pci.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostGpu {
    /// Its PCI address, e.g. `0000:65:00.0`.
    pub address: String,
    /// Its PCI vendor and device ids, e.g. `10de:2236`.
    pub ids: String,
}

/// The GPUs under `sysfs`'s `bus/pci/devices` that are display controllers
/// bound to vfio-pci (blocking: call at start-up).
pub fn probe(sysfs: &Path) -> Vec<HostGpu> {
    let mut gpus = Vec::new();
    let Ok(entries) = std::fs::read_dir(sysfs.join("bus/pci/devices")) else { return gpus };
    for e in entries.flatten() {
        let read = |f: &str| std::fs::read_to_string(e.path().join(f)).unwrap_or_default().trim().trim_start_matches("0x").to_owned();
        let driver = std::fs::read_link(e.path().join("driver")).ok().and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
        if read("class").starts_with("03") && driver.as_deref() == Some("vfio-pci") {
            gpus.push(HostGpu {
                address: e.file_name().to_string_lossy().into_owned(),
                ids: format!("{}:{}", read("vendor"), read("device")),
            });
        }
    }
    gpus.sort_by(|a, b| a.address.cmp(&b.address));
    gpus
}

/// The host's GPUs and which VM holds each.
#[derive(Debug, Default)]
pub struct Gpus {
    host: Vec<HostGpu>,
    aliases: BTreeMap<String, String>,
    /// GPU address → the VM holding it.
    held: Mutex<BTreeMap<String, String>>,
}

impl Gpus {
    /// The allocator of `host`'s GPUs, with the administrator's names of PCI ids.
    pub fn new(host: Vec<HostGpu>, aliases: BTreeMap<String, String>) -> Self {
        Self { host, aliases, held: Mutex::default() }
    }

    /// The host's GPUs.
    pub fn host(&self) -> &[HostGpu] {
        &self.host
    }

    fn held(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, String>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `gpu` is the model `g` asks for: by its PCI ids (its
    /// `device_name` or `pci_device_selector`) or the alias of its name.
    fn fits(&self, gpu: &HostGpu, g: &Gpu) -> bool {
        let by_ids = |ids: &str| ids.trim().eq_ignore_ascii_case(&gpu.ids);
        by_ids(&g.device_name)
            || g.pci_device_selector.as_deref().is_some_and(by_ids)
            || self.aliases.get(&g.device_name).is_some_and(|ids| by_ids(ids))
    }

    /// Gives VM `vm` one GPU per entry of `wanted` (those it holds first),
    /// or, when the free ones do not fit, holds nothing more and says why.
    pub fn take(&self, vm: &str, wanted: &[Gpu]) -> Result<Vec<String>, Reason> {
        let mut held = self.held();
        let mut chosen: Vec<String> = Vec::new();
        for g in wanted {
            let free =
                |h: &&HostGpu| !chosen.contains(&h.address) && held.get(&h.address).is_none_or(|owner| owner == vm) && self.fits(h, g);
            // A GPU the VM already holds is kept before a free one is taken.
            let mine = self.host.iter().filter(free).find(|h| held.get(&h.address).is_some_and(|o| o == vm));
            match mine.or_else(|| self.host.iter().find(free)) {
                Some(h) => chosen.push(h.address.clone()),
                None => return Err(self.unavailable(wanted, &held)),
            }
        }
        held.retain(|addr, owner| owner != vm || chosen.contains(addr));
        for addr in &chosen {
            held.insert(addr.clone(), vm.to_owned());
        }
        Ok(chosen)
    }

    fn unavailable(&self, wanted: &[Gpu], held: &BTreeMap<String, String>) -> Reason {
        let asked: Vec<&str> = wanted.iter().map(|g| g.device_name.as_str()).collect();
        let free: Vec<String> =
            self.host.iter().filter(|h| !held.contains_key(&h.address)).map(|h| format!("{} ({})", h.address, h.ids)).collect();
        Reason::new(
            "NoGPUAvailable",
            format!(
                "the VM asks for {} GPU(s) ({}); of this host's {} GPU(s) bound to vfio-pci, the free ones are [{}]",
                wanted.len(),
                asked.join(", "),
                self.host.len(),
                free.join(", ")
            ),
        )
    }

    /// Records that VM `vm` holds `addresses` (a running guest adopted at start).
    pub fn hold(&self, vm: &str, addresses: &[String]) {
        let mut held = self.held();
        for a in addresses {
            held.insert(a.clone(), vm.to_owned());
        }
    }

    /// Gives back every GPU VM `vm` holds.
    pub fn release(&self, vm: &str) {
        self.held().retain(|_, owner| owner != vm);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpus() -> Gpus {
        let host = vec![
            HostGpu { address: "0000:65:00.0".into(), ids: "10de:2236".into() },
            HostGpu { address: "0000:66:00.0".into(), ids: "10de:2236".into() },
            HostGpu { address: "0000:b1:00.0".into(), ids: "1002:740f".into() },
        ];
        Gpus::new(host, BTreeMap::from([("nvidia.com/A10".to_owned(), "10de:2236".to_owned())]))
    }

    fn want(names: &[&str]) -> Vec<Gpu> {
        names.iter().map(|n| Gpu { name: "g".into(), device_name: (*n).into(), pci_device_selector: None }).collect()
    }

    #[test]
    fn a_gpu_is_never_given_to_two_vms() {
        let g = gpus();
        assert_eq!(g.take("a", &want(&["nvidia.com/A10"])).unwrap(), vec!["0000:65:00.0"]);
        assert_eq!(g.take("b", &want(&["10de:2236"])).unwrap(), vec!["0000:66:00.0"], "by PCI ids too");
        let none = g.take("c", &want(&["nvidia.com/A10"])).unwrap_err();
        assert_eq!(none.reason, "NoGPUAvailable");
        assert!(none.message.contains("the free ones are [0000:b1:00.0 (1002:740f)]"), "{}", none.message);
        g.release("a");
        assert_eq!(g.take("c", &want(&["nvidia.com/A10"])).unwrap(), vec!["0000:65:00.0"], "released, then free");
    }

    #[test]
    fn a_vm_keeps_what_it_holds_and_a_refusal_takes_nothing() {
        let g = gpus();
        g.hold("a", &["0000:66:00.0".to_owned()]);
        assert_eq!(g.take("a", &want(&["nvidia.com/A10"])).unwrap(), vec!["0000:66:00.0"], "an adopted guest keeps its GPU");
        assert!(g.take("b", &want(&["nvidia.com/A10", "nvidia.com/A10"])).is_err(), "one A10 is free, two are asked");
        assert_eq!(g.take("b", &want(&["nvidia.com/A10"])).unwrap(), vec!["0000:65:00.0"], "the refusal held nothing");
        assert!(g.take("c", &want(&["nvidia.com/H100"])).is_err(), "an unknown model matches no GPU");
        assert_eq!(g.take("c", &want(&["1002:740F"])).unwrap(), vec!["0000:b1:00.0"], "ids in any case");
    }

    #[test]
    fn the_host_s_vfio_display_controllers_are_found() {
        let root = tempfile::tempdir().unwrap();
        let dev = |addr: &str, class: &str, driver: &str| {
            let d = root.path().join("bus/pci/devices").join(addr);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("class"), format!("{class}\n")).unwrap();
            std::fs::write(d.join("vendor"), "0x10de\n").unwrap();
            std::fs::write(d.join("device"), "0x2236\n").unwrap();
            let drv = root.path().join("bus/pci/drivers").join(driver);
            std::fs::create_dir_all(&drv).unwrap();
            std::os::unix::fs::symlink(&drv, d.join("driver")).unwrap();
        };
        dev("0000:65:00.0", "0x030200", "vfio-pci");
        dev("0000:66:00.0", "0x030200", "nvidia");
        dev("0000:00:1f.0", "0x060100", "vfio-pci");
        assert_eq!(probe(root.path()), vec![HostGpu { address: "0000:65:00.0".into(), ids: "10de:2236".into() }]);
    }
}
