//! `/healthz` and `/metrics`: the server's liveness, what it runs on, and
//! its figures.

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::state::AppState;

/// Liveness and readiness, with the backend and database in use.
#[utoipa::path(get, path = "/healthz", tag = "health", responses((status = 200, description = "Healthy"), (status = 503, description = "The database does not answer")))]
pub(super) async fn healthz(State(state): State<AppState>) -> Response {
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

pub(super) async fn metrics(State(state): State<AppState>) -> Response {
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
