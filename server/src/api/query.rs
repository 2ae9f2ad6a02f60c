//! The query of a list (its page, name, state, OSAC's `filter` and
//! `order`), read into the application's [`ListRequest`], and its answer.

use axum::response::Response;
use serde::Deserialize;

use super::shared::{Paging, page_json};
use crate::app::listing::{ListRequest, Listed};
use crate::error::ApiError;

/// Query of a list of VMs or of a kind served by the shared handlers.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct ListQuery {
    /// Items to skip (default 0).
    pub(super) offset: Option<u64>,
    /// Items to return, 1 to 1000 (default 100).
    pub(super) limit: Option<u64>,
    /// Only the object with this exact name.
    pub(super) name: Option<String>,
    /// Only objects in this state: its full name (e.g. `VIRTUAL_MACHINE_STATE_READY`) or its last word (`READY`), any case.
    pub(super) state: Option<String>,
    /// A CEL expression over the object, e.g. `this.metadata.name.startsWith('web')` (see docs/api.md).
    pub(super) filter: Option<String>,
    /// Sort keys, e.g. `this.metadata.name desc, this.id`.
    pub(super) order: Option<String>,
}

/// OSAC's list query: a page, a `filter` and an `order` (templates and
/// the `osac.public.v1` views served from another kind's list).
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct PageQuery {
    /// Items to skip (default 0).
    pub(super) offset: Option<u64>,
    /// Items to return, 1 to 1000 (default 100).
    pub(super) limit: Option<u64>,
    /// A CEL expression over the object, e.g. `this.metadata.name.startsWith('web')`.
    pub(super) filter: Option<String>,
    /// Sort keys, e.g. `this.metadata.name desc`.
    pub(super) order: Option<String>,
}

impl ListQuery {
    /// The list request, its page resolved (a bad `limit` is a 400 naming it).
    pub(super) fn request(self) -> Result<ListRequest, ApiError> {
        let (offset, limit) = Paging { offset: self.offset, limit: self.limit }.resolve()?;
        Ok(ListRequest { offset, limit, name: self.name, state: self.state, filter: self.filter, order: self.order })
    }
}

impl PageQuery {
    /// The list request, its page resolved (a bad `limit` is a 400 naming it).
    pub(super) fn request(self) -> Result<ListRequest, ApiError> {
        let (offset, limit) = Paging { offset: self.offset, limit: self.limit }.resolve()?;
        Ok(ListRequest { offset, limit, filter: self.filter, order: self.order, ..ListRequest::default() })
    }
}

/// The page `{"items", "size", "total"}` of a list's answer.
pub(super) fn page(listed: Listed) -> Response {
    page_json(&listed.items, listed.total)
}
