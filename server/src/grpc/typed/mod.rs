//! Every unary gRPC method, typed: each call's prost request becomes the
//! application layer's typed request ([`crate::app`]), and its model answer
//! the prost response, with no JSON and no REST route in between.
//!
//! - the VM services: `virtual_machines`, `compute_instances`;
//! - the kinds of the shared operations, through one generic set of calls
//!   (`kinds`): `networking`, `addresses`, `shapes` (instance types and
//!   snapshots), `catalog_items`;
//! - the templates (`templates`, OSAC's view `instance_templates`, what both
//!   share in `template_parts`), the disk images (`images`), console
//!   sessions and external IP pools (`consoles`);
//! - what they share: `meta` (metadata, references, enums), `mask`
//!   (update masks), `any` (parameter values), `time`.

mod addresses;
mod any;
mod catalog_items;
mod compute_instances;
mod consoles;
mod images;
mod instance_templates;
mod kinds;
mod mask;
mod meta;
mod networking;
mod shapes;
mod template_parts;
mod templates;
mod time;
mod virtual_machines;

use mask::Mask;
use prost_reflect::DescriptorPool;
use prost_types::FieldMask;
use tonic::Status;

pub use addresses::{ExternalIpAttachments, ExternalIps, NatGateways};
pub use catalog_items::ComputeInstanceCatalogItems;
pub use compute_instances::ComputeInstances;
pub use consoles::{ConsoleSessions, ExternalIpPools};
pub use images::DiskImages;
pub use instance_templates::ComputeInstanceTemplates;
pub use networking::{SecurityGroups, Subnets, VirtualNetworks};
pub use shapes::{ComputeInstanceSnapshots, InstanceTypes};
pub use templates::VirtualMachineTemplates;
pub use virtual_machines::VirtualMachines;

use crate::app::listing::{ListRequest, window};
use crate::auth::{Caller, CallerSlot, authenticate};
use crate::error::ApiError;
use crate::state::AppState;

/// A call's answer.
type Reply<T> = Result<tonic::Response<T>, Status>;

/// What every typed call reaches: the server's state, and the descriptors
/// errors' details and `Any` values are written with.
#[derive(Clone)]
pub struct Ctx {
    state: AppState,
    pool: DescriptorPool,
}

impl Ctx {
    /// The context of calls on `state`.
    pub fn new(state: AppState, pool: DescriptorPool) -> Self {
        Self { state, pool }
    }

    /// The caller `req`'s `authorization` names, within its tenant's rate
    /// (recorded for the audit log, when the call is audited).
    async fn caller<T>(&self, req: &tonic::Request<T>) -> Result<Caller, Status> {
        let header = req.metadata().get("authorization").map(|v| v.as_bytes());
        authenticate(&self.state, header, req.extensions().get::<CallerSlot>()).await.map_err(|e| self.status(e))
    }

    /// `e` as a status, its field violations as a `BadRequest` detail.
    fn status(&self, e: ApiError) -> Status {
        super::status::from_api(&self.pool, e)
    }

    /// The object of a create or update, which must be there.
    fn required<T>(&self, object: Option<T>) -> Result<T, Status> {
        object.ok_or_else(|| self.status(ApiError::field("object", "is required")))
    }

    /// A list's request, its page resolved (a negative or too large one is
    /// INVALID_ARGUMENT naming it).
    fn list_request(
        &self,
        offset: Option<i32>,
        limit: Option<i32>,
        filter: Option<String>,
        order: Option<String>,
    ) -> Result<ListRequest, Status> {
        let page = || window(window_field("offset", offset)?, window_field("limit", limit)?);
        let (offset, limit) = page().map_err(|e| self.status(e))?;
        Ok(ListRequest { offset, limit, filter, order, ..ListRequest::default() })
    }

    /// What an update changes: the object `id` names (which it must), the
    /// fields of the `message` its `mask` names.
    fn update_mask(&self, id: &str, message: &str, mask: Option<FieldMask>) -> Result<Mask, Status> {
        if id.is_empty() {
            return Err(self.status(ApiError::field("object.id", "is required: it names the object to change")));
        }
        let desc = self.pool.get_message_by_name(message).ok_or_else(|| Status::internal(format!("no descriptor of {message}")))?;
        Mask::of(mask, &desc).map_err(|e| self.status(e))
    }
}

/// `s`, unless it is empty (proto3's unset string).
fn non_empty(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

/// A count as an `int32` field holds it (a page is at most 1000 items).
fn count(n: u64) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// A page's `offset` or `limit` as the application reads it.
fn window_field(name: &str, v: Option<i32>) -> Result<Option<u64>, ApiError> {
    v.map(|n| u64::try_from(n).map_err(|_| ApiError::field(name, format!("must not be negative, got {n}")))).transpose()
}
