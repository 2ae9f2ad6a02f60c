//! `osac.public.v1.ComputeInstanceTemplates`, typed: OSAC's view of the
//! same templates (`vmaas_model::template::view` says how it differs: a
//! name that is the id, typed references to the disk image and instance
//! type, the boot disk's size in GiB), read from and written to its
//! messages field by field; each call one call into
//! [`crate::app::templates`].

use prost_reflect::DescriptorPool;
use serde_json::{Map, Value};
use tonic::{Request, Response, Status};
use vmaas_model::spec::SpecDefaults;
use vmaas_model::{ValidationErrors, VirtualMachineTemplate};

use super::Reply;
use super::mask::Mask;
use super::meta::key;
use super::template_parts::{metadata_of, parameters, parameters_pb, quantity};
use super::{Ctx, count, time};
use crate::app::templates;
use crate::error::ApiError;
use crate::grpc::pb::osac::public::v1 as pb;

/// Bytes in a GiB.
const GIB: u64 = 1 << 30;

/// The service.
pub struct ComputeInstanceTemplates(pub Ctx);

impl ComputeInstanceTemplates {
    /// A request's template, or INVALID_ARGUMENT naming what is wrong.
    fn asked(&self, t: pb::ComputeInstanceTemplate) -> Result<VirtualMachineTemplate, Status> {
        let mut errs = ValidationErrors::default();
        let t = from_pb(&self.0.pool, t, &mut errs);
        errs.into_result(t).map_err(|e| self.0.status(ApiError::invalid(e)))
    }
}

#[tonic::async_trait]
impl pb::compute_instance_templates_server::ComputeInstanceTemplates for ComputeInstanceTemplates {
    async fn list(&self, req: Request<pb::ComputeInstanceTemplatesListRequest>) -> Reply<pb::ComputeInstanceTemplatesListResponse> {
        self.0.caller(&req).await?;
        let q = req.into_inner();
        let lr = self.0.list_request(q.offset, q.limit, q.filter, q.order)?;
        let view = vmaas_model::template::view::to_compute_instance_template;
        let (listed, page) = templates::list_viewed(&self.0.state, lr, view).await.map_err(|e| self.0.status(e))?;
        let items: Vec<_> = page.into_iter().map(|t| to_pb(&self.0.pool, t)).collect();
        Ok(Response::new(pb::ComputeInstanceTemplatesListResponse { size: count(items.len() as u64), total: count(listed.total), items }))
    }

    async fn get(&self, req: Request<pb::ComputeInstanceTemplatesGetRequest>) -> Reply<pb::ComputeInstanceTemplatesGetResponse> {
        self.0.caller(&req).await?;
        let t = templates::read(&self.0.state, &req.get_ref().id).await.map_err(|e| self.0.status(e))?;
        Ok(Response::new(pb::ComputeInstanceTemplatesGetResponse { object: Some(to_pb(&self.0.pool, t)) }))
    }

    async fn create(&self, req: Request<pb::ComputeInstanceTemplatesCreateRequest>) -> Reply<pb::ComputeInstanceTemplatesCreateResponse> {
        let caller = self.0.caller(&req).await?;
        let asked = self.asked(self.0.required(req.into_inner().object)?)?;
        let made = templates::create(&self.0.state, &caller, &asked).await.map_err(|e| self.0.status(e))?;
        Ok(Response::new(pb::ComputeInstanceTemplatesCreateResponse { object: Some(to_pb(&self.0.pool, made)), warnings: vec![] }))
    }

    async fn update(&self, req: Request<pb::ComputeInstanceTemplatesUpdateRequest>) -> Reply<pb::ComputeInstanceTemplatesUpdateResponse> {
        let caller = self.0.caller(&req).await?;
        let q = req.into_inner();
        let object = self.0.required(q.object)?;
        let id = object.id.clone();
        let mask = self.0.update_mask(&id, "osac.public.v1.ComputeInstanceTemplate", q.update_mask)?;
        let fields = match serde_json::to_value(self.asked(object)?) {
            Ok(Value::Object(fields)) => fields,
            _ => Map::new(),
        };
        let paths = model_paths(&mask);
        let changed = templates::patch(&self.0.state, &caller, &id, &fields, paths.as_deref()).await.map_err(|e| self.0.status(e))?;
        Ok(Response::new(pb::ComputeInstanceTemplatesUpdateResponse { object: Some(to_pb(&self.0.pool, changed)), warnings: vec![] }))
    }

    async fn delete(&self, req: Request<pb::ComputeInstanceTemplatesDeleteRequest>) -> Reply<pb::ComputeInstanceTemplatesDeleteResponse> {
        let caller = self.0.caller(&req).await?;
        templates::remove(&self.0.state, &caller, &req.get_ref().id).await.map_err(|e| self.0.status(e))?;
        Ok(Response::new(pb::ComputeInstanceTemplatesDeleteResponse {}))
    }
}

/// The view's fields an update's mask names, as the template's paths
/// (`spec_defaults.boot_disk` is `spec_defaults.disk_size`,
/// `spec_defaults.disk_image` is `spec_defaults.image`); without a mask,
/// none: the fields sent change.
fn model_paths(mask: &Mask) -> Option<String> {
    let view = mask.joined()?;
    let mut paths: Vec<String> = Vec::new();
    for path in view.split(',') {
        let model = match path {
            p if p.starts_with("spec_defaults.boot_disk") => "spec_defaults.disk_size".to_owned(),
            p if p.starts_with("spec_defaults.disk_image") => "spec_defaults.image".to_owned(),
            p if p.starts_with("spec_defaults.instance_type") => "spec_defaults.instance_type".to_owned(),
            "spec_defaults.run_strategy" => continue,
            p if p == "metadata" || p.starts_with("metadata.") || p == "id" => continue,
            p => p.to_owned(),
        };
        if !paths.contains(&model) {
            paths.push(model);
        }
    }
    Some(paths.join(","))
}

/// A request's template: what the view's message says, each problem named
/// under `object.`.
fn from_pb(pool: &DescriptorPool, t: pb::ComputeInstanceTemplate, errs: &mut ValidationErrors) -> VirtualMachineTemplate {
    let mut id = t.id;
    let metadata = t.metadata.map(|m| {
        match (m.name.as_str(), id.as_str()) {
            ("", _) => {}
            (name, "") => id = name.to_owned(),
            (name, id) if name != id => {
                errs.push("object.metadata.name", format!("must equal the id ({id:?}): a template is named by its id"));
            }
            _ => {}
        }
        metadata_of(m.version, String::new())
    });
    VirtualMachineTemplate {
        type_url: None,
        id,
        title: t.title,
        description: t.description,
        parameters: parameters(pool, t.parameters, errs),
        spec_defaults: t.spec_defaults.map(|d| defaults(d, errs)).unwrap_or_default(),
        metadata: metadata.filter(|m| m.version.is_some()),
    }
}

fn defaults(d: pb::ComputeInstanceTemplateSpecDefaults, errs: &mut ValidationErrors) -> SpecDefaults {
    let disk_size = d.boot_disk.and_then(|disk| match u64::try_from(disk.size_gib) {
        Ok(n) if n > 0 => quantity(Some(format!("{n}Gi")), "boot_disk.size_gib", errs),
        _ => {
            errs.push("object.spec_defaults.boot_disk.size_gib", "must be a positive number of GiB");
            None
        }
    });
    match d.run_strategy.as_deref() {
        None | Some("" | "Always") => {}
        Some(other) => errs.push("object.spec_defaults.run_strategy", format!("is not supported ({other:?}): VMs start running")),
    }
    SpecDefaults {
        cpu_cores: d.cpu_cores,
        memory: quantity(d.memory, "memory", errs),
        disk_size,
        image: d.disk_image.and_then(|r| key(&r.id, &r.name)),
        instance_type: d.instance_type.and_then(|r| key(&r.id, &r.name)),
        ..SpecDefaults::default()
    }
}

/// A template in OSAC's view (the machine defaults it has fields for).
fn to_pb(pool: &DescriptorPool, t: VirtualMachineTemplate) -> pb::ComputeInstanceTemplate {
    let d = t.spec_defaults;
    let size_gib = d.disk_size.as_ref().and_then(|q| q.to_units_ceil()).map(|bytes| i32::try_from(bytes.div_ceil(GIB)).unwrap_or(i32::MAX));
    let m = t.metadata;
    pb::ComputeInstanceTemplate {
        metadata: Some(pb::Metadata {
            creation_timestamp: m.as_ref().and_then(|m| m.creation_timestamp).map(time::to_pb),
            name: t.id.clone(),
            version: m.as_ref().and_then(|m| m.version).map_or(0, |v| i32::try_from(v).unwrap_or(i32::MAX)),
            ..Default::default()
        }),
        id: t.id,
        title: t.title,
        description: t.description,
        parameters: parameters_pb(pool, t.parameters),
        spec_defaults: Some(pb::ComputeInstanceTemplateSpecDefaults {
            boot_disk: size_gib.map(|size_gib| pb::ComputeInstanceDisk { size_gib, storage_tier: None }),
            run_strategy: None,
            instance_type: d.instance_type.map(|shape| pb::InstanceTypeReference { name: shape, ..Default::default() }),
            disk_image: d.image.map(|image| pb::DiskImageReference { id: image.clone(), name: image, ..Default::default() }),
            cpu_cores: d.cpu_cores,
            memory: d.memory.map(|q| q.as_str().to_owned()),
        }),
    }
}
