//! Reconciling one VM: acknowledge a new desired state at once, then one
//! step through the VM driver, then the status derived from what it saw.

use std::time::Duration;

use chrono::Utc;
use tracing::{info, warn};
use vmaas_backend::{Attachment, Backend, BackendError, Cleanup, ErrorKind, Firewall, Requests, VmSpec, VmTarget};
use vmaas_model::{
    Desired, InstanceType, InstanceTypeDeprecation, InstanceTypeState, Observation, Phase, PowerState, Reason, SecurityGroup,
    VirtualMachineStatus, VmState, derive_status,
};

use super::{Outcome, Reconciler};
use crate::store::{Scope, StoreError, VmRecord};

/// How soon a VM is looked at again after a transient backend error.
const RETRY: Duration = Duration::from_secs(1);
/// How soon a deletion under way is looked at again.
const CLEANUP: Duration = Duration::from_millis(500);

fn desired(vm: &VmRecord) -> Desired {
    if vm.deleted_at.is_some() { Desired::Deleted } else { Desired::Power(vm.power()) }
}

/// The observation the last status stands for, keeping its addresses.
fn last_observation(vm: &VmRecord, phase: Phase) -> Observation {
    Observation::keeping(&vm.status, phase)
}

/// What the status says at once when the desired state changed, before the
/// backend has done anything: where the VM is going (`moving`: off the
/// cluster it is on, which its placement no longer admits).
fn acknowledgement(vm: &VmRecord, moving: Option<Reason>) -> Option<Observation> {
    if vm.deleted_at.is_some() {
        return Some(deleting());
    }
    if let Some(why) = moving.filter(|_| vm.power() == PowerState::Stopped) {
        return Some(last_observation(vm, Phase::Stopping(why)));
    }
    if vm.power() == PowerState::Started && vm.requests.restart > vm.acted.restart {
        return Some(last_observation(vm, Phase::Starting(Reason::new("Restarting", "a restart was requested"))));
    }
    if let Some(snapshot) = vm.restore_pending().filter(|_| vm.power() == PowerState::Started) {
        let why = Reason::new("Restoring", format!("its disks are being restored from snapshot {snapshot}"));
        return Some(last_observation(vm, Phase::Starting(why)));
    }
    if vm.power() == PowerState::Started && vm.requests.migrate > vm.acted.migrate {
        let to = vm.migrate_to.as_deref().map(|n| format!(" to node {n}")).unwrap_or_default();
        return Some(last_observation(
            vm,
            Phase::Migrating(Reason::new("MigrationRequested", format!("a live migration{to} was requested"))),
        ));
    }
    let consistent = matches!(
        (vm.power(), vm.status.state),
        (PowerState::Started, VmState::Ready | VmState::Progressing | VmState::Failed | VmState::Migrating)
            | (PowerState::Stopped, VmState::Stopped)
            | (PowerState::Paused, VmState::Paused | VmState::Progressing | VmState::Failed)
    );
    if consistent {
        return None;
    }
    let phase = match vm.status.state {
        VmState::Ready => Phase::Ready,
        VmState::Stopped => Phase::Stopped,
        VmState::Paused => Phase::Paused,
        _ => Phase::Absent,
    };
    Some(last_observation(vm, phase))
}

/// The status VM `vm` has once its desired state is acknowledged: what the
/// reconciler writes first, and what the API shows of a change the
/// reconciler has not come to yet.
pub(crate) fn acknowledged_status(backend: &dyn Backend, vm: &VmRecord) -> VirtualMachineStatus {
    let moving = vmaas_backend::moving_from(&backend.clusters(), vm.status.cluster.as_deref(), vm.spec.placement.as_ref());
    match acknowledgement(vm, moving) {
        Some(obs) => derive_status(desired(vm), &obs, &vm.status, Utc::now()),
        None => vm.status.clone(),
    }
}

/// What a VM being deleted is observed as until its backend is done.
fn deleting() -> Observation {
    Observation::new(Phase::Absent)
}

/// The status of a VM whose deletion was requested, as the reconciler
/// writes it (and as the API shows it when the VM is already gone).
pub(crate) fn deleting_status(vm: &VmRecord) -> vmaas_model::VirtualMachineStatus {
    derive_status(Desired::Deleted, &deleting(), &vm.status, Utc::now())
}

/// What VM `vm`'s disks are copied from at its first start, if it is a clone.
fn clone_from(vm: &VmRecord) -> Option<vmaas_backend::CloneFrom> {
    let c = vm.spec.clone_of.as_ref()?;
    match (&c.snapshot, &c.compute_instance) {
        (Some(s), _) => Some(vmaas_backend::CloneFrom::Snapshot(s.clone())),
        (None, Some(v)) => Some(vmaas_backend::CloneFrom::Vm(v.clone())),
        (None, None) => None,
    }
}

/// Writes the acknowledgement of VM `vm`'s new desired state, and takes it
/// into `vm` when no other write came first.
pub(super) async fn acknowledge(r: &Reconciler, vm: &mut VmRecord) -> Result<(), StoreError> {
    let status = acknowledged_status(r.backend.as_ref(), vm);
    if r.store.write_vm_status(vm, &status, vm.acted).await? {
        vm.status = status;
        vm.observed_version = vm.version;
        r.queue.status_written();
    }
    Ok(())
}

/// One pass over VM `id`.
pub(super) async fn reconcile(r: &Reconciler, id: &str) -> Result<(Outcome, Option<Duration>), StoreError> {
    let mut vm = match r.store.get_vm(id, &Scope::All).await {
        Ok(vm) => vm,
        Err(StoreError::NotFound { .. }) => return Ok((Outcome::Unchanged, None)),
        Err(e) => return Err(e),
    };
    if vm.unacknowledged() {
        acknowledge(r, &mut vm).await?;
    }
    if vm.deleted_at.is_some() {
        return delete(r, &vm).await;
    }
    let mut machine = vm.machine.clone();
    let imported_image = match super::image::boot(r, &vm).await? {
        super::image::Boot::Catalog => None,
        super::image::Boot::Imported(id, profile) => {
            // The template's profile over the image's.
            machine.profile = machine.profile.over(&profile);
            Some(id)
        }
        // Nothing to boot yet: the image's reconcile wakes the VM when it is done.
        super::image::Boot::Waiting(why) if vm.power() == PowerState::Started => {
            return Ok((write(r, &vm, &last_observation(&vm, Phase::Starting(why)), vm.acted).await?, None));
        }
        super::image::Boot::Failed(why) if vm.power() == PowerState::Started => {
            return Ok((write(r, &vm, &Observation::new(Phase::Failed(why)), vm.acted).await?, None));
        }
        super::image::Boot::Waiting(_) | super::image::Boot::Failed(_) => None,
    };
    let (external_ips, balanced_ports) = super::external::exposure(r, &vm).await?;
    let spec = VmSpec {
        power: vm.power(),
        machine,
        requests: vm.requests,
        migrate_to: vm.migrate_to.clone(),
        restore_from: vm.restore_from.clone(),
        clone_from: clone_from(&vm),
        attachments: attachments(r, &vm).await?,
        external_ips,
        balanced_ports,
        volumes: super::volume::disks(r, &vm).await?,
        imported_image,
        placement: vm.spec.placement.clone().unwrap_or_default(),
        cluster: vm.status.cluster.clone(),
        labels: vm.labels.labels.clone(),
        annotations: vm.labels.annotations.clone(),
    };
    let target = VmTarget { id: vm.id.clone(), tenant: vm.tenant.clone(), name: vm.name.clone(), version: vm.version, spec };
    match r.backend.vms().ensure(&target).await {
        Ok((seen, next)) => {
            super::volume::note_presence(r, &vm.id, seen.volumes).await?;
            Ok((write(r, &vm, &seen.observation, seen.acted).await?, next.delay()))
        }
        Err(e) => backend_failed(r, &vm, e).await,
    }
}

/// The VM's NICs on subnets, as the server resolved them at create, each
/// with the current rules of its security groups.
async fn attachments(r: &Reconciler, vm: &VmRecord) -> Result<Vec<Attachment>, StoreError> {
    let mut out = Vec::new();
    for (i, a) in vm.spec.network_attachments.iter().enumerate() {
        let Some(ip) = a.ip_address.as_deref().and_then(|ip| ip.parse().ok()) else { continue };
        let firewall = if a.security_groups.is_empty() { None } else { Some(firewall(r, &a.security_groups).await?) };
        let network = match r.store.get_record::<vmaas_model::Subnet>(&a.subnet, &Scope::All).await {
            Ok(s) => s.spec.virtual_network,
            // Going with the VM: its NIC is named without its network.
            Err(StoreError::NotFound { .. }) => String::new(),
            Err(e) => return Err(e),
        };
        out.push(Attachment { subnet: a.subnet.clone(), network, ip, mac: Attachment::mac_for(&vm.id, i), firewall });
    }
    Ok(out)
}

/// The rules of security groups `ids`, merged (a group gone allows nothing).
async fn firewall(r: &Reconciler, ids: &[String]) -> Result<Firewall, StoreError> {
    let mut f = Firewall::default();
    for id in ids {
        let sg = match r.store.get_record::<SecurityGroup>(id, &Scope::All).await {
            Ok(sg) => sg,
            Err(StoreError::NotFound { .. }) => continue,
            Err(e) => return Err(e),
        };
        let mut ignored = vmaas_model::ValidationErrors::default();
        f.ingress.extend(sg.spec.ingress.iter().filter_map(|rule| rule.check("", &mut ignored)));
        f.egress.extend(sg.spec.egress.iter().filter_map(|rule| rule.check("", &mut ignored)));
    }
    Ok(f)
}

/// A backend failure: a transient one keeps the last phase and is retried;
/// a request the backend refuses fails the VM until its spec changes.
async fn backend_failed(r: &Reconciler, vm: &VmRecord, e: BackendError) -> Result<(Outcome, Option<Duration>), StoreError> {
    warn!(error = %e, kind = e.kind.as_str(), "backend error");
    let obs = match e.kind {
        ErrorKind::Transient => {
            let mut o = last_observation(vm, Phase::Starting(Reason::new("BackendError", e.to_string())));
            o.degraded = Some(Reason::new("BackendError", e.to_string()));
            o
        }
        ErrorKind::Invalid => Observation::new(Phase::Failed(Reason::new("BackendRefused", e.to_string()))),
        ErrorKind::Unsupported => Observation::new(Phase::Failed(Reason::new("Unsupported", e.to_string()))),
    };
    write(r, vm, &obs, vm.acted).await?;
    Ok((Outcome::BackendError, e.is_transient().then_some(RETRY)))
}

async fn delete(r: &Reconciler, vm: &VmRecord) -> Result<(Outcome, Option<Duration>), StoreError> {
    match r.backend.vms().delete(&vm.id).await {
        Ok(Cleanup::Done) => {
            super::volume::detach_all(r, &vm.id).await?;
            super::external::release_auto(r, &vm.id).await?;
            super::snapshot::with_vm(r, vm).await?;
            r.store.remove_vm(&vm.id).await?;
            for a in &vm.spec.network_attachments {
                r.queue.enqueue(vmaas_model::ObjectKind::Subnet, &a.subnet);
                for g in &a.security_groups {
                    r.queue.enqueue(vmaas_model::ObjectKind::SecurityGroup, g);
                }
            }
            info!(vm = %vm.id, name = %vm.name, "virtual machine removed");
            Ok((Outcome::Removed, None))
        }
        Ok(Cleanup::InProgress) => Ok((write(r, vm, &deleting(), vm.acted).await?, Some(CLEANUP))),
        Err(e) => {
            warn!(error = %e, "cleanup failed; will retry");
            let mut obs = deleting();
            obs.degraded = Some(Reason::new("CleanupFailed", e.to_string()));
            write(r, vm, &obs, vm.acted).await?;
            Ok((Outcome::BackendError, Some(RETRY)))
        }
    }
}

/// The deprecation of the VM's instance type, while it is DEPRECATED or
/// OBSOLETE (a type deleted meanwhile says nothing).
async fn deprecation(r: &Reconciler, vm: &VmRecord) -> Result<Option<InstanceTypeDeprecation>, StoreError> {
    let Some(t) = &vm.spec.instance_type else { return Ok(None) };
    match r.store.get_record::<InstanceType>(&t.id, &Scope::All).await {
        Ok(t) if t.spec.state != InstanceTypeState::Active => Ok(t.spec.deprecation),
        Ok(_) | Err(StoreError::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Derives and writes the status for `obs`, if it changed.
async fn write(r: &Reconciler, vm: &VmRecord, obs: &Observation, acted: Requests) -> Result<Outcome, StoreError> {
    let mut status = derive_status(desired(vm), obs, &vm.status, Utc::now());
    status.instance_type_deprecation = deprecation(r, vm).await?;
    if status == vm.status && acted == vm.acted {
        return Ok(Outcome::Unchanged);
    }
    if !r.store.write_vm_status(vm, &status, acted).await? {
        tracing::debug!("the VM changed while it was reconciled; the next pass takes it from there");
        return Ok(Outcome::Unchanged);
    }
    r.queue.status_written();
    if status.state != vm.status.state {
        info!(vm = %vm.id, from = vm.status.state.short(), to = status.state.short(), "state changed");
    }
    Ok(Outcome::Updated)
}
