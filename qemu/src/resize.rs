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

use serde_json::{Value, json};
use tracing::{debug, info, warn};
use vmaas_backend::{BackendError, VmTarget};
use vmaas_model::boot_shape::BootShape;

use crate::live::{Plan, VMEM};
use crate::qmp::{Qmp, QmpError};
use crate::vm::Vm;

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

/// Grows the running, ready guest of `vm` to `t`'s vCPUs and memory
/// when the limits it started with allow; otherwise the change waits
/// for a restart (`RESTART_REQUIRED` says so).
pub(crate) async fn step(vm: &mut Vm, t: &VmTarget) -> Result<(), BackendError> {
    let wanted = BootShape::of(&t.spec.machine);
    grow_disks(vm, t, &wanted).await?;
    let (Some(live), Some(mut booted)) = (vm.file.live.clone(), vm.file.booted.clone()) else { return Ok(()) };
    if (wanted.cpu_cores, wanted.memory_bytes) == (booted.cpu_cores, booted.memory_bytes) {
        return Ok(());
    }
    let (now_mib, mib) = (booted.memory_bytes.div_ceil(1 << 20), wanted.memory_bytes.div_ceil(1 << 20));
    let plan = match live.plan(booted.cpu_cores, now_mib, wanted.cpu_cores, mib) {
        Ok(p) => p,
        Err(why) => {
            debug!(vm = %t.id, why = %why, "not resized live");
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

/// Grows the running guest's disks to the sizes `wanted` has with QMP
/// `block_resize` (the qcow2 file and the virtio disk the guest sees,
/// at once); the API refuses a smaller size.
async fn grow_disks(vm: &mut Vm, t: &VmTarget, wanted: &BootShape) -> Result<(), BackendError> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
