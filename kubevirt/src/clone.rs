//! Clones on a cluster: a VM made with `clone_of` is first a KubeVirt
//! `VirtualMachineClone` of its source (the source VM, or the snapshot's
//! `VirtualMachineSnapshot`, in the same namespace), which makes the
//! clone's KubeVirt VM with new MACs and SMBIOS serial and its disks
//! restored from snapshots of the source's (vmaas's labels and annotations
//! filtered out). Once KubeVirt says it succeeded, vmaas takes that VM over
//! (one forced apply: its own spec, identity and cloud-init, the claims
//! KubeVirt made kept as the disks) and records the claims on it
//! ([`CLAIMS`]), so every later render names them.

use std::collections::BTreeMap;

use kube::core::DynamicObject;
use serde_json::json;
use tracing::info;
use vmaas_backend::{BackendError, CloneFrom, VmTarget};
use vmaas_model::k8s::clone::{CloneSeen, claims_of, observe_vm_clone, vm_clone, vm_clone_name};
use vmaas_model::{ObjectKind, Reason};

use crate::cluster::{as_json, failure};
use crate::names::labels;
use crate::shared::Shared;

/// The annotation of a cloned KubeVirt VM naming its disks' claims (JSON, by disk).
pub(crate) const CLAIMS: &str = "vmaas.io/disk-claims";
/// Labels and annotations of the source a clone does not take.
const FILTERS: [&str; 2] = ["*", "!vmaas.io/*"];

/// Where a VM's clone stands.
pub(crate) enum Cloning {
    /// Not a clone, or one taken over already: the claims its disks are.
    Claims(BTreeMap<String, String>),
    /// KubeVirt made the clone's VM: take it over, with these claims.
    TakeOver(BTreeMap<String, String>),
    /// Under way: nothing of the VM is applied yet.
    Waiting(String),
    /// It will not be: why.
    Failed(Reason),
}

impl Shared {
    /// One step of making `t` (a clone, if it is one) in `ns`; `current` is its watched KubeVirt VM.
    pub(crate) async fn clone_step(&self, t: &VmTarget, ns: &str, current: Option<&DynamicObject>) -> Result<Cloning, BackendError> {
        let Some(from) = &t.spec.clone_from else { return Ok(Cloning::Claims(BTreeMap::new())) };
        if let Some(vm) = current {
            let claims = vm.metadata.annotations.as_ref().and_then(|a| a.get(CLAIMS)).and_then(|c| serde_json::from_str(c).ok());
            return Ok(Cloning::Claims(claims.unwrap_or_default()));
        }
        let name = vm_clone_name(&t.name);
        let clones = self.cluster.api(&self.cluster.res.vm_clone, ns);
        let seen = clones.get_opt(&name).await.map_err(|e| failure(format!("reading VirtualMachineClone {ns}/{name}"), e))?;
        let Some(seen) = seen else {
            let source = match self.clone_source(from, ns) {
                Ok(source) => source,
                Err(not_yet) => return Ok(not_yet),
            };
            let mut obj = vm_clone(&t.name, ns, &source);
            obj["metadata"]["labels"] = json!(labels(ObjectKind::VirtualMachine, &t.id));
            for filters in ["labelFilters", "annotationFilters"] {
                obj["spec"][filters] = json!(FILTERS);
                obj["spec"]["template"][filters] = json!(FILTERS);
            }
            self.cluster.apply(&self.cluster.res.vm_clone, &obj).await?;
            info!(vm = %t.id, source = %source["name"], "clone: VirtualMachineClone made");
            return Ok(Cloning::Waiting(format!("KubeVirt is cloning {} {}", source["kind"].as_str().unwrap_or(""), source["name"])));
        };
        match observe_vm_clone(Some(&as_json(&seen))) {
            CloneSeen::Pending(how) => Ok(Cloning::Waiting(how)),
            CloneSeen::Failed(why) => Ok(Cloning::Failed(Reason::new("CloneFailed", why))),
            CloneSeen::Done => {
                let vms = self.cluster.api(&self.cluster.res.vm, ns);
                let made = vms.get_opt(&t.name).await.map_err(|e| failure(format!("reading the clone's VM {ns}/{}", t.name), e))?;
                match made {
                    Some(vm) => Ok(Cloning::TakeOver(claims_of(&as_json(&vm)))),
                    None => Ok(Cloning::Failed(Reason::new("CloneFailed", "KubeVirt's clone succeeded but its VM is gone"))),
                }
            }
        }
    }

    /// The `VirtualMachineClone` source of `from` in `ns`: else the step
    /// it makes, waiting (it is not on the cluster yet) or failed.
    fn clone_source(&self, from: &CloneFrom, ns: &str) -> Result<serde_json::Value, Cloning> {
        let (found, group, kind) = match from {
            CloneFrom::Snapshot(id) => (self.snapshots.of(id).into_iter().next(), "snapshot.kubevirt.io", "VirtualMachineSnapshot"),
            CloneFrom::Vm(id) => (self.vms.of(id).into_iter().next(), "kubevirt.io", "VirtualMachine"),
        };
        let Some(source) = found else { return Err(Cloning::Waiting(format!("waiting for the source's {kind} on the cluster"))) };
        let at = source.metadata.namespace.as_deref().unwrap_or_default();
        if at != ns {
            let why = format!("the source's {kind} is in namespace {at}, the clone in {ns}: KubeVirt clones within one namespace");
            return Err(Cloning::Failed(Reason::new("CloneFailed", why)));
        }
        Ok(json!({"apiGroup": group, "kind": kind, "name": source.metadata.name}))
    }
}
