//! `fulfillment.v1.VirtualMachine` and the model's VM types: a create's or
//! an update's object read as [`CreateVirtualMachine`] or
//! [`PatchVirtualMachine`], and a [`VirtualMachine`] written as the message.

use std::collections::{BTreeMap, HashMap};

use prost_reflect::DescriptorPool;
use prost_types::Any;
use vmaas_model::vm::{Condition, NetworkAttachment, VirtualMachineStatus, VmImage};
use vmaas_model::{
    CreateVirtualMachine, Metadata, MetadataInput, ParameterValue, PatchVirtualMachine, PowerState, ValidationErrors, VirtualMachine,
    VirtualMachineSpec,
};

use super::super::any::{from_parameter, to_parameter};
use super::super::mask::Mask;
use super::super::{non_empty, time};
use crate::grpc::pb::fulfillment::v1 as pb;
use crate::grpc::pb::shared::v1 as shared;

/// A create's `object` as the model's create request.
pub fn create(pool: &DescriptorPool, vm: pb::VirtualMachine) -> Result<CreateVirtualMachine, ValidationErrors> {
    let mut errs = ValidationErrors::default();
    let spec = vm.spec.unwrap_or_default();
    let template_parameters = parameters(pool, spec.template_parameters, &mut errs);
    let state = power(&spec.state, &mut errs).unwrap_or_default();
    let out = CreateVirtualMachine {
        type_url: None,
        id: non_empty(vm.id),
        metadata: vm.metadata.map(metadata_input),
        spec: VirtualMachineSpec {
            template_parameters,
            state,
            network_attachments: spec.network_attachments.into_iter().map(attachment).collect(),
            user_data: spec.user_data,
            ssh_public_key: spec.ssh_public_key,
            image: spec.image.map(image),
            ..VirtualMachineSpec::new(spec.template)
        },
        status: None,
    };
    errs.into_result(out)
}

/// An update's `object` as the model's patch: the fields `mask` wants.
pub fn patch(pool: &DescriptorPool, vm: pb::VirtualMachine, mask: &Mask) -> Result<PatchVirtualMachine, ValidationErrors> {
    let mut errs = ValidationErrors::default();
    let spec = vm.spec.unwrap_or_default();
    if mask.wants("spec.network_attachments", !spec.network_attachments.is_empty()) {
        errs.push("object.spec.network_attachments", "cannot be changed: a VM keeps the NICs it was created with");
    }
    let mut out = PatchVirtualMachine { id: non_empty(vm.id), ..PatchVirtualMachine::default() };
    let meta = vm.metadata.unwrap_or_default();
    let name = mask.wants("metadata.name", !meta.name.is_empty()).then_some(meta.name);
    let version = (meta.version != 0).then_some(i64::from(meta.version));
    if name.is_some() || version.is_some() {
        out.metadata = Some(MetadataInput { name, version, ..MetadataInput::default() });
    }
    let p = &mut out.spec;
    p.template = mask.wants("spec.template", !spec.template.is_empty()).then_some(spec.template);
    if mask.wants("spec.template_parameters", !spec.template_parameters.is_empty()) {
        p.template_parameters = Some(parameters(pool, spec.template_parameters, &mut errs));
    }
    if mask.wants("spec.state", !spec.state.is_empty()) {
        p.state = power(&spec.state, &mut errs);
    }
    p.user_data = spec.user_data.filter(|_| mask.wants("spec.user_data", true));
    p.ssh_public_key = spec.ssh_public_key.filter(|_| mask.wants("spec.ssh_public_key", true));
    p.image = spec.image.filter(|_| mask.wants("spec.image", true)).map(image);
    errs.into_result(out)
}

/// `vm` as the message.
pub fn to_pb(pool: &DescriptorPool, vm: VirtualMachine) -> pb::VirtualMachine {
    let s = vm.spec;
    pb::VirtualMachine {
        id: vm.id,
        metadata: Some(metadata(vm.metadata)),
        spec: Some(pb::VirtualMachineSpec {
            template: s.template,
            template_parameters: s.template_parameters.iter().map(|(k, v)| (k.clone(), from_parameter(pool, v))).collect(),
            image: s.image.map(|i| pb::VirtualMachineImage { source_type: i.source_type, source_ref: i.source_ref }),
            ssh_public_key: s.ssh_public_key,
            user_data: s.user_data,
            network_attachments: s.network_attachments.into_iter().map(attachment_pb).collect(),
            state: s.state.as_str().to_owned(),
        }),
        status: Some(status(vm.status)),
    }
}

/// The metadata as `shared.v1` has it.
fn metadata(m: Metadata) -> shared::Metadata {
    shared::Metadata {
        creation_timestamp: Some(time::to_pb(m.creation_timestamp)),
        deletion_timestamp: m.deletion_timestamp.map(time::to_pb),
        creators: m.creators,
        name: m.name,
        tenants: m.tenants,
        version: i32::try_from(m.version).unwrap_or(i32::MAX),
    }
}

/// What a request's metadata may say: its name and version (the rest is the server's).
fn metadata_input(m: shared::Metadata) -> MetadataInput {
    MetadataInput { name: non_empty(m.name), version: (m.version != 0).then_some(i64::from(m.version)), ..MetadataInput::default() }
}

fn status(st: VirtualMachineStatus) -> pb::VirtualMachineStatus {
    pb::VirtualMachineStatus {
        state: pb::VirtualMachineState::from_str_name(st.state.as_str()).unwrap_or_default().into(),
        conditions: st.conditions.into_iter().map(condition).collect(),
        ip_address: st.internal_ip.unwrap_or_default(),
        external_ip: st.external_ip.unwrap_or_default(),
        internal_ips: st.internal_ips,
    }
}

fn condition(c: Condition) -> pb::VirtualMachineCondition {
    let kind = format!("VIRTUAL_MACHINE_CONDITION_TYPE_{}", c.kind.short());
    pb::VirtualMachineCondition {
        r#type: pb::VirtualMachineConditionType::from_str_name(&kind).unwrap_or_default().into(),
        status: condition_status(c.status),
        last_transition_time: c.last_transition_time.map(time::to_pb),
        reason: c.reason,
        message: Some(c.message),
    }
}

/// A condition's truth as `shared.v1` numbers it.
fn condition_status(s: vmaas_model::ConditionStatus) -> i32 {
    shared::ConditionStatus::from_str_name(&format!("CONDITION_STATUS_{}", s.short())).unwrap_or_default().into()
}

/// The parameters, each `Any` read; one that is no parameter value is an
/// error naming it.
pub fn parameters(pool: &DescriptorPool, map: HashMap<String, Any>, errs: &mut ValidationErrors) -> BTreeMap<String, ParameterValue> {
    let mut out = BTreeMap::new();
    for (k, any) in map {
        match to_parameter(pool, &any) {
            Ok(v) => _ = out.insert(k, v),
            Err(e) => errs.push(format!("object.spec.template_parameters[{k:?}]"), e.to_string()),
        }
    }
    out
}

/// The power state a request names (`""`: none).
fn power(state: &str, errs: &mut ValidationErrors) -> Option<PowerState> {
    if state.is_empty() {
        return None;
    }
    state.parse().map_err(|e: vmaas_model::vm::StateError| errs.push("object.spec.state", e.to_string())).ok()
}

fn image(i: pb::VirtualMachineImage) -> VmImage {
    VmImage { source_type: i.source_type, source_ref: i.source_ref }
}

fn attachment(a: pb::VirtualMachineNetworkAttachment) -> NetworkAttachment {
    NetworkAttachment { subnet: a.subnet, security_groups: a.security_groups, ip_address: a.ip_address }
}

fn attachment_pb(a: NetworkAttachment) -> pb::VirtualMachineNetworkAttachment {
    pb::VirtualMachineNetworkAttachment { subnet: a.subnet, security_groups: a.security_groups, ip_address: a.ip_address }
}
