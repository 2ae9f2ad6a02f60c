//! Virtual machines as the API shows them (the seed design's JSON), the
//! request shapes that create and change them, and (in [`status`]) the state
//! machine from backend observations to their status.

pub mod compute_instance;
pub mod disks;
pub mod expiry;
pub mod image;
pub mod migratable;
pub mod placement;
pub mod reason;
pub mod status;

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub use crate::object::{Metadata, MetadataInput};
use crate::validation::ValidationErrors;
use crate::value::ParameterValue;
pub use disks::VmDisk;
pub use image::VmImage;
pub use placement::Placement;

/// The `@type` of a virtual machine in API responses.
pub const VM_TYPE_URL: &str = "type.googleapis.com/fulfillment.v1.VirtualMachine";

/// The power state a tenant asks for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum PowerState {
    /// Running.
    #[default]
    Started,
    /// Powered off; disks are kept.
    Stopped,
    /// Running but frozen: its vCPUs do not run, its memory and devices
    /// are kept (QMP `stop` on qemu, KubeVirt's `pause`); only a running
    /// VM can be paused.
    Paused,
}

impl PowerState {
    /// `started`, `stopped` or `paused`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Started => "started",
            Self::Stopped => "stopped",
            Self::Paused => "paused",
        }
    }

    /// Whether the VM holds the host's CPUs and memory (started or paused).
    pub fn holds_host(self) -> bool {
        self != Self::Stopped
    }
}

/// A word that is no power state or VM state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    /// Not `started`, `stopped` or `paused`.
    #[error("expected \"started\", \"stopped\" or \"paused\", got {0:?}")]
    Power(String),
    /// No VM state, by its wire or short name.
    #[error("unknown state {0:?}: expected one of PROGRESSING, READY, STOPPED, FAILED, DELETING, MIGRATING, PAUSED")]
    Vm(String),
}

/// The reason, as a field error takes it.
impl From<StateError> for String {
    fn from(e: StateError) -> String {
        e.to_string()
    }
}

impl FromStr for PowerState {
    type Err = StateError;
    fn from_str(s: &str) -> Result<Self, StateError> {
        match s {
            "started" => Ok(Self::Started),
            "stopped" => Ok(Self::Stopped),
            "paused" => Ok(Self::Paused),
            _ => Err(StateError::Power(s.to_owned())),
        }
    }
}

/// What the tenant wants.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct VirtualMachineSpec {
    /// Template id; a clone without one takes its source's, a VM of a
    /// catalog item its item's.
    #[serde(default)]
    pub template: String,
    /// The catalog item it is made from (OSAC's `catalog_item`, by name or
    /// id; stored as the id): its template, its defaults, and the fields it
    /// fixes for the VM's life. Fixed at create.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    #[serde(default, skip_serializing_if = "Option::is_none", with = "crate::reference::opt_key")]
    pub catalog_item: Option<String>,
    /// Parameter values, each wrapped as `{"value": ...}`, returned exactly as written.
    #[serde(default)]
    pub template_parameters: BTreeMap<String, ParameterValue>,
    /// `started` (default) or `stopped`.
    #[serde(default)]
    pub state: PowerState,
    /// NICs on subnets (OSAC's `network_attachments`), beside the host
    /// network every VM has; the first one's address is `status.internalIP`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network_attachments: Vec<NetworkAttachment>,
    /// cloud-init user data (OSAC's `user_data`), in place of the template's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    /// SSH public keys (OSAC's `ssh_public_key`): one key, or several one
    /// per line, authorised beside the template's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_public_key: Option<String>,
    /// The image it boots (OSAC's `image`), in place of its template's;
    /// fixed at create.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<VmImage>,
    /// Where it may run, when the server drives several clusters; changed
    /// while it is stopped, it moves to a cluster the new one admits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
    /// Its machine shape: an instance type by name or id (`"general.small"`
    /// or `{"name": …}`), answered with both; its cores and memory replace
    /// the template's defaults. Changing it resizes the VM at its next start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<crate::InstanceTypeReference>,
    /// How long it lives (`30m`, `1h30m`, `7d`), as given; the server sets
    /// `expires_at` from it and deletes the VM then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<String>,
    /// When the server deletes it with its auto-delete volumes (RFC 3339):
    /// given, or set from `ttl` or the tenant's maximum TTL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<chrono::DateTime<chrono::Utc>>,
    /// What its disks start as, on create only: a copy of one of the
    /// tenant's VMs or snapshots (its template and parameters too, unless
    /// given). It gets its own identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clone_of: Option<crate::snapshot::CloneOf>,
    /// Its boot disk (OSAC's `boot_disk`): larger than its template's, or
    /// in a storage tier. It can grow later, never shrink.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_disk: Option<VmDisk>,
    /// Empty disks beside its template's (OSAC's `additional_disks`),
    /// named `disk1`, `disk2`, … in the guest's order; fixed at create.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_disks: Vec<VmDisk>,
    /// OSAC's `auto_external_ip_attachment`: an external IP from the
    /// default pool, attached to the VM as it is made, named as the VM,
    /// and deleted with it. Fixed at create.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub auto_external_ip_attachment: bool,
}

impl VirtualMachineSpec {
    /// A started VM of `template`, with the template's defaults and no NIC on a subnet.
    pub fn new(template: impl Into<String>) -> Self {
        Self {
            template: template.into(),
            catalog_item: None,
            template_parameters: BTreeMap::new(),
            state: PowerState::Started,
            network_attachments: Vec::new(),
            user_data: None,
            ssh_public_key: None,
            image: None,
            placement: None,
            instance_type: None,
            ttl: None,
            expires_at: None,
            clone_of: None,
            boot_disk: None,
            additional_disks: Vec::new(),
            auto_external_ip_attachment: false,
        }
    }

    /// The keys of `ssh_public_key`, one per non-empty line.
    pub fn ssh_keys(&self) -> Vec<String> {
        self.ssh_public_key.as_deref().unwrap_or("").lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_owned).collect()
    }

    /// Applies `user_data` and `ssh_public_key` over the cloud-init the
    /// template resolved to, naming fields as `{prefix}.user_data`.
    pub fn apply_guest_config(&self, machine: &mut crate::MachineSpec, prefix: &str, errs: &mut ValidationErrors) {
        if let Some(u) = &self.user_data {
            match crate::nocloud::check_user_data(u) {
                Ok(()) => machine.cloud_init.user_data = Some(u.clone()),
                Err(e) => errs.push(format!("{prefix}.user_data"), e),
            }
        }
        let keys = self.ssh_keys();
        let bad: Vec<String> = keys
            .iter()
            .enumerate()
            .filter_map(|(i, k)| crate::nocloud::check_ssh_key(k).err().map(|e| format!("key {} {e}", i + 1)))
            .collect();
        if !bad.is_empty() {
            return errs.push(format!("{prefix}.ssh_public_key"), bad.join("; "));
        }
        for k in keys {
            if !machine.cloud_init.ssh_keys.contains(&k) {
                machine.cloud_init.ssh_keys.push(k);
            }
        }
        // Each key was checked above (and the template's when it was
        // resolved): only the total is left to check.
        let n = machine.cloud_init.ssh_keys.len();
        if n > crate::nocloud::MAX_SSH_KEYS {
            errs.push(
                format!("{prefix}.ssh_public_key"),
                format!("with the template's keys, has {n} keys, at most {} are allowed", crate::nocloud::MAX_SSH_KEYS),
            );
        }
    }
}

/// One NIC on a subnet.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NetworkAttachment {
    /// The subnet: its id (its name is accepted on create and replaced by the id).
    pub subnet: String,
    /// Security groups of the NIC (none: everything inside the network passes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub security_groups: Vec<String>,
    /// The NIC's address: as asked, else assigned by the server, and kept
    /// for the VM's life.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_address: Option<String>,
}

/// The observed state of a VM.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum VmState {
    /// Being created, started, stopped or changed.
    #[default]
    #[serde(rename = "VIRTUAL_MACHINE_STATE_PROGRESSING")]
    Progressing,
    /// Running, and the guest answers its readiness probe.
    #[serde(rename = "VIRTUAL_MACHINE_STATE_READY")]
    Ready,
    /// Powered off as asked.
    #[serde(rename = "VIRTUAL_MACHINE_STATE_STOPPED")]
    Stopped,
    /// Could not be made to match the spec; see the FAILED condition.
    #[serde(rename = "VIRTUAL_MACHINE_STATE_FAILED")]
    Failed,
    /// Being deleted; the record goes once the backend has cleaned up.
    #[serde(rename = "VIRTUAL_MACHINE_STATE_DELETING")]
    Deleting,
    /// Running and being moved to another host by an administrator (live
    /// migration); READY again once it is there.
    #[serde(rename = "VIRTUAL_MACHINE_STATE_MIGRATING")]
    Migrating,
    /// Paused as asked: frozen, its memory kept; `started` resumes it.
    #[serde(rename = "VIRTUAL_MACHINE_STATE_PAUSED")]
    Paused,
}

impl VmState {
    /// Every state.
    pub const ALL: [Self; 7] = [Self::Progressing, Self::Ready, Self::Stopped, Self::Failed, Self::Deleting, Self::Migrating, Self::Paused];

    /// The wire name, e.g. `VIRTUAL_MACHINE_STATE_READY`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Progressing => "VIRTUAL_MACHINE_STATE_PROGRESSING",
            Self::Ready => "VIRTUAL_MACHINE_STATE_READY",
            Self::Stopped => "VIRTUAL_MACHINE_STATE_STOPPED",
            Self::Failed => "VIRTUAL_MACHINE_STATE_FAILED",
            Self::Deleting => "VIRTUAL_MACHINE_STATE_DELETING",
            Self::Migrating => "VIRTUAL_MACHINE_STATE_MIGRATING",
            Self::Paused => "VIRTUAL_MACHINE_STATE_PAUSED",
        }
    }

    /// The short name, e.g. `READY`.
    pub fn short(self) -> &'static str {
        &self.as_str()["VIRTUAL_MACHINE_STATE_".len()..]
    }
}

impl fmt::Display for VmState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for VmState {
    type Err = StateError;
    /// Accepts the wire name or the short name, in any case (`ready`, `READY`,
    /// `VIRTUAL_MACHINE_STATE_READY`).
    fn from_str(s: &str) -> Result<Self, StateError> {
        let up = s.to_ascii_uppercase();
        Self::ALL.into_iter().find(|st| st.as_str() == up || st.short() == up).ok_or_else(|| StateError::Vm(s.to_owned()))
    }
}

/// The kinds of condition a VM reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ConditionType {
    /// The VM is moving towards its spec.
    #[serde(rename = "VIRTUAL_MACHINE_CONDITION_TYPE_PROGRESSING")]
    Progressing,
    /// The guest answers.
    #[serde(rename = "VIRTUAL_MACHINE_CONDITION_TYPE_READY")]
    Ready,
    /// The VM cannot be made to match its spec.
    #[serde(rename = "VIRTUAL_MACHINE_CONDITION_TYPE_FAILED")]
    Failed,
    /// The VM works but something is wrong (e.g. it is being healed).
    #[serde(rename = "VIRTUAL_MACHINE_CONDITION_TYPE_DEGRADED")]
    Degraded,
    /// The spec changed in a way the running guest takes only at its next
    /// restart (CPUs, memory, disk size): OSAC's `RESTART_REQUIRED`. Listed
    /// from the first time it holds.
    #[serde(rename = "VIRTUAL_MACHINE_CONDITION_TYPE_RESTART_REQUIRED")]
    RestartRequired,
    /// Whether the running VM can move to another host without stopping
    /// (KubeVirt's `LiveMigratable`); false says why. Listed while it runs.
    #[serde(rename = "VIRTUAL_MACHINE_CONDITION_TYPE_LIVE_MIGRATABLE")]
    LiveMigratable,
}

impl ConditionType {
    /// Every condition type, in the order they are reported.
    pub const ALL: [Self; 6] = [Self::Progressing, Self::Ready, Self::Failed, Self::Degraded, Self::RestartRequired, Self::LiveMigratable];

    /// The short name, e.g. `READY`.
    pub fn short(self) -> &'static str {
        match self {
            Self::Progressing => "PROGRESSING",
            Self::Ready => "READY",
            Self::Failed => "FAILED",
            Self::Degraded => "DEGRADED",
            Self::RestartRequired => "RESTART_REQUIRED",
            Self::LiveMigratable => "LIVE_MIGRATABLE",
        }
    }
}

/// A condition's truth value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ConditionStatus {
    /// Not known yet.
    #[default]
    #[serde(rename = "CONDITION_STATUS_UNSPECIFIED")]
    Unspecified,
    /// True.
    #[serde(rename = "CONDITION_STATUS_TRUE")]
    True,
    /// False.
    #[serde(rename = "CONDITION_STATUS_FALSE")]
    False,
}

impl ConditionStatus {
    /// The short name: `TRUE`, `FALSE` or `UNSPECIFIED`.
    pub fn short(self) -> &'static str {
        match self {
            Self::Unspecified => "UNSPECIFIED",
            Self::True => "TRUE",
            Self::False => "FALSE",
        }
    }
}

impl From<bool> for ConditionStatus {
    fn from(b: bool) -> Self {
        if b { Self::True } else { Self::False }
    }
}

/// One condition of a VM.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Condition {
    /// Which condition.
    #[serde(rename = "type")]
    pub kind: ConditionType,
    /// Whether it holds.
    pub status: ConditionStatus,
    /// When `status` last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<DateTime<Utc>>,
    /// A CamelCase machine-readable reason, e.g. `NoGPUAvailable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A human-readable message.
    #[serde(default)]
    pub message: String,
}

impl Condition {
    /// A condition `kind` of `status` for `reason`, observed at `now`: its
    /// transition time kept from `previous` unless its status changed.
    pub fn observed(
        kind: ConditionType,
        status: ConditionStatus,
        reason: Option<reason::Reason>,
        previous: Option<&Self>,
        now: DateTime<Utc>,
    ) -> Self {
        let last_transition_time = match previous {
            Some(p) if p.status == status => p.last_transition_time.or(Some(now)),
            _ => Some(now),
        };
        let (reason, message) = reason.map(|r| (Some(r.reason), r.message)).unwrap_or_default();
        Self { kind, status, last_transition_time, reason, message }
    }
}

/// What the VM is now.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct VirtualMachineStatus {
    /// Overall state.
    pub state: VmState,
    /// PROGRESSING, READY, FAILED and DEGRADED, always all four.
    pub conditions: Vec<Condition>,
    /// The address assigned to the VM itself.
    #[serde(rename = "internalIP", default, skip_serializing_if = "Option::is_none")]
    pub internal_ip: Option<String>,
    /// The floating address pointing to the VM.
    #[serde(rename = "externalIP", default, skip_serializing_if = "Option::is_none")]
    pub external_ip: Option<String>,
    /// The address of each of its NICs on subnets, in the order of
    /// `spec.network_attachments` (the first is `internalIP`).
    #[serde(rename = "internalIPs", default, skip_serializing_if = "Vec::is_empty")]
    pub internal_ips: Vec<String>,
    /// The cluster it was placed on, when the server drives several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// Its instance type's deprecation, while the type is DEPRECATED or
    /// OBSOLETE: the state, the type to move to, and when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_type_deprecation: Option<crate::InstanceTypeDeprecation>,
}

impl VirtualMachineStatus {
    /// The condition of kind `kind`, if reported.
    pub fn condition(&self, kind: ConditionType) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.kind == kind)
    }
}

crate::api_object! {
    /// A virtual machine as the API returns it.
    VirtualMachine { kind: VirtualMachine, spec: VirtualMachineSpec, status: VirtualMachineStatus, type_url: "type.googleapis.com/fulfillment.v1.VirtualMachine" }
}

/// The object of a create request. As in the seed design, `id` may carry the
/// name the tenant wants (`"id": "myvm"`); the server assigns the real id.
pub type CreateVirtualMachine = crate::CreateObject<VirtualMachineSpec>;

/// The spec fields a PATCH may change; absent fields are left alone.
/// `template_parameters`, when present, replaces the whole map.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SpecPatch {
    /// Must equal the current template: a VM cannot change template in place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// Must name the VM's catalog item, by name or id: it keeps the one it was made from.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    #[serde(default, skip_serializing_if = "Option::is_none", with = "crate::reference::opt_key")]
    pub catalog_item: Option<String>,
    /// New parameters (the whole map).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_parameters: Option<BTreeMap<String, ParameterValue>>,
    /// New power state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<PowerState>,
    /// New user data (`""` removes it); the guest reads it at its next start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    /// New SSH keys (`""` removes them); the guest reads them at its next start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_public_key: Option<String>,
    /// Must equal the current image: a VM cannot change image in place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<VmImage>,
    /// A new placement, only while the VM is to be stopped: a VM whose
    /// cluster it no longer admits moves to one it does, once STOPPED.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
    /// A new instance type: the VM takes its shape at its next start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<crate::InstanceTypeReference>,
    /// A new lifetime from now (extends or shortens it); `""` removes the
    /// end (refused under a maximum TTL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<String>,
    /// A new end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<chrono::DateTime<chrono::Utc>>,
    /// A larger boot disk.
    #[serde(default)]
    pub boot_disk: Option<VmDisk>,
    /// Must equal the current additional disks: they are fixed at create.
    #[serde(default)]
    pub additional_disks: Option<Vec<VmDisk>>,
    /// Must equal the current `auto_external_ip_attachment`: fixed at create.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_external_ip_attachment: Option<bool>,
}

/// The object of a PATCH request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PatchVirtualMachine {
    /// Accepted and ignored.
    #[serde(rename = "@type", default, skip_serializing)]
    pub type_url: Option<String>,
    /// Accepted; must equal the path's id when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `version` enables optimistic concurrency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<MetadataInput>,
    /// The changes.
    #[serde(default)]
    pub spec: SpecPatch,
    /// Accepted and ignored: status is the server's.
    #[serde(default, skip_serializing)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub status: Option<serde_json::Value>,
}
