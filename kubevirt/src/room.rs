//! What the cluster has for VMs, for placing them among several clusters:
//! the allocatable CPU, memory and devices (GPUs as extended resources) of
//! its Ready, schedulable nodes, and what the VMs vmaas made there ask
//! (every one, running or stopped: a stopped VM keeps its room for its next
//! start). Other workloads are not counted; KubeVirt's scheduler has the
//! last word, and a VM that does not fit stays starting.

use kube::core::DynamicObject;
use serde_json::Value;
use vmaas_backend::{Room, Usage};
use vmaas_model::Quantity;

/// The vCPUs of a VM whose instance type gives them (the domain has none).
pub const VCPUS_ANNOTATION: &str = "vmaas.io/vcpus";
/// Its memory.
pub const MEMORY_ANNOTATION: &str = "vmaas.io/memory";
/// Its GPUs, by device name: `nvidia.com/A100=2` (comma-separated).
pub const GPUS_ANNOTATION: &str = "vmaas.io/gpus";

/// The [`GPUS_ANNOTATION`] of `gpus` (device names, one per GPU).
pub fn gpus_annotation<'a>(gpus: impl IntoIterator<Item = &'a str>) -> String {
    let mut counts = std::collections::BTreeMap::<&str, u64>::new();
    for g in gpus {
        *counts.entry(g).or_default() += 1;
    }
    counts.iter().map(|(name, n)| format!("{name}={n}")).collect::<Vec<_>>().join(",")
}

/// What vmaas's VMs on a cluster ask, together.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Held {
    /// vCPUs, in thousandths of a core.
    pub cpu_millis: u64,
    /// Memory, in bytes.
    pub memory_bytes: u64,
    /// Devices (GPUs) by resource name.
    pub devices: std::collections::BTreeMap<String, u64>,
}

impl Held {
    /// Counts `other` in.
    pub fn add(&mut self, other: &Held) {
        self.cpu_millis += other.cpu_millis;
        self.memory_bytes += other.memory_bytes;
        for (name, n) in &other.devices {
            *self.devices.entry(name.clone()).or_default() += n;
        }
    }

    /// Counts `other` (counted in before) out.
    pub fn remove(&mut self, other: &Held) {
        self.cpu_millis = self.cpu_millis.saturating_sub(other.cpu_millis);
        self.memory_bytes = self.memory_bytes.saturating_sub(other.memory_bytes);
        for (name, n) in &other.devices {
            if let Some(held) = self.devices.get_mut(name) {
                *held = held.saturating_sub(*n);
                if *held == 0 {
                    self.devices.remove(name);
                }
            }
        }
    }
}

/// What KubeVirt VM `vm` asks: its vCPUs (cores × sockets × threads, a VM
/// resized live counting sockets, or its instance type's in its
/// annotations), memory and GPUs.
pub fn held_by(vm: &DynamicObject) -> Held {
    let mut h = Held::default();
    let domain = &vm.data["spec"]["template"]["spec"]["domain"];
    let cpu = &domain["cpu"];
    // (A DynamicObject's metadata is its own field, not in `data`.)
    let note = |key: &str| vm.metadata.annotations.as_ref().and_then(|a| a.get(key)).map(String::as_str);
    let vcpus = note(VCPUS_ANNOTATION).and_then(|v| v.parse::<u64>().ok());
    let topology = ["cores", "sockets", "threads"].iter().map(|k| cpu[*k].as_u64().unwrap_or(1)).product::<u64>();
    h.cpu_millis = vcpus.unwrap_or(topology) * 1000;
    let memory = note(MEMORY_ANNOTATION).or(domain["memory"]["guest"].as_str());
    h.memory_bytes = memory.and_then(|q| Quantity::parse(q).ok()).and_then(|q| q.to_units_ceil()).unwrap_or(0);
    // GPUs as host devices, or as `gpus` (how VMs made before wrote them).
    let devices = &domain["devices"];
    for g in ["hostDevices", "gpus"].iter().flat_map(|k| devices[*k].as_array()).flatten() {
        if let Some(name) = g["deviceName"].as_str() {
            *h.devices.entry(name.to_owned()).or_default() += 1;
        }
    }
    for (name, n) in note(GPUS_ANNOTATION).into_iter().flat_map(|a| a.split(',')).filter_map(|p| p.split_once('=')) {
        *h.devices.entry(name.to_owned()).or_default() += n.parse::<u64>().unwrap_or(0);
    }
    h
}

/// The room of a cluster with `nodes` whose VMs ask `held` together; none
/// when no node is Ready (nothing known).
pub fn room(nodes: &[std::sync::Arc<DynamicObject>], held: &Held) -> Option<Room> {
    let mut r = Room::default();
    let mut any = false;
    for n in nodes.iter().filter(|n| usable(&n.data)) {
        any = true;
        let Some(alloc) = n.data["status"]["allocatable"].as_object() else { continue };
        for (name, q) in alloc {
            let Some(q) = q.as_str().and_then(|q| Quantity::parse(q).ok()) else { continue };
            match name.as_str() {
                "cpu" => r.cpu_millis.total += millis(&q),
                "memory" => r.memory_bytes.total += q.to_units_ceil().unwrap_or(0),
                n if n.contains('/') => add(&mut r.devices.entry(n.to_owned()).or_insert_with(Usage::default).total, &q),
                _ => {}
            }
        }
    }
    if !any {
        return None;
    }
    r.cpu_millis.used = held.cpu_millis;
    r.memory_bytes.used = held.memory_bytes;
    for (name, n) in &held.devices {
        r.devices.entry(name.clone()).or_default().used += n;
    }
    Some(r)
}

/// Adds `q` in whole units to `total`.
fn add(total: &mut u64, q: &Quantity) {
    *total += q.to_units_ceil().unwrap_or(0);
}

/// Thousandths of a core.
fn millis(q: &Quantity) -> u64 {
    u64::try_from(q.nanos() / 1_000_000).unwrap_or(0)
}

/// Whether a node takes new work: Ready and not cordoned.
fn usable(node: &Value) -> bool {
    let ready = node["status"]["conditions"].as_array().is_some_and(|c| c.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"));
    ready && node["spec"]["unschedulable"] != true
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;

    fn obj(v: Value) -> Arc<DynamicObject> {
        Arc::new(serde_json::from_value(v).unwrap())
    }

    fn node(name: &str, cpu: &str, mem: &str, ready: bool, extra: Value) -> Arc<DynamicObject> {
        let mut alloc = json!({"cpu": cpu, "memory": mem, "pods": "110"});
        if let (Some(a), Some(e)) = (alloc.as_object_mut(), extra.as_object()) {
            a.extend(e.clone());
        }
        obj(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": alloc, "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}}))
    }

    #[test]
    fn ready_nodes_give_room_and_vms_take_it() {
        let nodes = [
            node("a", "3500m", "8Gi", true, json!({"nvidia.com/A10": "2"})),
            node("b", "4", "8Gi", true, json!({})),
            node("down", "64", "512Gi", false, json!({})),
        ];
        let vm = obj(json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": {"name": "v", "namespace": "t"},
            "spec": {"template": {"spec": {"domain": {"cpu": {"cores": 1, "threads": 2}, "memory": {"guest": "1Gi"},
                "devices": {"hostDevices": [{"name": "g", "deviceName": "nvidia.com/A10"}]}}}}}}));
        // A VM of an instance type: its shape and GPUs in its annotations.
        let mut typed = json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": {"name": "w", "namespace": "t"},
            "spec": {"instancetype": {"kind": "VirtualMachineClusterInstancetype", "name": "vmaas-gpu"}, "template": {"spec": {"domain": {"devices": {}}}}}});
        let notes = &mut typed["metadata"]["annotations"];
        notes[VCPUS_ANNOTATION] = json!("3");
        notes[MEMORY_ANNOTATION] = json!("2Gi");
        notes[GPUS_ANNOTATION] = json!(gpus_annotation(["nvidia.com/A10"]));
        let typed = obj(typed);
        let mut held = Held::default();
        for v in [&vm, &typed] {
            held.add(&held_by(v));
        }
        let r = room(&nodes, &held).unwrap();
        assert_eq!(r.cpu_millis, Usage { total: 7500, used: 5000 });
        assert_eq!(r.memory_bytes, Usage { total: 16 << 30, used: 3 << 30 });
        assert_eq!(r.devices["nvidia.com/A10"], Usage { total: 2, used: 2 }, "the instance type's GPU counts");
        assert_eq!(gpus_annotation(["b/x", "a/y", "b/x"]), "a/y=1,b/x=2");
        assert!(!r.devices.contains_key("pods"));
        held.remove(&held_by(&vm));
        assert_eq!(
            (held.cpu_millis, held.memory_bytes, held.devices["nvidia.com/A10"]),
            (3000, 2 << 30, 1),
            "a VM gone gives its room back"
        );
    }

    #[test]
    fn no_ready_node_is_nothing_known() {
        assert_eq!(room(&[node("down", "4", "8Gi", false, json!({}))], &Held::default()), None);
    }
}
