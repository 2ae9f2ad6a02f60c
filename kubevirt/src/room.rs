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

/// The room of a cluster with `nodes` and `vms`; none when no node is Ready
/// (nothing known).
pub fn room(nodes: &[std::sync::Arc<DynamicObject>], vms: &[std::sync::Arc<DynamicObject>]) -> Option<Room> {
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
    for vm in vms {
        let domain = &vm.data["spec"]["template"]["spec"]["domain"];
        // vCPUs are cores × sockets (a VM resized live counts sockets); a
        // VM of an instance type says its shape in its annotations.
        let cpu = &domain["cpu"];
        let notes = &vm.data["metadata"]["annotations"];
        let vcpus = notes[VCPUS_ANNOTATION].as_str().and_then(|v| v.parse::<u64>().ok());
        r.cpu_millis.used += vcpus.unwrap_or(cpu["cores"].as_u64().unwrap_or(1) * cpu["sockets"].as_u64().unwrap_or(1)) * 1000;
        let memory = notes[MEMORY_ANNOTATION].as_str().or(domain["memory"]["guest"].as_str());
        r.memory_bytes.used += memory.and_then(|q| Quantity::parse(q).ok()).and_then(|q| q.to_units_ceil()).unwrap_or(0);
        for g in domain["devices"]["gpus"].as_array().into_iter().flatten() {
            if let Some(name) = g["deviceName"].as_str() {
                r.devices.entry(name.to_owned()).or_default().used += 1;
            }
        }
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
            "spec": {"template": {"spec": {"domain": {"cpu": {"cores": 2}, "memory": {"guest": "1Gi"},
                "devices": {"gpus": [{"name": "g", "deviceName": "nvidia.com/A10"}]}}}}}}));
        let r = room(&nodes, &[vm]).unwrap();
        assert_eq!(r.cpu_millis, Usage { total: 7500, used: 2000 });
        assert_eq!(r.memory_bytes, Usage { total: 16 << 30, used: 1 << 30 });
        assert_eq!(r.devices["nvidia.com/A10"], Usage { total: 2, used: 1 });
        assert!(!r.devices.contains_key("pods"));
    }

    #[test]
    fn no_ready_node_is_nothing_known() {
        assert_eq!(room(&[node("down", "4", "8Gi", false, json!({}))], &[]), None);
    }
}
