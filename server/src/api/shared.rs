//! What the handlers share: the route prefix, paging, and JSON bodies
//! serialised already.

use std::fmt::Write as _;
use std::sync::Arc;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::error::ApiError;

/// Prefix of every API route.
pub const PREFIX: &str = "/api/fulfillment/v1";

pub use crate::app::listing::{DEFAULT_PAGE, MAX_PAGE};

/// Paging parameters shared by every list.
#[derive(Debug, Clone, Copy, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct Paging {
    /// Items to skip (default 0).
    pub offset: Option<u64>,
    /// Items to return, 1 to 1000 (default 100).
    pub limit: Option<u64>,
}

impl Paging {
    /// `(offset, limit)` with defaults, or a 400 naming `limit`.
    pub fn resolve(self) -> Result<(u64, u64), ApiError> {
        crate::app::listing::window(self.offset, self.limit)
    }
}

/// A response whose body is JSON serialised already.
pub(crate) fn raw_json(body: String) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// `{"object": …}` around an object serialised already, in one allocation.
pub(crate) fn enveloped(object: &str) -> String {
    let mut body = String::with_capacity(object.len() + 12);
    body.push_str("{\"object\":");
    body.push_str(object);
    body.push('}');
    body
}

/// A page `{"items": [...], "size": n, "total": n}` of items serialised already.
pub(crate) fn page_json(items: &[Arc<str>], total: u64) -> Response {
    let mut body = String::with_capacity(items.iter().map(|i| i.len() + 1).sum::<usize>() + 64);
    body.push_str("{\"items\":[");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            body.push(',');
        }
        body.push_str(item);
    }
    let _ = write!(body, "],\"size\":{},\"total\":{total}}}", items.len());
    raw_json(body)
}
