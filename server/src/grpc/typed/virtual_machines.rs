//! `fulfillment.v1.VirtualMachines`, typed: each call reads its request
//! into the model's ([`convert`]), calls [`crate::app::vms`], and writes
//! the VM it answers with as the message.

mod convert;

use std::sync::Arc;

use tonic::{Request, Response, Status};
use vmaas_model::VirtualMachine;

use super::{Ctx, count};
use crate::app::listing::States;
use crate::app::vms;
use crate::error::ApiError;
use crate::grpc::pb::fulfillment::v1 as pb;

pub use convert::parameters;

/// The service.
pub struct VirtualMachines(pub Ctx);

impl VirtualMachines {
    /// A VM as the store holds it (its JSON), as the message.
    fn stored(&self, json: &str) -> Result<pb::VirtualMachine, Status> {
        Ok(convert::to_pb(&self.0.pool, self.0.parsed::<VirtualMachine>(json)?))
    }
}

#[tonic::async_trait]
impl pb::virtual_machines_server::VirtualMachines for VirtualMachines {
    async fn list(&self, req: Request<pb::VirtualMachinesListRequest>) -> Result<Response<pb::VirtualMachinesListResponse>, Status> {
        let caller = self.0.caller(&req).await?;
        let q = req.into_inner();
        let lr = self.0.list_request(q.offset, q.limit, q.filter, q.order)?;
        let listed =
            vms::list(&self.0.state, &caller, lr, States::Stored, |items| async { Ok(items) }).await.map_err(|e| self.0.status(e))?;
        let items = listed.items.iter().map(|j: &Arc<str>| self.stored(j)).collect::<Result<Vec<_>, _>>()?;
        Ok(Response::new(pb::VirtualMachinesListResponse {
            size: Some(count(items.len() as u64)),
            total: Some(count(listed.total)),
            items,
        }))
    }

    async fn get(&self, req: Request<pb::VirtualMachinesGetRequest>) -> Result<Response<pb::VirtualMachinesGetResponse>, Status> {
        let caller = self.0.caller(&req).await?;
        let vm = vms::read(&self.0.state, &caller, &req.get_ref().id).await.map_err(|e| self.0.status(e))?;
        Ok(Response::new(pb::VirtualMachinesGetResponse { object: Some(convert::to_pb(&self.0.pool, Arc::unwrap_or_clone(vm))) }))
    }

    async fn create(&self, req: Request<pb::VirtualMachinesCreateRequest>) -> Result<Response<pb::VirtualMachinesCreateResponse>, Status> {
        let caller = self.0.caller(&req).await?;
        let object = self.0.required(req.into_inner().object)?;
        let asked = convert::create(&self.0.pool, object).map_err(|e| self.0.status(ApiError::invalid(e)))?;
        let made = vms::create(&self.0.state, &caller, asked).await.map_err(|e| self.0.status(e))?;
        Ok(Response::new(pb::VirtualMachinesCreateResponse { object: Some(convert::to_pb(&self.0.pool, made.to_api())) }))
    }

    async fn update(&self, req: Request<pb::VirtualMachinesUpdateRequest>) -> Result<Response<pb::VirtualMachinesUpdateResponse>, Status> {
        let caller = self.0.caller(&req).await?;
        let q = req.into_inner();
        let object = self.0.required(q.object)?;
        let id = object.id.clone();
        let mask = self.0.update_mask(&id, "fulfillment.v1.VirtualMachine", q.update_mask)?;
        let asked = convert::patch(&self.0.pool, object, &mask).map_err(|e| self.0.status(ApiError::invalid(e)))?;
        let changed = vms::patch(&self.0.state, &caller, &id, asked).await.map_err(|e| self.0.status(e))?;
        Ok(Response::new(pb::VirtualMachinesUpdateResponse { object: Some(convert::to_pb(&self.0.pool, changed.to_api())) }))
    }

    async fn delete(&self, req: Request<pb::VirtualMachinesDeleteRequest>) -> Result<Response<pb::VirtualMachinesDeleteResponse>, Status> {
        let caller = self.0.caller(&req).await?;
        vms::remove(&self.0.state, &caller, &req.get_ref().id, false).await.map_err(|e| self.0.status(e))?;
        Ok(Response::new(pb::VirtualMachinesDeleteResponse {}))
    }
}
