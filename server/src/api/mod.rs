//! The REST/JSON API under `/api/fulfillment/v1`, plus `/healthz`,
//! `/metrics` and the OpenAPI document at `/api/openapi.json`.

mod catalog_items;
mod compute_instance_templates;
mod compute_instances;
mod console;
mod console_sessions;
mod deadline;
mod disk_images;
mod display;
mod events;
mod exports;
mod extract;
#[cfg(test)]
mod fuzz;
mod health;
mod image_imports;
mod images;
mod migrate;
mod openapi;
mod query;
mod quotas;
mod resource;
mod resource_doc;
mod resources;
mod restore;
mod shared;
mod templates;
mod vms;

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::trace::TraceLayer;

pub use crate::decode::decode;
pub use extract::{ApiJson, ApiQuery};
pub use openapi::openapi_document;
pub use shared::{DEFAULT_PAGE, MAX_PAGE, PREFIX, Paging};

use crate::error::{ApiError, Code};
use crate::metrics::HttpLabels;
use crate::state::AppState;

/// Builds the router: the routes, each behind one stack of layers (body
/// limits, panic catching, tracing, metrics and audit, body shaping).
/// One stack, not one `layer` call per layer: each call boxes every route
/// again, and every request clones each box.
pub fn router(state: AppState, limits: &crate::serve::HttpLimits) -> Router {
    let body_timeout = limits.body_timeout;
    let api = Router::new()
        .merge(templates::routes())
        .merge(vms::routes())
        .merge(migrate::routes())
        .merge(restore::routes())
        .merge(exports::routes())
        .merge(compute_instances::routes())
        .merge(disk_images::routes())
        .merge(compute_instance_templates::routes())
        .merge(catalog_items::routes())
        .merge(resources::routes())
        .merge(resources::external_ips::routes())
        .merge(images::routes())
        .merge(image_imports::routes())
        .merge(console::routes())
        .merge(console_sessions::routes())
        .merge(display::routes())
        .merge(quotas::routes());
    Router::new()
        .nest(PREFIX, api)
        .merge(events::routes())
        .merge(crate::web::routes())
        .route("/healthz", get(health::healthz))
        .route("/livez", get(health::livez))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(health::metrics))
        .route("/api/openapi.json", get(|| async { Json(openapi_document()) }))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(
            tower::ServiceBuilder::new()
                .layer(axum::extract::DefaultBodyLimit::max(limits.max_body_bytes))
                .map_request(move |r: Request| deadline::Deadline::apply(r, body_timeout))
                .layer(CatchPanicLayer::custom(|_| ApiError::internal("handler panicked").into_response()))
                .layer(TraceLayer::new_for_http())
                .layer(middleware::from_fn_with_state(state.clone(), observe)),
        )
        .with_state(state)
}

/// The router of `--metrics-listen`'s own address: `/metrics`, every
/// figure (tenants' too), without a token.
pub fn metrics_router(state: AppState) -> Router {
    Router::new().route("/metrics", get(health::all_metrics)).fallback(not_found).with_state(state)
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, Code::Unimplemented, "no such route")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, Code::Unimplemented, "method not allowed on this route")
}

/// The method as a metric label: one of the standard methods, or `OTHER`,
/// so that clients cannot grow the label set.
fn method_label(m: &axum::http::Method) -> &'static str {
    match m.as_str() {
        "GET" => "GET",
        "POST" => "POST",
        "PUT" => "PUT",
        "PATCH" => "PATCH",
        "DELETE" => "DELETE",
        "HEAD" => "HEAD",
        "OPTIONS" => "OPTIONS",
        _ => "OTHER",
    }
}

/// Records every request in the metrics, and a mutating one in the audit
/// log, around the request's body shaping ([`extract::answer_in_kind`]):
/// one middleware for all of it, as each layer costs every request a copy
/// of every route's stack.
async fn observe(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = method_label(req.method());
    let route = req.extensions().get::<MatchedPath>().map(|p| p.as_str().to_owned()).unwrap_or_else(|| "unmatched".into());
    let audit = crate::audit::Pending::start(state.audit.as_ref(), &mut req);
    let resp = extract::answer_in_kind(req, next).await;
    let status = resp.status().as_u16();
    state.metrics.observe_http(HttpLabels { method, route, status }, started.elapsed());
    if let Some(a) = audit {
        a.finish(status, started.elapsed()).await;
    }
    resp
}
