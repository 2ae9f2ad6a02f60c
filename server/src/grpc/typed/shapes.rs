//! `osac.public.v1.InstanceTypes` and `vmaas.v1.ComputeInstanceSnapshots`,
//! typed: each a [`Served`] kind served by [`served!`].

use prost_reflect::DescriptorPool;
use vmaas_model::instance_type::{GpuSpec, InstanceTypeDeprecation, InstanceTypePatchSpec, PatchInstanceType};
use vmaas_model::snapshot::{SnapshotConsistency, SnapshotDisk};
use vmaas_model::{
    ComputeInstanceSnapshot, ComputeInstanceSnapshotSpec, CreateObject, InstanceType, InstanceTypeReference, InstanceTypeSpec,
    InstanceTypeState, ValidationErrors,
};

use tonic::{Request, Response};
use vmaas_model::snapshot::RestoreRequest;

use super::Reply;
use super::any::from_parameter;
use super::kinds::{Served, relabel, served};
use super::mask::Mask;
use super::meta::{changed_metadata, metadata, model_enum, signed, unsigned, wire_enum};
use super::networking::create;
use super::{non_empty, time};
use crate::app::simple::Relabel;
use crate::app::vms;
use crate::grpc::pb::osac::public::v1 as pb;
use crate::grpc::pb::vmaas::v1 as vpb;

impl Served for InstanceType {
    type Pb = pb::InstanceType;
    const MESSAGE: &'static str = "osac.public.v1.InstanceType";

    fn to_pb(_: &DescriptorPool, t: Self) -> pb::InstanceType {
        let s = t.spec;
        pb::InstanceType {
            id: t.id,
            metadata: Some(metadata(t.metadata)),
            spec: Some(pb::InstanceTypeSpec {
                cores: signed(s.cores),
                memory_gib: signed(s.memory_gib),
                description: s.description,
                state: state_pb(s.state),
                deprecation: s.deprecation.map(|d| pb::InstanceTypeDeprecation {
                    state: state_pb(d.state),
                    replacement: d.replacement.map(|r| pb::InstanceTypeLocalReference { id: r.id, name: r.name }),
                    deprecation_timestamp: d.deprecation_timestamp.map(time::to_pb),
                    obsolescence_timestamp: d.obsolescence_timestamp.map(time::to_pb),
                }),
                gpu: s.gpu.map(|g| pb::GpuSpec {
                    pci_device_selector: g.pci_device_selector,
                    resource_name: g.resource_name,
                    count: signed(g.count),
                }),
            }),
            status: Some(pb::InstanceTypeStatus {}),
        }
    }

    fn id(t: &pb::InstanceType) -> &str {
        &t.id
    }

    fn create_request(t: pb::InstanceType) -> Result<CreateObject<InstanceTypeSpec>, ValidationErrors> {
        let mut errs = ValidationErrors::default();
        let s = t.spec.unwrap_or_default();
        let spec = InstanceTypeSpec {
            cores: unsigned(s.cores, "object.spec.cores", &mut errs),
            memory_gib: unsigned(s.memory_gib, "object.spec.memory_gib", &mut errs),
            description: s.description,
            state: state(s.state, "object.spec.state", &mut errs).unwrap_or_default(),
            deprecation: s.deprecation.map(|d| deprecation(d, &mut errs)),
            gpu: s.gpu.map(|g| gpu(g, &mut errs)),
        };
        errs.into_result(create(t.id, t.metadata, spec))
    }

    fn patch_request(t: pb::InstanceType, mask: &Mask) -> Result<PatchInstanceType, ValidationErrors> {
        let mut errs = ValidationErrors::default();
        let s = t.spec.unwrap_or_default();
        let spec = InstanceTypePatchSpec {
            cores: mask.wants("spec.cores", s.cores != 0).then(|| unsigned(s.cores, "object.spec.cores", &mut errs)),
            memory_gib: mask
                .wants("spec.memory_gib", s.memory_gib != 0)
                .then(|| unsigned(s.memory_gib, "object.spec.memory_gib", &mut errs)),
            gpu: s.gpu.filter(|_| mask.touches("spec.gpu", true)).map(|g| gpu(g, &mut errs)),
            description: Some(s.description).filter(|d| mask.wants("spec.description", !d.is_empty())),
            state: if mask.wants("spec.state", s.state != 0) { state(s.state, "object.spec.state", &mut errs) } else { None },
            deprecation: s
                .deprecation
                .map(|d| masked(d, mask))
                .filter(|_| mask.touches("spec.deprecation", true))
                .map(|d| deprecation(d, &mut errs)),
        };
        let out = PatchInstanceType { id: non_empty(t.id), metadata: changed_metadata(t.metadata, mask), spec, ..Default::default() };
        errs.into_result(out)
    }
}

fn state_pb(s: InstanceTypeState) -> i32 {
    wire_enum(s.as_str(), pb::InstanceTypeState::from_str_name)
}

/// The state a message names; none when unspecified, an unknown one named under `field`.
fn state(n: i32, field: &str, errs: &mut ValidationErrors) -> Option<InstanceTypeState> {
    let name = pb::InstanceTypeState::try_from(n).unwrap_or_default().as_str_name();
    if n == 0 {
        return None;
    }
    let found = model_enum(name, InstanceTypeState::ALL, InstanceTypeState::NAMES);
    if found.is_none() {
        errs.push(field, format!("must be one of {}, got {n}", InstanceTypeState::NAMES.join(", ")));
    }
    found
}

/// The fields of a deprecation `mask` wants.
fn masked(d: pb::InstanceTypeDeprecation, mask: &Mask) -> pb::InstanceTypeDeprecation {
    let wants = |field: &str, set: bool| mask.touches(&format!("spec.deprecation.{field}"), set);
    pb::InstanceTypeDeprecation {
        state: if wants("state", d.state != 0) { d.state } else { 0 },
        replacement: d.replacement.filter(|_| wants("replacement", true)),
        deprecation_timestamp: d.deprecation_timestamp.filter(|_| wants("deprecation_timestamp", true)),
        obsolescence_timestamp: d.obsolescence_timestamp.filter(|_| wants("obsolescence_timestamp", true)),
    }
}

fn deprecation(d: pb::InstanceTypeDeprecation, errs: &mut ValidationErrors) -> InstanceTypeDeprecation {
    let mut at = |ts: Option<prost_types::Timestamp>, field: &str| {
        let t = ts.as_ref().map(time::from_pb)?;
        if t.is_none() {
            errs.push(format!("object.spec.deprecation.{field}"), "is not a time that can be held");
        }
        t
    };
    let deprecation_timestamp = at(d.deprecation_timestamp, "deprecation_timestamp");
    let obsolescence_timestamp = at(d.obsolescence_timestamp, "obsolescence_timestamp");
    InstanceTypeDeprecation {
        state: state(d.state, "object.spec.deprecation.state", errs).unwrap_or_default(),
        replacement: d.replacement.map(|r| InstanceTypeReference { id: r.id, name: r.name }),
        deprecation_timestamp,
        obsolescence_timestamp,
    }
}

fn gpu(g: pb::GpuSpec, errs: &mut ValidationErrors) -> GpuSpec {
    GpuSpec {
        pci_device_selector: g.pci_device_selector,
        resource_name: g.resource_name,
        count: unsigned(g.count, "object.spec.gpu.count", errs),
    }
}

impl Served for ComputeInstanceSnapshot {
    type Pb = vpb::ComputeInstanceSnapshot;
    const MESSAGE: &'static str = "vmaas.v1.ComputeInstanceSnapshot";

    fn to_pb(pool: &DescriptorPool, snap: Self) -> vpb::ComputeInstanceSnapshot {
        let st = snap.status;
        let consistency = |c: SnapshotConsistency| wire_enum(c.as_str(), vpb::SnapshotConsistency::from_str_name);
        vpb::ComputeInstanceSnapshot {
            id: snap.id,
            metadata: Some(metadata(snap.metadata)),
            spec: Some(vpb::ComputeInstanceSnapshotSpec { compute_instance: snap.spec.compute_instance }),
            status: Some(vpb::ComputeInstanceSnapshotStatus {
                state: wire_enum(st.state.as_str(), vpb::ComputeInstanceSnapshotState::from_str_name),
                online: st.online,
                consistency: st.consistency.map(consistency),
                size_bytes: st.size_bytes,
                disks: st.disks.into_iter().map(|d: SnapshotDisk| vpb::SnapshotDisk { name: d.name, size_bytes: d.size_bytes }).collect(),
                taken_at: st.taken_at.map(time::to_pb),
                template: st.template,
                template_parameters: st.template_parameters.iter().map(|(k, v)| (k.clone(), from_parameter(pool, v))).collect(),
                message: st.message,
            }),
        }
    }

    fn id(snap: &vpb::ComputeInstanceSnapshot) -> &str {
        &snap.id
    }

    fn create_request(snap: vpb::ComputeInstanceSnapshot) -> Result<CreateObject<ComputeInstanceSnapshotSpec>, ValidationErrors> {
        Ok(create(snap.id, snap.metadata, spec_of_snapshot(snap.spec.unwrap_or_default())))
    }

    fn patch_request(snap: vpb::ComputeInstanceSnapshot, mask: &Mask) -> Result<Relabel, ValidationErrors> {
        relabel(snap.id, snap.metadata, &spec_of_snapshot(snap.spec.unwrap_or_default()), mask)
    }
}

fn spec_of_snapshot(s: vpb::ComputeInstanceSnapshotSpec) -> ComputeInstanceSnapshotSpec {
    ComputeInstanceSnapshotSpec { compute_instance: s.compute_instance }
}

served! {
    /// `osac.public.v1.InstanceTypes`.
    InstanceTypes: InstanceType, pb::instance_types_server::InstanceTypes, pb {
        InstanceTypesListRequest, InstanceTypesListResponse, InstanceTypesGetRequest, InstanceTypesGetResponse,
        InstanceTypesCreateRequest, InstanceTypesCreateResponse, InstanceTypesUpdateRequest, InstanceTypesUpdateResponse,
        InstanceTypesDeleteRequest, InstanceTypesDeleteResponse,
    }
}

/// `vmaas.v1.ComputeInstanceSnapshots`: a kind of the shared operations
/// without an update, plus `Restore`.
pub struct ComputeInstanceSnapshots(pub super::Ctx);

#[tonic::async_trait]
impl vpb::compute_instance_snapshots_server::ComputeInstanceSnapshots for ComputeInstanceSnapshots {
    async fn list(&self, req: Request<vpb::ComputeInstanceSnapshotsListRequest>) -> Reply<vpb::ComputeInstanceSnapshotsListResponse> {
        let caller = self.0.caller(&req).await?;
        let q = req.into_inner();
        let page = self.0.list_kind::<ComputeInstanceSnapshot>(&caller, q.offset, q.limit, q.filter, q.order).await?;
        Ok(Response::new(vpb::ComputeInstanceSnapshotsListResponse { size: page.size, total: page.total, items: page.items }))
    }

    async fn get(&self, req: Request<vpb::ComputeInstanceSnapshotsGetRequest>) -> Reply<vpb::ComputeInstanceSnapshotsGetResponse> {
        let caller = self.0.caller(&req).await?;
        let object = self.0.get_kind::<ComputeInstanceSnapshot>(&caller, &req.get_ref().id).await?;
        Ok(Response::new(vpb::ComputeInstanceSnapshotsGetResponse { object: Some(object) }))
    }

    async fn create(&self, req: Request<vpb::ComputeInstanceSnapshotsCreateRequest>) -> Reply<vpb::ComputeInstanceSnapshotsCreateResponse> {
        let caller = self.0.caller(&req).await?;
        let object = self.0.create_kind::<ComputeInstanceSnapshot>(&caller, req.into_inner().object).await?;
        Ok(Response::new(vpb::ComputeInstanceSnapshotsCreateResponse { object: Some(object) }))
    }

    async fn delete(&self, req: Request<vpb::ComputeInstanceSnapshotsDeleteRequest>) -> Reply<vpb::ComputeInstanceSnapshotsDeleteResponse> {
        let caller = self.0.caller(&req).await?;
        self.0.delete_kind::<ComputeInstanceSnapshot>(&caller, &req.get_ref().id).await?;
        Ok(Response::new(vpb::ComputeInstanceSnapshotsDeleteResponse {}))
    }

    async fn restore(
        &self,
        req: Request<vpb::ComputeInstanceSnapshotsRestoreRequest>,
    ) -> Reply<vpb::ComputeInstanceSnapshotsRestoreResponse> {
        let caller = self.0.caller(&req).await?;
        let q = req.into_inner();
        let asked = RestoreRequest { snapshot: q.snapshot, stop: q.stop };
        vms::restore(&self.0.state, &caller, &q.compute_instance, asked).await.map_err(|e| self.0.status(e))?;
        Ok(Response::new(vpb::ComputeInstanceSnapshotsRestoreResponse {}))
    }
}
