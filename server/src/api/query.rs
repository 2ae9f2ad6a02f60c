//! OSAC's `filter` (CEL over the object) and `order` on lists. The store
//! reads only the rows the filter's narrowing admits (by id, name,
//! creation time and labels); when the narrowing is the whole filter and
//! nothing is sorted, the store pages too. Otherwise the filter is
//! evaluated over the JSON of what the store read, then sorted and paged.

use std::sync::Arc;

use axum::response::Response;
use serde::Deserialize;
use vmaas_model::query::{Filter, Narrowing, Order};

use super::shared::page_json;
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

/// A list's `filter` and `order`, parsed; `None` when neither was given.
pub(super) struct Selection {
    filter: Option<Filter>,
    order: Option<Order>,
    /// Whether the store answers by itself ([`Self::push_down`] set it):
    /// it was handed the narrowing, which is the whole filter, and nothing is sorted.
    in_store: bool,
}

impl Selection {
    /// Parses the query parameters; a bad one is a 400 naming it.
    pub(super) fn parse(filter: Option<&str>, order: Option<&str>) -> Result<Option<Self>, ApiError> {
        let filter = filter.filter(|f| !f.trim().is_empty());
        let order = order.filter(|o| !o.trim().is_empty());
        if filter.is_none() && order.is_none() {
            return Ok(None);
        }
        let filter = filter.map(Filter::parse).transpose().map_err(|e| ApiError::field("filter", e))?;
        let order = order.map(Order::parse).transpose().map_err(|e| ApiError::field("order", e))?;
        Ok(Some(Self { filter, order, in_store: false }))
    }

    /// What the store is to test of each row (nothing without a filter),
    /// for a list that hands it to the store: call it before [`Self::window`].
    pub(super) fn push_down(selection: &mut Option<Self>) -> Narrowing {
        let Some(sel) = selection else { return Narrowing::default() };
        let narrowing = sel.filter.as_ref().map(Filter::narrowing).unwrap_or_default();
        sel.in_store = sel.order.is_none() && narrowing.exact;
        narrowing
    }

    /// The window to read from the store for the page `offset`, `limit`:
    /// the page when the store answers by itself, else every candidate.
    pub(super) fn window(selection: &Option<Self>, offset: u64, limit: u64) -> (u64, u64) {
        match selection {
            Some(sel) if !sel.in_store => (0, u64::MAX),
            _ => (offset, limit),
        }
    }

    /// The page of `items` (read with [`Self::window`]; `total` of them
    /// matched in the store).
    pub(super) fn respond(selection: Option<Self>, items: Vec<Arc<str>>, total: u64, offset: u64, limit: u64) -> Response {
        match selection {
            Some(sel) if !sel.in_store => sel.page(items, offset, limit),
            _ => page_json(&items, total),
        }
    }

    /// The page `offset`, `limit` of `items` (every candidate, in list
    /// order) that pass the filter, sorted by the order (ties keep list order).
    fn page(&self, items: Vec<Arc<str>>, offset: u64, limit: u64) -> Response {
        let mut kept: Vec<(serde_json::Value, Arc<str>)> = items
            .into_iter()
            .filter_map(|j| serde_json::from_str(&j).ok().map(|v| (v, j)))
            .filter(|(v, _)| self.filter.as_ref().is_none_or(|f| f.matches(v)))
            .collect();
        if let Some(o) = &self.order {
            kept.sort_by(|a, b| o.compare(&a.0, &b.0));
        }
        let total = kept.len() as u64;
        let page: Vec<Arc<str>> = kept
            .into_iter()
            .skip(usize::try_from(offset).unwrap_or(usize::MAX))
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .map(|(_, j)| j)
            .collect();
        page_json(&page, total)
    }
}
