//! A list request: its page, name, state, OSAC's `filter` (CEL over the
//! object) and `order`. The store reads only the rows the filter's
//! narrowing admits (by id, name, creation time, labels and state); when the
//! narrowing is the whole filter and nothing is sorted, the store pages
//! too. Otherwise the filter is evaluated over the JSON of what the store
//! read, then sorted and paged.

use std::future::Future;
use std::sync::Arc;

use vmaas_model::query::{Filter, Narrowing, Order};

use crate::error::ApiError;

/// Largest page a list returns.
pub const MAX_PAGE: u64 = 1000;

/// Page size when none is asked for.
pub const DEFAULT_PAGE: u64 = 100;

/// The window `(offset, limit)` a list asks for, with the defaults, or a
/// 400 naming `limit`.
pub(crate) fn window(offset: Option<u64>, limit: Option<u64>) -> Result<(u64, u64), ApiError> {
    let limit = limit.unwrap_or(DEFAULT_PAGE);
    if limit == 0 || limit > MAX_PAGE {
        return Err(ApiError::field("limit", format!("must be between 1 and {MAX_PAGE}, got {limit}")));
    }
    Ok((offset.unwrap_or(0), limit))
}

/// What a list asks for, its page resolved already.
#[derive(Debug, Clone, Default)]
pub(crate) struct ListRequest {
    /// Items to skip.
    pub offset: u64,
    /// Items to return.
    pub limit: u64,
    /// Only the object with this exact name.
    pub name: Option<String>,
    /// Only objects in this state (its full name or its last word).
    pub state: Option<String>,
    /// A CEL expression over the object.
    pub filter: Option<String>,
    /// Sort keys.
    pub order: Option<String>,
}

/// A page of objects, each serialised already.
#[derive(Debug, Default)]
pub(crate) struct Listed {
    /// The page.
    pub items: Vec<Arc<str>>,
    /// How many matched in all.
    pub total: u64,
}

/// Whether the objects a list's filter sees have the stored `status.state`
/// (so a filter on it narrows what the store reads through its index), or
/// a state of their own (it is then evaluated on each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum States {
    /// `status.state` is the stored state, spelled the same.
    Stored,
    /// The view renames (or the kind derives) its states.
    Renamed,
}

/// What the store is asked for one list: the narrowing it tests, and the
/// window `(offset, limit)` it reads.
pub(crate) struct Read {
    /// What the store tests of each row.
    pub narrow: Narrowing,
    /// Rows to skip.
    pub offset: u64,
    /// Rows to read.
    pub limit: u64,
}

impl ListRequest {
    /// Runs the list: `read` is asked for the narrowed window (and returns
    /// the items it read, as the list's filter sees them, and how many
    /// matched in the store); what the store could not do (the rest of the
    /// filter, the order, the page) is done here. A bad `filter` or `order`
    /// is a 400 naming it.
    pub(crate) async fn run<F, Fut>(&self, states: States, read: F) -> Result<Listed, ApiError>
    where
        F: FnOnce(Read) -> Fut,
        Fut: Future<Output = Result<(Vec<Arc<str>>, u64), ApiError>>,
    {
        self.run_with(Some(states), read).await
    }

    /// Runs the list over a read that cannot narrow (`read` is given no
    /// narrowing, and every row when there is a filter or an order).
    pub(crate) async fn run_unnarrowed<F, Fut>(&self, read: F) -> Result<Listed, ApiError>
    where
        F: FnOnce(Read) -> Fut,
        Fut: Future<Output = Result<(Vec<Arc<str>>, u64), ApiError>>,
    {
        self.run_with(None, read).await
    }

    async fn run_with<F, Fut>(&self, narrows: Option<States>, read: F) -> Result<Listed, ApiError>
    where
        F: FnOnce(Read) -> Fut,
        Fut: Future<Output = Result<(Vec<Arc<str>>, u64), ApiError>>,
    {
        let page = |narrow| Read { narrow, offset: self.offset, limit: self.limit };
        let Some(sel) = Selection::parse(self.filter.as_deref(), self.order.as_deref())? else {
            let (items, total) = read(page(Narrowing::default())).await?;
            return Ok(Listed { items, total });
        };
        let narrow = match (narrows, &sel.filter) {
            (Some(States::Stored), Some(f)) => f.narrowing(),
            (Some(States::Renamed), Some(f)) => f.narrowing().without_states(),
            _ => Narrowing::default(),
        };
        if narrows.is_some() && sel.order.is_none() && narrow.exact {
            let (items, total) = read(page(narrow)).await?;
            return Ok(Listed { items, total });
        }
        let (items, _) = read(Read { narrow, offset: 0, limit: u64::MAX }).await?;
        Ok(sel.page(items, self.offset, self.limit))
    }
}

/// A list's `filter` and `order`, parsed.
struct Selection {
    filter: Option<Filter>,
    order: Option<Order>,
}

impl Selection {
    /// Parses the query parameters (`None` when neither was given); a bad
    /// one is a 400 naming it.
    fn parse(filter: Option<&str>, order: Option<&str>) -> Result<Option<Self>, ApiError> {
        let filter = filter.filter(|f| !f.trim().is_empty());
        let order = order.filter(|o| !o.trim().is_empty());
        if filter.is_none() && order.is_none() {
            return Ok(None);
        }
        let filter = filter.map(Filter::parse).transpose().map_err(|e| ApiError::field("filter", e))?;
        let order = order.map(Order::parse).transpose().map_err(|e| ApiError::field("order", e))?;
        Ok(Some(Self { filter, order }))
    }

    /// The page `offset`, `limit` of `items` (every candidate, in list
    /// order) that pass the filter, sorted by the order (ties keep list order).
    fn page(&self, items: Vec<Arc<str>>, offset: u64, limit: u64) -> Listed {
        let mut kept: Vec<(serde_json::Value, Arc<str>)> = items
            .into_iter()
            .filter_map(|j| serde_json::from_str(&j).ok().map(|v| (v, j)))
            .filter(|(v, _)| self.filter.as_ref().is_none_or(|f| f.matches(v)))
            .collect();
        if let Some(o) = &self.order {
            kept.sort_by(|a, b| o.compare(&a.0, &b.0));
        }
        let total = kept.len() as u64;
        let items = kept
            .into_iter()
            .skip(usize::try_from(offset).unwrap_or(usize::MAX))
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .map(|(_, j)| j)
            .collect();
        Listed { items, total }
    }
}

/// The `id` of an object a list gave (its JSON).
pub(crate) fn id_of(json: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Id {
        id: String,
    }
    serde_json::from_str::<Id>(json).ok().map(|i| i.id)
}
