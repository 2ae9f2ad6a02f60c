//! Virtual machines in the store: the tenant's spec as written, the machine
//! it resolved to, and the requests (restart, migration) by generation.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use vmaas_backend::Requests;
use vmaas_model::{MachineSpec, ObjectKind, PowerState, VirtualMachine, VirtualMachineSpec, VirtualMachineStatus, initial_status};

use super::record::Record;
use super::row::{Filter, NewObject, Row};
use super::{BootImage, Scope, Store, StoreError};
use crate::template::object_id as template_id;

const KIND: ObjectKind = ObjectKind::VirtualMachine;

/// What a VM stores as its desired state.
#[derive(Serialize, Deserialize)]
struct StoredSpec {
    spec: VirtualMachineSpec,
    machine: MachineSpec,
    #[serde(default)]
    requests: Requests,
    /// The node the last migration request asked for, if it named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    migrate_to: Option<String>,
    /// The snapshot the last restore request named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    restore_from: Option<String>,
    /// Keep its snapshots when it is deleted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    retain_snapshots: bool,
}

/// A stored virtual machine: the record every kind has (its id, owner,
/// name, spec as written, status, versions, times and labels), and what
/// only a VM stores beside them. It reads as its record (`Deref`).
#[derive(Debug, Clone, PartialEq)]
pub struct VmRecord {
    /// What every stored object has.
    pub record: Record<VirtualMachine>,
    /// The machine the spec resolved to against its template when it was last set.
    pub machine: MachineSpec,
    /// One-off requests by generation (restart, migration).
    pub requests: Requests,
    /// The node the last migration request asked for, if it named one.
    pub migrate_to: Option<String>,
    /// The snapshot (its id) the last restore request named.
    pub restore_from: Option<String>,
    /// Whether its deletion keeps its snapshots.
    pub retain_snapshots: bool,
    /// The request generations the backend has acted on, as last observed.
    pub acted: Requests,
}

impl std::ops::Deref for VmRecord {
    type Target = Record<VirtualMachine>;

    fn deref(&self) -> &Record<VirtualMachine> {
        &self.record
    }
}

impl std::ops::DerefMut for VmRecord {
    fn deref_mut(&mut self) -> &mut Record<VirtualMachine> {
        &mut self.record
    }
}

impl VmRecord {
    /// A new VM, version 1, with the status of a VM not observed yet.
    pub fn new(
        id: String,
        tenant: &str,
        name: &str,
        creator: &str,
        spec: VirtualMachineSpec,
        machine: MachineSpec,
        now: DateTime<Utc>,
    ) -> Self {
        let status = initial_status(spec.state, now);
        Self {
            record: Record { status, ..Record::new(id, tenant, name, creator, spec, now) },
            machine,
            requests: Requests::default(),
            migrate_to: None,
            restore_from: None,
            retain_snapshots: false,
            acted: Requests::default(),
        }
    }

    /// The power state asked for.
    pub fn power(&self) -> PowerState {
        self.spec.state
    }

    /// The snapshot (its id) a restore still to be carried out takes the
    /// VM's disks back to, if one is.
    pub fn restore_pending(&self) -> Option<&str> {
        (self.requests.restore > self.acted.restore).then_some(self.restore_from.as_deref()).flatten()
    }

    /// The record of a stored row.
    pub fn from_row(row: &Row) -> Result<Self, StoreError> {
        let stored: StoredSpec = serde_json::from_str(&row.spec)?;
        Ok(Self {
            record: Record::from_parts(row, stored.spec, serde_json::from_str(&row.status)?),
            machine: stored.machine,
            requests: stored.requests,
            migrate_to: stored.migrate_to,
            restore_from: stored.restore_from,
            retain_snapshots: stored.retain_snapshots,
            acted: serde_json::from_str(&row.observed).unwrap_or_default(),
        })
    }

    fn spec_doc(&self) -> Result<String, StoreError> {
        Ok(serde_json::to_string(&StoredSpec {
            spec: self.spec.clone(),
            machine: self.machine.clone(),
            requests: self.requests,
            migrate_to: self.migrate_to.clone(),
            restore_from: self.restore_from.clone(),
            retain_snapshots: self.retain_snapshots,
        })?)
    }

    fn to_row(&self) -> Result<Row, StoreError> {
        self.record.row_with(self.spec_doc()?, serde_json::to_string(&self.acted)?)
    }
}

/// The API's object of a VM row.
pub(super) fn api_object(row: &Row) -> Result<VirtualMachine, StoreError> {
    Ok(VmRecord::from_row(row)?.to_api())
}

/// The API's JSON of a VM row.
pub(super) fn api_json(row: &Row) -> Result<String, StoreError> {
    Ok(serde_json::to_string(&api_object(row)?)?)
}

/// A create's refusal for a reference it lacks, named for the VM `vm`.
pub fn missing_of(vm: &VmRecord, e: StoreError) -> StoreError {
    match e {
        StoreError::MissingReference(_) => StoreError::MissingReference(format!(
            "template {:?}, or its image, or a subnet or security group of the VM, does not exist (any more)",
            vm.spec.template
        )),
        other => other,
    }
}

impl Store {
    /// Stores a new VM; its name must be free in its tenant and its template must exist.
    pub async fn insert_vm(&self, vm: &VmRecord) -> Result<(), StoreError> {
        self.insert_vm_booting(vm, None).await
    }

    /// Stores a new VM booting the imported image `image`, which must still
    /// exist (or is stored with it, made for it): the reference keeps it
    /// from being pruned.
    pub async fn insert_vm_booting(&self, vm: &VmRecord, image: Option<&BootImage>) -> Result<(), StoreError> {
        self.stage_vm_booting(vm, image).await?.committed().await.map_err(|e| missing_of(vm, e))
    }

    /// [`Self::insert_vm_booting`], handed to be committed: admission
    /// checks count the VM once this returns; it is stored once
    /// [`super::Staged::committed`] says so (name that error with [`missing_of`]).
    pub async fn stage_vm_booting(&self, vm: &VmRecord, image: Option<&BootImage>) -> Result<super::Staged, StoreError> {
        let mut refs = vec![(template_id(&vm.spec.template), "template".to_owned())];
        refs.extend(image.map(|i| (i.id.clone(), "image".to_owned())));
        for a in &vm.spec.network_attachments {
            refs.push((a.subnet.clone(), "subnet".to_owned()));
            refs.extend(a.security_groups.iter().map(|g| (g.clone(), "security_group".to_owned())));
        }
        refs.sort();
        refs.dedup_by(|a, b| a.0 == b.0);
        let new_image = image.map(BootImage::new_object).transpose()?.flatten();
        let vm_row = NewObject { row: vm.to_row()?, refs };
        Ok(self.stage_all(&new_image.iter().chain([&vm_row]).collect::<Vec<_>>()).await)
    }

    /// The VM `id`, if `scope` may see it.
    pub async fn get_vm(&self, id: &str, scope: &Scope) -> Result<VmRecord, StoreError> {
        VmRecord::from_row(&self.get(KIND, id, scope).await?)
    }

    /// The VM `id` as the API's JSON, if `scope` may see it.
    pub async fn get_vm_json(&self, id: &str, scope: &Scope) -> Result<std::sync::Arc<str>, StoreError> {
        self.get_json(KIND, id, scope).await
    }

    /// The VM `id` as the API shows it, if `scope` may see it: kept in
    /// memory when the store keeps its objects there, else read.
    pub async fn get_vm_api(&self, id: &str, scope: &Scope) -> Result<std::sync::Arc<VirtualMachine>, StoreError> {
        match self.read_mem(|m| m.visible(KIND, id, scope).map(|c| c.vm.clone())) {
            Some(Some(Some(vm))) => Ok(vm),
            Some(None) => Err(StoreError::NotFound { kind: KIND.human(), id: id.to_owned() }),
            _ => Ok(std::sync::Arc::new(self.get_vm(id, scope).await?.to_api())),
        }
    }

    /// A page of VMs as the API's JSON, and the total matching (`f.state`:
    /// a `VmState`'s wire name).
    pub async fn list_vms_json(&self, scope: &Scope, f: &Filter) -> Result<(Vec<std::sync::Arc<str>>, u64), StoreError> {
        self.list_json(KIND, scope, f).await
    }

    /// Every VM, oldest first.
    pub async fn all_vms(&self) -> Result<Vec<VmRecord>, StoreError> {
        self.all(KIND).await?.iter().map(VmRecord::from_row).collect()
    }

    /// The VMs stored or staged to be that refer to `target` (a subnet, a
    /// security group): what an admission must count, without reading every VM.
    pub async fn vms_referring(&self, target: &str) -> Result<Vec<VmRecord>, StoreError> {
        // Staged first: a staged VM leaves the staged ones only once committed.
        let staged = self.mem.as_ref().map(|m| m.pending_rows(KIND)).unwrap_or_default();
        let mut rows: Vec<Row> = self.referrers(target).await?.into_iter().filter(|r| r.kind == KIND).collect();
        let stored: std::collections::HashSet<String> = rows.iter().map(|r| r.id.clone()).collect();
        rows.extend(staged.into_iter().filter(|r| !stored.contains(&r.id)));
        rows.iter().map(VmRecord::from_row).collect()
    }

    /// Replaces a VM's desired state if its version is still `expected`, and
    /// returns the record with the new version.
    pub async fn update_vm_spec(&self, vm: &VmRecord, expected: i64) -> Result<VmRecord, StoreError> {
        let current = Row { labels: vm.labels.clone(), ..self.get(KIND, &vm.id, &Scope::All).await? };
        let saved = self.update_spec(&current, expected, vm.spec_doc()?, Utc::now()).await?;
        VmRecord::from_row(&saved)
    }

    /// [`Self::update_vm_spec`] of a VM whose machine was resolved anew:
    /// its reference to the imported image it boots follows (`None`: a
    /// catalog image, no reference), stored with the image when new.
    pub async fn update_vm_booting(&self, vm: &VmRecord, expected: i64, image: Option<&BootImage>) -> Result<VmRecord, StoreError> {
        let current = Row { labels: vm.labels.clone(), ..self.get(KIND, &vm.id, &Scope::All).await? };
        let new_image = image.map(BootImage::new_object).transpose()?.flatten();
        let role = Some(("image", image.map(|i| i.id.as_str())));
        let saved = self.update_spec_and_ref(&current, expected, vm.spec_doc()?, Utc::now(), role, new_image.as_ref()).await?;
        VmRecord::from_row(&saved)
    }

    /// Marks a VM for deletion (idempotent).
    pub async fn mark_vm_deleted(&self, id: &str, scope: &Scope, now: DateTime<Utc>) -> Result<VmRecord, StoreError> {
        VmRecord::from_row(&self.mark_deleted(KIND, id, scope, now).await?)
    }

    /// Sets whether the deletion of a VM (not being deleted) keeps its snapshots.
    pub async fn keep_snapshots(&self, id: &str, scope: &Scope, keep: bool) -> Result<VmRecord, StoreError> {
        self.request(id, scope, |vm| vm.retain_snapshots = keep).await
    }

    /// Raises the restart generation of a VM that is not being deleted.
    pub async fn request_restart(&self, id: &str, scope: &Scope) -> Result<VmRecord, StoreError> {
        self.request(id, scope, |vm| vm.requests.restart += 1).await
    }

    /// Raises the migration generation of a VM that is not being deleted,
    /// with the node it should move to (`None`: the scheduler's choice).
    pub async fn request_migration(&self, id: &str, scope: &Scope, node: Option<String>) -> Result<VmRecord, StoreError> {
        self.request(id, scope, |vm| {
            vm.requests.migrate += 1;
            vm.migrate_to = node.clone();
        })
        .await
    }

    /// Raises the restore generation of a VM that is not being deleted,
    /// with the snapshot (its id) its disks return to. A paused VM comes
    /// back started: its frozen memory does not survive the restore.
    pub async fn request_restore(&self, id: &str, scope: &Scope, snapshot: &str) -> Result<VmRecord, StoreError> {
        self.request(id, scope, |vm| {
            vm.requests.restore += 1;
            vm.restore_from = Some(snapshot.to_owned());
            if vm.spec.state == PowerState::Paused {
                vm.spec.state = PowerState::Started;
            }
        })
        .await
    }

    /// Records a one-off request on a VM that is not being deleted,
    /// retrying when the VM changes meanwhile.
    async fn request(&self, id: &str, scope: &Scope, raise: impl Fn(&mut VmRecord)) -> Result<VmRecord, StoreError> {
        let mut last = None;
        for _ in 0..5 {
            let mut vm = self.get_vm(id, scope).await?;
            if vm.deleted_at.is_some() {
                return Err(StoreError::InUse(format!("virtual machine {:?} is being deleted", vm.name)));
            }
            raise(&mut vm);
            match self.update_vm_spec(&vm, vm.version).await {
                Err(e @ StoreError::Conflict(_)) => last = Some(e),
                other => return other,
            }
        }
        Err(last.unwrap_or_else(|| StoreError::Conflict("the VM keeps changing; retry".into())))
    }

    /// Writes a VM's status as the reconciler derived it from `seen`; false
    /// when the VM changed since.
    pub async fn write_vm_status(&self, seen: &VmRecord, status: &VirtualMachineStatus, acted: Requests) -> Result<bool, StoreError> {
        let row = seen.to_row()?;
        self.write_status(&row, serde_json::to_string(status)?, status.state.as_str(), serde_json::to_string(&acted)?).await
    }

    /// Removes a VM for good, once the backend has cleaned up after it.
    pub async fn remove_vm(&self, id: &str) -> Result<(), StoreError> {
        self.remove(id).await
    }
}
