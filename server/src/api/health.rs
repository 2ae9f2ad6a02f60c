//! `/livez`, `/readyz`, `/healthz` and `/metrics`: whether the process
//! answers (a liveness probe: never the database, so an outage restarts
//! nothing), whether it can serve (a readiness probe: the database and the
//! backend answer), what it runs on, and its figures. Nothing of a tenant
//! is shown without an administrator's token: `/healthz`'s quarantined VMs
//! (names, tenants, host paths) and the metrics that name a tenant or one
//! of its VMs are an administrator's only (or `--metrics-listen`'s).

use axum::Json;
use axum::extract::State;
use axum::http::header::AUTHORIZATION;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::app::health;
use crate::state::AppState;

/// The process answers: for a liveness probe.
#[utoipa::path(get, path = "/livez", tag = "health", responses((status = 200, description = "The process answers")))]
pub(super) async fn livez() -> Response {
    Json(json!({"status": "ok"})).into_response()
}

/// The server can serve: its database and its backend answer (of several
/// clusters, one). For a readiness probe.
#[utoipa::path(get, path = "/readyz", tag = "health",
    responses((status = 200, description = "Ready"), (status = 503, description = "The database or the backend does not answer")))]
pub(super) async fn readyz(State(state): State<AppState>) -> Response {
    let (ready, body) = health::ready(&state).await;
    (if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE }, Json(body)).into_response()
}

/// Health, with the backend and database in use; the quarantined VMs for
/// an administrator's token only (a count for anyone else).
#[utoipa::path(get, path = "/healthz", tag = "health", responses((status = 200, description = "Healthy"), (status = 503, description = "The database does not answer")))]
pub(super) async fn healthz(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let admin = from_admin(&state, &headers).await;
    let (db_ok, body) = health::health(&state, admin).await;
    let code = if db_ok { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (code, Json(body)).into_response()
}

/// Whether `headers` carry an administrator's token.
async fn from_admin(state: &AppState, headers: &HeaderMap) -> bool {
    match headers.get(AUTHORIZATION) {
        Some(h) => state.keys.bearer(Some(h.as_bytes())).await.is_ok_and(|c| c.is_admin()),
        None => false,
    }
}

/// The metrics: the server's own figures, and with an administrator's
/// token those that name a tenant or its VMs too.
pub(super) async fn metrics(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let full = from_admin(&state, &headers).await;
    render_metrics(&state, full).await
}

/// Every metric, tenants' included: `--metrics-listen`'s own address.
pub(super) async fn all_metrics(State(state): State<AppState>) -> Response {
    render_metrics(&state, true).await
}

/// The figures, as OpenMetrics text.
async fn render_metrics(state: &AppState, full: bool) -> Response {
    let text = health::metrics(state, full).await;
    ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], text).into_response()
}
