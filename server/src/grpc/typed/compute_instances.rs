//! `osac.public.v1.ComputeInstances`, typed: OSAC's view of the same VMs
//! `VirtualMachines` serves. Each call reads its request into the model's
//! ([`convert`]), calls [`crate::app::vms`] (and
//! [`crate::app::compute_instances`] for what is the view's: its list's
//! filter, the names of references, errors in its field names), and writes
//! the VM as a compute instance.

mod convert;

use tonic::{Request, Response, Status};
use vmaas_model::VirtualMachine;

use super::{Ctx, count};
use crate::app::compute_instances::{image_by_name, in_view, list_vms, names, referred_by};
use crate::app::vms;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::grpc::pb::osac::public::v1 as pb;

/// The service.
pub struct ComputeInstances(pub Ctx);

impl ComputeInstances {
    /// `vm` as a compute instance, its references named as `caller` sees them.
    async fn answer(&self, caller: &Caller, vm: VirtualMachine) -> Result<pb::ComputeInstance, Status> {
        let names = names(&self.0.state, caller, referred_by(&vm.spec).collect()).await.map_err(|e| self.0.status(e))?;
        Ok(convert::to_pb(&self.0.pool, vm, &names))
    }

    /// A disk image named by its id, as a VM names it: by its name.
    async fn image_named(&self, caller: &Caller, image: Option<&mut vmaas_model::vm::VmImage>) -> Result<(), Status> {
        match image {
            Some(i) => image_by_name(&self.0.state, caller, &mut i.source_ref).await.map_err(|e| self.0.status(e)),
            None => Ok(()),
        }
    }
}

#[tonic::async_trait]
impl pb::compute_instances_server::ComputeInstances for ComputeInstances {
    async fn list(&self, req: Request<pb::ComputeInstancesListRequest>) -> Result<Response<pb::ComputeInstancesListResponse>, Status> {
        let caller = self.0.caller(&req).await?;
        let q = req.into_inner();
        let lr = self.0.list_request(q.offset, q.limit, q.filter, q.order)?;
        let (page, names, total) = list_vms(&self.0.state, &caller, lr).await.map_err(|e| self.0.status(e))?;
        let items: Vec<_> = page.into_iter().map(|vm| convert::to_pb(&self.0.pool, vm, &names)).collect();
        Ok(Response::new(pb::ComputeInstancesListResponse { size: count(items.len() as u64), total: count(total), items }))
    }

    async fn get(&self, req: Request<pb::ComputeInstancesGetRequest>) -> Result<Response<pb::ComputeInstancesGetResponse>, Status> {
        let caller = self.0.caller(&req).await?;
        let vm = vms::read(&self.0.state, &caller, &req.get_ref().id).await.map_err(|e| self.0.status(e))?;
        Ok(Response::new(pb::ComputeInstancesGetResponse {
            object: Some(self.answer(&caller, std::sync::Arc::unwrap_or_clone(vm)).await?),
        }))
    }

    async fn create(
        &self,
        req: Request<pb::ComputeInstancesCreateRequest>,
    ) -> Result<Response<pb::ComputeInstancesCreateResponse>, Status> {
        let caller = self.0.caller(&req).await?;
        let object = self.0.required(req.into_inner().object)?;
        let mut asked = convert::create(&self.0.pool, object).map_err(|e| self.0.status(ApiError::invalid(e)))?;
        self.image_named(&caller, asked.vm.spec.image.as_mut()).await?;
        let made = vms::create(&self.0.state, &caller, asked.vm).await.map_err(|e| self.0.status(in_view(e)))?;
        let object = self.answer(&caller, made.to_api()).await?;
        Ok(Response::new(pb::ComputeInstancesCreateResponse { object: Some(object), warnings: Vec::new() }))
    }

    async fn update(
        &self,
        req: Request<pb::ComputeInstancesUpdateRequest>,
    ) -> Result<Response<pb::ComputeInstancesUpdateResponse>, Status> {
        let caller = self.0.caller(&req).await?;
        let q = req.into_inner();
        let object = self.0.required(q.object)?;
        let id = object.id.clone();
        let mask = self.0.update_mask(&id, "osac.public.v1.ComputeInstance", q.update_mask)?;
        let mut asked = convert::patch(&self.0.pool, object, &mask).map_err(|e| self.0.status(ApiError::invalid(e)))?;
        self.image_named(&caller, asked.vm.spec.image.as_mut()).await?;
        let mut changed = vms::patch(&self.0.state, &caller, &id, asked.vm).await.map_err(|e| self.0.status(in_view(e)))?;
        if asked.restart {
            changed = vms::restart(&self.0.state, &caller, &id).await.map_err(|e| self.0.status(e))?;
        }
        Ok(Response::new(pb::ComputeInstancesUpdateResponse { object: Some(self.answer(&caller, changed.to_api()).await?) }))
    }

    async fn delete(
        &self,
        req: Request<pb::ComputeInstancesDeleteRequest>,
    ) -> Result<Response<pb::ComputeInstancesDeleteResponse>, Status> {
        let caller = self.0.caller(&req).await?;
        vms::remove(&self.0.state, &caller, &req.get_ref().id, false).await.map_err(|e| self.0.status(e))?;
        Ok(Response::new(pb::ComputeInstancesDeleteResponse {}))
    }
}
