//! Live resize: a running guest whose template sets `max_cpu_cores` or
//! `max_memory` grows without a restart.
//! - vCPUs: QEMU starts with `-smp N,maxcpus=M`; a new vCPU is a CPU device
//!   added in a free socket `query-hotpluggable-cpus` offers (ACPI
//!   hotplug), which the guest brings online.
//! - Memory: QEMU starts with `-m BOOT,maxmem=MAX` and one `virtio-mem`
//!   device over the difference, plugged empty; growing sets its
//!   `requested-size` and the guest's virtio-mem driver plugs the blocks.
//!
//! - Disks: any running guest's disk grows (`block_resize`); the guest
//!   sees the new size at once (its file system grows at its next boot).
//!
//! Only growth is live: fewer vCPUs or less memory (and more than the
//! limits) wait for a restart (`RESTART_REQUIRED`), as on KubeVirt.

use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tracing::{debug, info, warn};
use vmaas_backend::VmTarget;
use vmaas_model::MachineSpec;
use vmaas_model::boot_shape::BootShape;

use crate::Vms;
use crate::lifecycle::{Stop, Vm};
use crate::qmp::{Qmp, QmpError};

/// The virtio-mem device's id.
pub const VMEM: &str = "vmem0";
/// Its memory backend's id.
const VMEM_BACKEND: &str = "vmem-ram";

/// What a QEMU was started with to be resized live.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveArgs {
    /// `maxcpus`.
    pub max_cpus: u32,
    /// The memory QEMU booted with, in MiB (virtio-mem adds to it).
    pub boot_memory_mib: u64,
    /// The virtio-mem region in MiB (0: memory is not resized live).
    pub region_mib: u64,
}

impl LiveArgs {
    /// The limits of `spec` for a QEMU booting `spec`'s shape; `None`
    /// without limits.
    pub fn of(spec: &MachineSpec) -> Option<Self> {
        if spec.live.is_empty() {
            return None;
        }
        let boot_memory_mib = spec.memory_bytes().div_ceil(1 << 20);
        let max_mib = spec.live.max_memory_bytes().map(|b| b.div_ceil(1 << 20)).unwrap_or(boot_memory_mib);
        Some(Self {
            max_cpus: spec.live.max_cpu_cores.unwrap_or(spec.cpu.cores).max(spec.cpu.cores),
            boot_memory_mib,
            region_mib: max_mib.saturating_sub(boot_memory_mib),
        })
    }

    /// `-smp`'s value for `cpus` vCPUs.
    pub fn smp(&self, cpus: u32) -> String {
        format!("cpus={cpus},maxcpus={}", self.max_cpus)
    }

    /// `-m`'s value.
    pub fn memory(&self) -> String {
        if self.region_mib == 0 {
            format!("{}M", self.boot_memory_mib)
        } else {
            format!("{}M,maxmem={}M", self.boot_memory_mib, self.boot_memory_mib + self.region_mib)
        }
    }

    /// The virtio-mem device and its backend, plugged empty.
    pub fn devices(&self) -> Vec<String> {
        if self.region_mib == 0 {
            return Vec::new();
        }
        vec![
            "-object".into(),
            format!("memory-backend-ram,id={VMEM_BACKEND},size={}M", self.region_mib),
            "-device".into(),
            format!("virtio-mem-pci,id={VMEM},memdev={VMEM_BACKEND},requested-size=0"),
        ]
    }

    /// What a guest of `cpus` vCPUs and `memory_mib` would need: the vCPUs
    /// to add and virtio-mem's new requested size in bytes, or why it
    /// needs a restart.
    pub fn plan(&self, now_cpus: u32, now_mib: u64, cpus: u32, memory_mib: u64) -> Result<Plan, String> {
        if cpus < now_cpus {
            return Err(format!("fewer vCPUs ({now_cpus} → {cpus}) take a restart"));
        }
        if cpus > self.max_cpus {
            return Err(format!("{cpus} vCPUs is more than the {} the guest started able to take", self.max_cpus));
        }
        if memory_mib < now_mib {
            return Err(format!("less memory ({now_mib}Mi → {memory_mib}Mi) takes a restart"));
        }
        if memory_mib > self.boot_memory_mib + self.region_mib {
            return Err(format!(
                "{memory_mib}Mi is more than the {}Mi the guest started able to take",
                self.boot_memory_mib + self.region_mib
            ));
        }
        Ok(Plan { add_cpus: cpus - now_cpus, requested_bytes: (memory_mib - self.boot_memory_mib) << 20 })
    }
}

/// One live resize.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// vCPUs to add.
    pub add_cpus: u32,
    /// virtio-mem's requested size.
    pub requested_bytes: u64,
}

/// Why a live resize failed.
#[derive(Debug, thiserror::Error)]
pub enum ResizeError {
    /// A QMP command failed.
    #[error("{context}: {source}")]
    Qmp {
        /// What was being done.
        context: &'static str,
        /// Why.
        source: QmpError,
    },
    /// QEMU offers fewer free CPU sockets than asked.
    #[error("QEMU has no free CPU socket for {0} more vCPUs")]
    NoSocket(u32),
}

fn qmp(context: &'static str) -> impl FnOnce(QmpError) -> ResizeError {
    move |source| ResizeError::Qmp { context, source }
}

/// The free CPU slots `query-hotpluggable-cpus` answered, as `device_add`
/// arguments, lowest socket, core and thread first (QEMU 10 lays
/// `maxcpus` out as cores of one socket).
fn free_cpus(answer: &Value) -> Vec<Value> {
    let mut free: Vec<&Value> = answer.as_array().into_iter().flatten().filter(|c| c.get("qom-path").is_none()).collect();
    free.sort_by_key(|c| (c["props"]["socket-id"].as_u64(), c["props"]["core-id"].as_u64(), c["props"]["thread-id"].as_u64()));
    free.into_iter()
        .map(|c| {
            let mut dev = c["props"].clone();
            let at = |k: &str| dev[k].as_u64().unwrap_or(0);
            let id = format!("vcpu-{}-{}-{}", at("socket-id"), at("core-id"), at("thread-id"));
            dev["driver"] = c["type"].clone();
            dev["id"] = json!(id);
            dev
        })
        .collect()
}

/// A `device_add` argument as the `-device` value that recreates it on a
/// migration's new QEMU.
pub fn device_arg(dev: &Value) -> String {
    let mut parts = vec![dev["driver"].as_str().unwrap_or_default().to_owned(), format!("id={}", dev["id"].as_str().unwrap_or_default())];
    for key in ["node-id", "socket-id", "die-id", "cluster-id", "core-id", "thread-id"] {
        if let Some(v) = dev.get(key).and_then(Value::as_u64) {
            parts.push(format!("{key}={v}"));
        }
    }
    parts.join(",")
}

/// Applies `plan` to the QEMU behind `q`; the `-device` values of the vCPUs added.
pub async fn apply(q: &mut Qmp, plan: &Plan, memory: bool) -> Result<Vec<String>, ResizeError> {
    let mut added = Vec::new();
    if plan.add_cpus > 0 {
        let answer = q.execute("query-hotpluggable-cpus", None).await.map_err(qmp("asking QEMU for free CPU sockets"))?;
        let free = free_cpus(&answer);
        if free.len() < plan.add_cpus as usize {
            return Err(ResizeError::NoSocket(plan.add_cpus));
        }
        for dev in free.into_iter().take(plan.add_cpus as usize) {
            q.execute("device_add", Some(dev.clone())).await.map_err(qmp("adding a vCPU"))?;
            added.push(device_arg(&dev));
        }
    }
    if memory {
        let set = json!({"path": format!("/machine/peripheral/{VMEM}"), "property": "requested-size", "value": plan.requested_bytes});
        q.execute("qom-set", Some(set)).await.map_err(qmp("asking virtio-mem for the new memory size"))?;
    }
    Ok(added)
}

impl Vms {
    /// Grows the running, ready guest of `vm` to `t`'s vCPUs and memory
    /// when the limits it started with allow; otherwise the change waits
    /// for a restart (`RESTART_REQUIRED` says so).
    pub(crate) async fn resize_step(&self, vm: &mut Vm, t: &VmTarget) -> Result<(), Stop> {
        let wanted = BootShape::of(&t.spec.machine);
        self.grow_disks(vm, t, &wanted).await?;
        let (Some(live), Some(mut booted)) = (vm.file.live.clone(), vm.file.booted.clone()) else { return Ok(()) };
        if (wanted.cpu_cores, wanted.memory_bytes) == (booted.cpu_cores, booted.memory_bytes) {
            return Ok(());
        }
        let (now_mib, mib) = (booted.memory_bytes.div_ceil(1 << 20), wanted.memory_bytes.div_ceil(1 << 20));
        let plan = match live.plan(booted.cpu_cores, now_mib, wanted.cpu_cores, mib) {
            Ok(p) => p,
            Err(why) => {
                debug!(vm = %t.id, %why, "not resized live");
                return Ok(());
            }
        };
        let started = Instant::now();
        let applied = async {
            let mut q = Qmp::connect(&vm.path("qmp.sock")).await.map_err(qmp("connecting to QEMU"))?;
            apply(&mut q, &plan, mib != now_mib).await
        };
        match applied.await {
            Ok(added) => {
                // A migration's new QEMU has the vCPUs added since the start.
                vm.file.plugged.extend(added.into_iter().flat_map(|d| ["-device".to_owned(), d]));
                (booted.cpu_cores, booted.memory_bytes) = (wanted.cpu_cores, wanted.memory_bytes);
                vm.file.booted = Some(booted);
                vm.file.save(&vm.dir).await?;
                let ms = started.elapsed().as_millis() as u64;
                info!(vm = %t.id, cpus = wanted.cpu_cores, memory_mib = mib, ms, "resized live");
            }
            Err(e) => warn!(vm = %t.id, error = %e, "live resize failed; the change waits for a restart"),
        }
        Ok(())
    }
}

impl Vms {
    /// Grows the running guest's disks to the sizes `wanted` has with QMP
    /// `block_resize` (the qcow2 file and the virtio disk the guest sees,
    /// at once); the API refuses a smaller size.
    async fn grow_disks(&self, vm: &mut Vm, t: &VmTarget, wanted: &BootShape) -> Result<(), Stop> {
        let Some(mut booted) = vm.file.booted.clone() else { return Ok(()) };
        let grown: Vec<(String, u64)> =
            wanted.disks.iter().filter(|(n, size)| booted.disks.iter().any(|(b, was)| b == n && was < size)).cloned().collect();
        if grown.is_empty() {
            return Ok(());
        }
        let mut q = match Qmp::connect(&vm.path("qmp.sock")).await {
            Ok(q) => q,
            Err(e) => {
                warn!(vm = %t.id, error = %e, "cannot reach QEMU to grow the disks; they grow at the next start");
                return Ok(());
            }
        };
        for (name, size) in grown {
            // QEMU sizes block devices in whole sectors.
            let arg = json!({"node-name": format!("disk-{name}"), "size": size.div_ceil(512) * 512});
            match q.execute("block_resize", Some(arg)).await {
                Ok(_) => {
                    info!(vm = %t.id, disk = %name, bytes = size, "disk grown live");
                    booted.disks.iter_mut().filter(|(n, _)| *n == name).for_each(|d| d.1 = size);
                }
                Err(e) => warn!(vm = %t.id, disk = %name, error = %e, "growing the disk live failed; it grows at the next start"),
            }
        }
        vm.file.booted = Some(booted);
        vm.file.save(&vm.dir).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(cores: u32, memory: &str, max_cores: Option<u32>, max_memory: Option<&str>) -> MachineSpec {
        let mut m = MachineSpec::default();
        m.cpu.cores = cores;
        m.memory = memory.parse().unwrap();
        m.live.max_cpu_cores = max_cores;
        m.live.max_memory = max_memory.map(|q| q.parse().unwrap());
        m
    }

    #[test]
    fn limits_become_maxcpus_maxmem_and_an_empty_virtio_mem() {
        assert_eq!(LiveArgs::of(&spec(1, "256Mi", None, None)), None, "no limits: nothing live");
        let l = LiveArgs::of(&spec(1, "256Mi", Some(4), Some("1Gi"))).unwrap();
        assert_eq!((l.smp(1), l.memory()), ("cpus=1,maxcpus=4".to_owned(), "256M,maxmem=1024M".to_owned()));
        assert_eq!(
            l.devices(),
            ["-object", "memory-backend-ram,id=vmem-ram,size=768M", "-device", "virtio-mem-pci,id=vmem0,memdev=vmem-ram,requested-size=0"]
        );
        let cpus_only = LiveArgs::of(&spec(2, "256Mi", Some(4), None)).unwrap();
        assert_eq!((cpus_only.memory(), cpus_only.devices().len()), ("256M".to_owned(), 0));
    }

    #[test]
    fn growth_is_live_and_the_rest_waits_for_a_restart() {
        let l = LiveArgs::of(&spec(1, "256Mi", Some(2), Some("1Gi"))).unwrap();
        assert_eq!(l.plan(1, 256, 2, 512).unwrap(), Plan { add_cpus: 1, requested_bytes: 256 << 20 });
        assert!(l.plan(2, 512, 1, 512).unwrap_err().contains("fewer vCPUs"));
        assert!(l.plan(1, 512, 1, 256).unwrap_err().contains("less memory"));
        assert!(l.plan(1, 256, 3, 256).unwrap_err().contains("more than the 2"));
        assert!(l.plan(1, 256, 1, 2048).unwrap_err().contains("more than the 1024Mi"));
    }

    #[test]
    fn free_sockets_are_taken_lowest_first_and_recreated_alike() {
        let answer = json!([
            {"type": "max-x86_64-cpu", "vcpus-count": 1, "props": {"socket-id": 2, "core-id": 0, "thread-id": 0}},
            {"type": "max-x86_64-cpu", "vcpus-count": 1, "props": {"socket-id": 1, "core-id": 0, "thread-id": 0}},
            {"type": "max-x86_64-cpu", "vcpus-count": 1, "props": {"socket-id": 0, "core-id": 0, "thread-id": 0}, "qom-path": "/machine/unattached/device[0]"}
        ]);
        let free = free_cpus(&answer);
        assert_eq!(free.len(), 2);
        assert_eq!(free[0]["id"], "vcpu-1-0-0");
        assert_eq!(device_arg(&free[0]), "max-x86_64-cpu,id=vcpu-1-0-0,socket-id=1,core-id=0,thread-id=0");
    }
}
