//! `fulfillment.v1.VirtualMachineTemplates`, typed: a template read from
//! its message field by field (the machine defaults the message has; the
//! rest of a template is the REST API's), each call one call into
//! [`crate::app::templates`].

use std::sync::Arc;

use prost_reflect::DescriptorPool;
use serde_json::Value;
use tonic::{Request, Response, Status};
use vmaas_model::spec::{ExposedPort, Protocol, SpecDefaults};
use vmaas_model::{ValidationErrors, VirtualMachineTemplate};

use super::Reply;
use super::template_parts::{metadata_of, parameters, parameters_pb, quantity, word};
use super::{Ctx, count, time};
use crate::app::templates;
use crate::error::ApiError;
use crate::grpc::pb::fulfillment::v1 as pb;

/// The service.
pub struct VirtualMachineTemplates(pub Ctx);

impl VirtualMachineTemplates {
    /// A template as the list gives it (its JSON), as the message.
    fn listed(&self, json: &Arc<str>) -> Result<pb::VirtualMachineTemplate, Status> {
        Ok(to_pb(&self.0.pool, self.0.parsed(json)?))
    }

    /// A request's template, or INVALID_ARGUMENT naming what is wrong.
    fn asked(&self, t: pb::VirtualMachineTemplate) -> Result<VirtualMachineTemplate, Status> {
        let mut errs = ValidationErrors::default();
        let t = from_pb(&self.0.pool, t, &mut errs);
        errs.into_result(t).map_err(|e| self.0.status(ApiError::invalid(e)))
    }
}

#[tonic::async_trait]
impl pb::virtual_machine_templates_server::VirtualMachineTemplates for VirtualMachineTemplates {
    async fn list(&self, req: Request<pb::VirtualMachineTemplatesListRequest>) -> Reply<pb::VirtualMachineTemplatesListResponse> {
        self.0.caller(&req).await?;
        let q = req.into_inner();
        let lr = self.0.list_request(q.offset, q.limit, q.filter, q.order)?;
        let listed = templates::list(&self.0.state, lr, |t| t).await.map_err(|e| self.0.status(e))?;
        let items = listed.items.iter().map(|j| self.listed(j)).collect::<Result<Vec<_>, _>>()?;
        Ok(Response::new(pb::VirtualMachineTemplatesListResponse {
            size: Some(count(items.len() as u64)),
            total: Some(count(listed.total)),
            items,
        }))
    }

    async fn get(&self, req: Request<pb::VirtualMachineTemplatesGetRequest>) -> Reply<pb::VirtualMachineTemplatesGetResponse> {
        self.0.caller(&req).await?;
        let t = templates::read(&self.0.state, &req.get_ref().id).await.map_err(|e| self.0.status(e))?;
        Ok(Response::new(pb::VirtualMachineTemplatesGetResponse { object: Some(to_pb(&self.0.pool, t)) }))
    }

    async fn create(&self, req: Request<pb::VirtualMachineTemplatesCreateRequest>) -> Reply<pb::VirtualMachineTemplatesCreateResponse> {
        let caller = self.0.caller(&req).await?;
        let asked = self.asked(self.0.required(req.into_inner().object)?)?;
        let made = templates::create(&self.0.state, &caller, &asked).await.map_err(|e| self.0.status(e))?;
        Ok(Response::new(pb::VirtualMachineTemplatesCreateResponse { object: Some(to_pb(&self.0.pool, made)) }))
    }

    async fn update(&self, req: Request<pb::VirtualMachineTemplatesUpdateRequest>) -> Reply<pb::VirtualMachineTemplatesUpdateResponse> {
        let caller = self.0.caller(&req).await?;
        let q = req.into_inner();
        let object = self.0.required(q.object)?;
        let id = object.id.clone();
        let mask = self.0.update_mask(&id, "fulfillment.v1.VirtualMachineTemplate", q.update_mask)?;
        // The application lays the fields sent (those the mask names) over
        // the template as it is.
        let fields = match serde_json::to_value(self.asked(object)?) {
            Ok(Value::Object(fields)) => fields,
            _ => serde_json::Map::new(),
        };
        let changed =
            templates::patch(&self.0.state, &caller, &id, &fields, mask.joined().as_deref()).await.map_err(|e| self.0.status(e))?;
        Ok(Response::new(pb::VirtualMachineTemplatesUpdateResponse { object: Some(to_pb(&self.0.pool, changed)) }))
    }

    async fn delete(&self, req: Request<pb::VirtualMachineTemplatesDeleteRequest>) -> Reply<pb::VirtualMachineTemplatesDeleteResponse> {
        let caller = self.0.caller(&req).await?;
        templates::remove(&self.0.state, &caller, &req.get_ref().id).await.map_err(|e| self.0.status(e))?;
        Ok(Response::new(pb::VirtualMachineTemplatesDeleteResponse {}))
    }
}

/// A request's template: what the message says, each problem named under `object.`.
fn from_pb(pool: &DescriptorPool, t: pb::VirtualMachineTemplate, errs: &mut ValidationErrors) -> VirtualMachineTemplate {
    VirtualMachineTemplate {
        type_url: None,
        id: t.id,
        title: t.title,
        description: t.description,
        parameters: parameters(pool, t.parameters, errs),
        spec_defaults: t.spec_defaults.map(|d| defaults(d, errs)).unwrap_or_default(),
        metadata: t.metadata.map(|m| metadata_of(m.version, m.name)),
    }
}

fn defaults(d: pb::VirtualMachineTemplateSpecDefaults, errs: &mut ValidationErrors) -> SpecDefaults {
    let memory = quantity(d.memory, "memory", errs);
    let disk_size = quantity(d.disk_size, "disk_size", errs);
    let ports = d.exposed_ports.into_iter().enumerate().filter_map(|(i, p)| {
        let at = format!("object.spec_defaults.exposed_ports[{i}]");
        let port =
            u16::try_from(p.port).map_err(|_| errs.push(format!("{at}.port"), format!("must be at most 65535, got {}", p.port))).ok()?;
        let protocol =
            if p.protocol.is_empty() { Protocol::default() } else { word::<Protocol>(&p.protocol, &format!("{at}.protocol"), errs)? };
        Some(ExposedPort { port, protocol, name: p.name })
    });
    SpecDefaults {
        cpu_cores: d.cpu_cores,
        memory,
        disk_size,
        image: d.image,
        user_data: d.user_data,
        ssh_keys: d.ssh_keys,
        exposed_ports: ports.collect(),
        ..SpecDefaults::default()
    }
}

/// A template as the message has it (the machine defaults it has fields for).
fn to_pb(pool: &DescriptorPool, t: VirtualMachineTemplate) -> pb::VirtualMachineTemplate {
    let d = t.spec_defaults;
    pb::VirtualMachineTemplate {
        id: t.id,
        metadata: t.metadata.map(|m| pb::VirtualMachineTemplateMetadata {
            creation_timestamp: m.creation_timestamp.map(time::to_pb),
            name: String::new(),
            version: m.version.map_or(0, |v| i32::try_from(v).unwrap_or(i32::MAX)),
            update_timestamp: m.update_timestamp.map(time::to_pb),
        }),
        title: t.title,
        description: t.description,
        parameters: parameters_pb(pool, t.parameters),
        spec_defaults: Some(pb::VirtualMachineTemplateSpecDefaults {
            cpu_cores: d.cpu_cores,
            memory: d.memory.map(|q| q.as_str().to_owned()),
            disk_size: d.disk_size.map(|q| q.as_str().to_owned()),
            image: d.image,
            user_data: d.user_data,
            ssh_keys: d.ssh_keys,
            exposed_ports: d
                .exposed_ports
                .into_iter()
                .map(|p| pb::VirtualMachineTemplateExposedPort {
                    port: u32::from(p.port),
                    protocol: p.protocol.as_str().to_owned(),
                    name: p.name,
                })
                .collect(),
        }),
    }
}
