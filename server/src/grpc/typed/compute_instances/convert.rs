//! `osac.public.v1.ComputeInstance` and the model's VM types, as
//! `vmaas_model::vm::compute_instance` describes the view: `run_strategy`
//! is the power state, references are typed, the status has the view's
//! names, and `restart_requested_at` asks for a restart.

use prost_reflect::DescriptorPool;
use vmaas_model::reference::{self, Names, Referred};
use vmaas_model::vm::{Condition, ConditionType, NetworkAttachment, VirtualMachineStatus, VmDisk, VmImage, VmState};
use vmaas_model::{
    CreateVirtualMachine, InstanceTypeReference, PatchVirtualMachine, PowerState, ValidationErrors, VirtualMachine, VirtualMachineSpec,
};

use super::super::any::from_parameter;
use super::super::mask::Mask;
use super::super::meta::{changed_metadata, key, metadata, metadata_input};
use super::super::virtual_machines::parameters;
use super::super::{non_empty, time};
use crate::grpc::pb::osac::public::v1 as pb;

/// A create's or an update's `object` read as a VM request.
pub struct Asked<T> {
    /// The request.
    pub vm: T,
    /// `spec.restart_requested_at` was given: restart the VM.
    pub restart: bool,
}

/// A create's `object` as the model's create request.
pub fn create(pool: &DescriptorPool, ci: pb::ComputeInstance) -> Result<Asked<CreateVirtualMachine>, ValidationErrors> {
    let mut errs = ValidationErrors::default();
    let spec = ci.spec.unwrap_or_default();
    let restart = spec.restart_requested_at.is_some();
    let out = CreateVirtualMachine {
        type_url: None,
        id: non_empty(ci.id),
        metadata: ci.metadata.map(|m| metadata_input(m, &Mask::none())),
        spec: VirtualMachineSpec {
            template_parameters: parameters(pool, spec.template_parameters, &mut errs),
            state: spec.run_strategy.as_deref().and_then(|r| power(r, &mut errs)).unwrap_or_default(),
            network_attachments: spec.network_attachments.into_iter().map(attachment).collect(),
            user_data: spec.user_data,
            ssh_public_key: spec.ssh_public_key,
            image: spec.disk_image.as_ref().and_then(|r| key(&r.id, &r.name)).map(image),
            instance_type: spec.instance_type.as_ref().and_then(|r| key(&r.id, &r.name)).map(instance_type),
            boot_disk: spec.boot_disk.and_then(|d| disk(d, "object.spec.boot_disk", &mut errs)),
            additional_disks: additional_disks(spec.additional_disks, &mut errs),
            catalog_item: spec.catalog_item.as_ref().and_then(|r| key(&r.id, &r.name)),
            auto_external_ip_attachment: spec.auto_external_ip_attachment,
            ..VirtualMachineSpec::new(spec.template.as_ref().and_then(|r| key(&r.id, &r.name)).unwrap_or_default())
        },
        status: None,
    };
    errs.into_result(Asked { vm: out, restart })
}

/// An update's `object` as the model's patch: the fields `mask` wants.
pub fn patch(pool: &DescriptorPool, ci: pb::ComputeInstance, mask: &Mask) -> Result<Asked<PatchVirtualMachine>, ValidationErrors> {
    let mut errs = ValidationErrors::default();
    let spec = ci.spec.unwrap_or_default();
    if mask.wants("spec.network_attachments", !spec.network_attachments.is_empty()) {
        errs.push("object.spec.network_attachments", "cannot be changed: a VM keeps the NICs it was created with");
    }
    let mut out = PatchVirtualMachine { id: non_empty(ci.id), ..PatchVirtualMachine::default() };
    out.metadata = changed_metadata(ci.metadata, mask);
    let p = &mut out.spec;
    let template = spec.template.as_ref().and_then(|r| key(&r.id, &r.name));
    p.template = template.filter(|_| mask.wants("spec.template", true));
    let item = spec.catalog_item.as_ref().and_then(|r| key(&r.id, &r.name));
    p.catalog_item = item.filter(|_| mask.wants("spec.catalog_item", true));
    let auto = spec.auto_external_ip_attachment;
    p.auto_external_ip_attachment = mask.wants("spec.auto_external_ip_attachment", auto).then_some(auto);
    if mask.wants("spec.template_parameters", !spec.template_parameters.is_empty()) {
        p.template_parameters = Some(parameters(pool, spec.template_parameters, &mut errs));
    }
    p.state = spec.run_strategy.filter(|_| mask.wants("spec.run_strategy", true)).and_then(|r| power(&r, &mut errs));
    p.user_data = spec.user_data.filter(|_| mask.wants("spec.user_data", true));
    p.ssh_public_key = spec.ssh_public_key.filter(|_| mask.wants("spec.ssh_public_key", true));
    let disk_image = spec.disk_image.as_ref().and_then(|r| key(&r.id, &r.name));
    p.image = disk_image.filter(|_| mask.wants("spec.disk_image", true)).map(image);
    let shape = spec.instance_type.as_ref().and_then(|r| key(&r.id, &r.name));
    p.instance_type = shape.filter(|_| mask.wants("spec.instance_type", true)).map(instance_type);
    let boot = spec.boot_disk.filter(|_| mask.wants("spec.boot_disk", true));
    p.boot_disk = boot.and_then(|d| disk(d, "object.spec.boot_disk", &mut errs));
    if mask.wants("spec.additional_disks", !spec.additional_disks.is_empty()) {
        p.additional_disks = Some(additional_disks(spec.additional_disks, &mut errs));
    }
    let restart = spec.restart_requested_at.is_some() && mask.wants("spec.restart_requested_at", true);
    errs.into_result(Asked { vm: out, restart })
}

/// `vm` as a compute instance, its references named as `names` says.
pub fn to_pb(pool: &DescriptorPool, vm: VirtualMachine, names: &Names) -> pb::ComputeInstance {
    let s = vm.spec;
    let stopping = s.state == PowerState::Stopped;
    let named = |kind, key: &str| reference::named(names, kind, key);
    let nics = s.network_attachments.into_iter().map(|nic| {
        let (id, name) = named(Referred::Subnet, &nic.subnet);
        let groups = nic.security_groups.iter().map(|g| named(Referred::SecurityGroup, g));
        pb::NetworkAttachment {
            subnet: Some(pb::SubnetLocalReference { id, name }),
            security_groups: groups.map(|(id, name)| pb::SecurityGroupLocalReference { id, name }).collect(),
            ip_address: nic.ip_address,
        }
    });
    let disk_image =
        s.image.map(|i| named(Referred::Image, &i.source_ref)).map(|(id, name)| pb::DiskImageReference { id, name, ..Default::default() });
    pb::ComputeInstance {
        id: vm.id,
        metadata: Some(metadata(vm.metadata)),
        spec: Some(pb::ComputeInstanceSpec {
            template: Some(pb::ComputeInstanceTemplateReference { id: s.template.clone(), name: s.template, ..Default::default() }),
            template_parameters: s.template_parameters.iter().map(|(k, v)| (k.clone(), from_parameter(pool, v))).collect(),
            ssh_public_key: s.ssh_public_key,
            run_strategy: Some(if stopping { "Halted" } else { "Always" }.to_owned()),
            user_data: s.user_data,
            network_attachments: nics.collect(),
            instance_type: s.instance_type.map(|t| pb::InstanceTypeReference { id: t.id, name: t.name, ..Default::default() }),
            disk_image,
            boot_disk: s.boot_disk.map(disk_pb),
            additional_disks: s.additional_disks.into_iter().map(disk_pb).collect(),
            catalog_item: s.catalog_item.map(|id| pb::ComputeInstanceCatalogItemReference { id, ..Default::default() }),
            auto_external_ip_attachment: s.auto_external_ip_attachment,
            ..Default::default()
        }),
        status: Some(status(vm.status, stopping)),
    }
}

fn status(st: VirtualMachineStatus, stopping: bool) -> pb::ComputeInstanceStatus {
    let state = match st.state {
        // A migrating guest keeps running.
        VmState::Ready | VmState::Migrating => pb::ComputeInstanceState::Running,
        VmState::Paused => pb::ComputeInstanceState::Paused,
        VmState::Stopped => pb::ComputeInstanceState::Stopped,
        VmState::Failed => pb::ComputeInstanceState::Failed,
        VmState::Deleting => pb::ComputeInstanceState::Deleting,
        VmState::Progressing if stopping => pb::ComputeInstanceState::Stopping,
        VmState::Progressing => pb::ComputeInstanceState::Starting,
    };
    pb::ComputeInstanceStatus {
        state: state.into(),
        conditions: st.conditions.into_iter().filter_map(condition).collect(),
        internal_ip_address: st.internal_ip.unwrap_or_default(),
        external_ip_address: st.external_ip.unwrap_or_default(),
        ..Default::default()
    }
}

/// The view's condition of a VM condition, if it has one (the VM's
/// progressing, failed and degraded conditions are in the state).
fn condition(c: Condition) -> Option<pb::ComputeInstanceCondition> {
    let kind = match c.kind {
        ConditionType::Ready => pb::ComputeInstanceConditionType::Ready,
        ConditionType::RestartRequired => pb::ComputeInstanceConditionType::RestartRequired,
        _ => return None,
    };
    let status = pb::ConditionStatus::from_str_name(&format!("CONDITION_STATUS_{}", c.status.short())).unwrap_or_default();
    Some(pb::ComputeInstanceCondition {
        r#type: kind.into(),
        status: status.into(),
        last_transition_time: c.last_transition_time.map(time::to_pb),
        reason: c.reason,
        message: Some(c.message),
    })
}

/// The power state a `run_strategy` asks for (`""`: none).
fn power(strategy: &str, errs: &mut ValidationErrors) -> Option<PowerState> {
    match strategy {
        "" => None,
        "Always" | "RerunOnFailure" => Some(PowerState::Started),
        "Halted" => Some(PowerState::Stopped),
        other => {
            errs.push("object.spec.run_strategy", format!("must be Always or Halted, got \"{other}\""));
            None
        }
    }
}

fn image(source_ref: String) -> VmImage {
    VmImage { source_type: String::new(), source_ref }
}

fn instance_type(key: String) -> InstanceTypeReference {
    InstanceTypeReference { id: String::new(), name: key }
}

fn attachment(a: pb::NetworkAttachment) -> NetworkAttachment {
    let subnet = a.subnet.as_ref().and_then(|r| key(&r.id, &r.name)).unwrap_or_default();
    let security_groups = a.security_groups.iter().map(|g| key(&g.id, &g.name).unwrap_or_default()).collect();
    NetworkAttachment { subnet, security_groups, ip_address: a.ip_address }
}

/// A disk as the model holds it; none for an empty one (size 0, no tier),
/// a negative size is named under `field`.
fn disk(d: pb::ComputeInstanceDisk, field: &str, errs: &mut ValidationErrors) -> Option<VmDisk> {
    if d.size_gib == 0 && d.storage_tier.is_none() {
        return None;
    }
    match u32::try_from(d.size_gib) {
        Ok(size_gib) => Some(VmDisk { size_gib, storage_tier: d.storage_tier.filter(|t| !t.is_empty()) }),
        Err(_) => {
            errs.push(format!("{field}.size_gib"), format!("must be a positive number of GiB, got {}", d.size_gib));
            None
        }
    }
}

/// The additional disks, each named by its index when refused.
fn additional_disks(disks: Vec<pb::ComputeInstanceDisk>, errs: &mut ValidationErrors) -> Vec<VmDisk> {
    let each = disks.into_iter().enumerate();
    each.map(|(i, d)| disk(d, &format!("object.spec.additional_disks[{i}]"), errs).unwrap_or(VmDisk { size_gib: 0, storage_tier: None }))
        .collect()
}

fn disk_pb(d: VmDisk) -> pb::ComputeInstanceDisk {
    pb::ComputeInstanceDisk { size_gib: i32::try_from(d.size_gib).unwrap_or(i32::MAX), storage_tier: d.storage_tier }
}
