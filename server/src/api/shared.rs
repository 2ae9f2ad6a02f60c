//! What the handlers share: the route prefix, paging, the scopes a
//! caller reads and names in, the check of a name, and JSON bodies
//! serialised already.

use std::fmt::Write as _;
use std::sync::Arc;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::error::ApiError;

/// Prefix of every API route.
pub const PREFIX: &str = "/api/fulfillment/v1";

/// Largest page a list returns.
pub const MAX_PAGE: u64 = 1000;

/// Page size when none is asked for.
pub const DEFAULT_PAGE: u64 = 100;

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
        let limit = self.limit.unwrap_or(DEFAULT_PAGE);
        if limit == 0 || limit > MAX_PAGE {
            return Err(ApiError::field("limit", format!("must be between 1 and {MAX_PAGE}, got {limit}")));
        }
        Ok((self.offset.unwrap_or(0), limit))
    }
}

/// Where the references of an object owned by `tenant` resolve: that
/// tenant's objects only, whoever asks, so that an administrator's object
/// never names (by id or by name) another tenant's.
pub(crate) fn owned_by(tenant: &str) -> crate::store::Scope {
    crate::store::Scope::Tenant(tenant.to_owned())
}

/// What `caller` may see: its own tenant's objects, or every tenant's for administrators.
pub(crate) fn scope(caller: &crate::auth::Caller) -> crate::store::Scope {
    if caller.is_admin() { crate::store::Scope::All } else { crate::store::Scope::Tenant(caller.tenant.clone()) }
}

/// The name a create request asks for, checked as a DNS label; every
/// problem goes into `errs`, naming the field it came from.
pub(crate) fn checked_name(requested: Option<(&str, &'static str)>, errs: &mut vmaas_model::ValidationErrors) -> Option<String> {
    checked_name_by(requested, vmaas_model::validation::check_dns_label, errs)
}

/// The name a create request asks for, checked by `rule`.
pub(crate) fn checked_name_by(
    requested: Option<(&str, &'static str)>,
    rule: fn(&str) -> Result<(), vmaas_model::validation::NameError>,
    errs: &mut vmaas_model::ValidationErrors,
) -> Option<String> {
    match requested {
        None => {
            errs.push("object.metadata.name", "is required (or give the name as object.id)");
            None
        }
        Some((name, field)) => match rule(name) {
            Ok(()) => Some(name.to_owned()),
            Err(reason) => {
                errs.push(field, reason);
                None
            }
        },
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
