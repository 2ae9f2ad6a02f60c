//! The REST/JSON API under `/api/fulfillment/v1`, plus `/healthz`,
//! `/metrics` and the OpenAPI document at `/api/openapi.json`.

mod compute_instance_templates;
mod compute_instances;
mod console;
mod deadline;
mod events;
mod external_ips;
mod extract;
#[cfg(test)]
mod fuzz;
mod image_imports;
mod images;
mod ip_attachments;
mod load_balancers;
mod mask;
mod migrate;
mod networks;
mod openapi;
mod query;
mod quotas;
mod resource;
mod resource_doc;
mod security_groups;
mod simple;
mod subnets;
mod templates;
mod vms;
mod volume_attachments;
mod volumes;

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::trace::TraceLayer;

pub use extract::{ApiJson, ApiQuery, decode};
pub use openapi::openapi_document;

use crate::auth::Keys;
use crate::error::{ApiError, Code};
use crate::metrics::{HttpLabels, Metrics};
use crate::reconciler::Queue;
use crate::store::Store;
use vmaas_backend::Backend;

/// The kinds served by the shared handlers ([`resource::Resource`]): each
/// one's routes and OpenAPI operations come from its declaration.
mod resources {
    use super::resource::{self, Resource};
    use super::{AppState, resource_doc};
    use crate::store::{
        AttachmentKind, ExternalIpKind, LoadBalancerKind, NetworkKind, SecurityGroupKind, SubnetKind, VolumeAttachmentKind, VolumeKind,
    };

    /// Calls `$each::<K>` for every kind served by the shared handlers.
    macro_rules! each_resource {
        ($each:ident($($arg:expr),*)) => {
            $each::<NetworkKind>($($arg),*);
            $each::<SubnetKind>($($arg),*);
            $each::<SecurityGroupKind>($($arg),*);
            $each::<ExternalIpKind>($($arg),*);
            $each::<AttachmentKind>($($arg),*);
            $each::<LoadBalancerKind>($($arg),*);
            $each::<VolumeKind>($($arg),*);
            $each::<VolumeAttachmentKind>($($arg),*);
        };
    }

    /// Every such kind's routes.
    pub(super) fn routes() -> axum::Router<AppState> {
        let mut router = axum::Router::new();
        fn add<K: Resource>(router: &mut axum::Router<AppState>) {
            *router = std::mem::take(router).merge(resource::routes::<K>());
        }
        each_resource!(add(&mut router));
        router
    }

    /// Every such kind's operations, added to `doc`.
    pub(super) fn document(doc: &mut utoipa::openapi::OpenApi) {
        use resource_doc::add;
        each_resource!(add(doc));
    }
}

/// Prefix of every API route.
pub const PREFIX: &str = "/api/fulfillment/v1";

/// Largest page a list returns.
pub const MAX_PAGE: u64 = 1000;

/// Page size when none is asked for.
pub const DEFAULT_PAGE: u64 = 100;

/// What every handler can reach: one shared [`Services`], so that handing
/// it to a request (axum clones the state for every one) is one reference
/// count, not a copy of every field.
#[derive(Clone)]
pub struct AppState(Arc<Services>);

impl AppState {
    /// Shares `services` among handlers.
    pub fn new(services: Services) -> Self {
        Self(Arc::new(services))
    }
}

impl std::ops::Deref for AppState {
    type Target = Services;

    fn deref(&self) -> &Services {
        &self.0
    }
}

/// The services behind [`AppState`].
#[derive(Clone)]
pub struct Services {
    /// Durable state.
    pub store: Store,
    /// Token keys.
    pub keys: Keys,
    /// The reconciler's queue: a change enqueues the object it changed.
    pub queue: Arc<Queue>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// The backend.
    pub backend: Arc<dyn Backend>,
    /// Console tickets not used yet.
    pub tickets: Arc<console::Tickets>,
    /// How far VMs may overcommit the host.
    pub overcommit: crate::capacity::Overcommit,
    /// How far the reconciler has caught up since start.
    pub progress: Arc<crate::reconciler::Progress>,
    /// Serialises the checks and the write of creates and changes that
    /// take something ([`AppState::admit`]).
    pub admission: crate::admission::Gate,
    /// The external IP pools.
    pub pools: Arc<crate::pools::Pools>,
    /// The largest image file imported or uploaded.
    pub image_max_bytes: u64,
    /// Image imports from a URL one tenant may have under way at once.
    pub image_imports_per_tenant: usize,
    /// Committed events, for watchers.
    pub events: Arc<crate::events::EventHub>,
    /// Where mutating requests are recorded, if anywhere.
    pub audit: Option<crate::audit::AuditLog>,
    /// The backend's image catalog as last read.
    pub catalog: images::CatalogCache,
}

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
fn owned_by(tenant: &str) -> crate::store::Scope {
    crate::store::Scope::Tenant(tenant.to_owned())
}

/// What `caller` may see: its own tenant's objects, or every tenant's for administrators.
fn scope(caller: &crate::auth::Caller) -> crate::store::Scope {
    if caller.is_admin() { crate::store::Scope::All } else { crate::store::Scope::Tenant(caller.tenant.clone()) }
}

/// The name a create request asks for, checked as a DNS label; every
/// problem goes into `errs`, naming the field it came from.
fn checked_name(requested: Option<(&str, &'static str)>, errs: &mut vmaas_model::ValidationErrors) -> Option<String> {
    match requested {
        None => {
            errs.push("object.metadata.name", "is required (or give the name as object.id)");
            None
        }
        Some((name, field)) => match vmaas_model::validation::check_dns_label(name) {
            Ok(()) => Some(name.to_owned()),
            Err(reason) => {
                errs.push(field, reason);
                None
            }
        },
    }
}

/// A response whose body is JSON serialised already.
fn raw_json(body: String) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// `{"object": …}` around an object serialised already, in one allocation.
fn enveloped(object: &str) -> String {
    let mut body = String::with_capacity(object.len() + 12);
    body.push_str("{\"object\":");
    body.push_str(object);
    body.push('}');
    body
}

/// A page `{"items": [...], "size": n, "total": n}` of items serialised already.
fn page_json(items: &[Arc<str>], total: u64) -> Response {
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
        .merge(compute_instances::routes())
        .merge(compute_instance_templates::routes())
        .merge(resources::routes())
        .merge(external_ips::routes())
        .merge(images::routes())
        .merge(console::routes())
        .merge(quotas::routes());
    Router::new()
        .nest(PREFIX, api)
        .merge(events::routes())
        .merge(crate::web::routes())
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
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
    let audit = crate::audit::Pending::start(&state, &mut req);
    let resp = extract::answer_in_kind(req, next).await;
    let status = resp.status().as_u16();
    state.metrics.observe_http(HttpLabels { method, route, status }, started.elapsed());
    if let Some(a) = audit {
        a.finish(status, started.elapsed()).await;
    }
    resp
}

/// Liveness and readiness, with the backend and database in use.
#[utoipa::path(get, path = "/healthz", tag = "health", responses((status = 200, description = "Healthy"), (status = 503, description = "The database does not answer")))]
async fn healthz(State(state): State<AppState>) -> Response {
    // Within a second, or the database counts as unavailable.
    let db_ok = matches!(tokio::time::timeout(std::time::Duration::from_secs(1), state.store.ping()).await, Ok(Ok(())));
    let body = serde_json::json!({
        "status": if db_ok { "ok" } else { "unavailable" },
        "version": env!("CARGO_PKG_VERSION"),
        "database": state.store.dialect().as_str(),
        "backend": { "name": state.backend.name(), "capabilities": state.backend.capabilities(), "details": state.backend.health() },
        "quarantine": state.backend.quarantine(),
        "reconciler": state.progress.report(),
    });
    let code = if db_ok { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (code, Json(body)).into_response()
}

async fn metrics(State(state): State<AppState>) -> Response {
    match crate::quota::figures(&state.store).await {
        Ok(f) => state.metrics.set_quotas(f),
        Err(e) => tracing::warn!(error = %e, "quota figures not exported"),
    }
    match state.store.state_counts(vmaas_model::ObjectKind::VirtualMachine).await {
        Ok(counts) => state.metrics.set_vm_counts(
            vmaas_model::VmState::ALL
                .iter()
                .map(|s| (s.short(), counts.get(s.as_str()).map_or(0, |n| i64::try_from(*n).unwrap_or(i64::MAX)))),
        ),
        Err(e) => tracing::warn!(error = %e, "VM state figures not exported"),
    }
    let backend = state.backend.clone();
    match tokio::task::spawn_blocking(move || backend.memory()).await {
        Ok(m) => state.metrics.set_vm_memory(&m),
        Err(e) => tracing::warn!(error = %e, "VM memory figures not exported"),
    }
    ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], state.metrics.render()).into_response()
}
