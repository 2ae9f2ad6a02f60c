//! Whether the server can serve, what it runs on, and its figures: what
//! `/readyz`, `/healthz` and `/metrics` answer.

use serde_json::{Value, json};

use crate::state::AppState;

/// Whether the database answers within a second.
async fn database_answers(s: &AppState) -> bool {
    matches!(tokio::time::timeout(std::time::Duration::from_secs(1), s.store.ping()).await, Ok(Ok(())))
}

/// Whether the database and the backend (of several clusters, one)
/// answer, and the body that says so.
pub(crate) async fn ready(s: &AppState) -> (bool, Value) {
    let database = database_answers(s).await;
    let backend = s.backend.serving();
    let ready = database && backend;
    (ready, json!({"status": if ready { "ok" } else { "unavailable" }, "database": database, "backend": backend}))
}

/// Health, with the backend and database in use; the quarantined VMs for
/// an administrator (`admin`) only, a count for anyone else. The flag is
/// whether the database answers.
pub(crate) async fn health(s: &AppState, admin: bool) -> (bool, Value) {
    let db_ok = database_answers(s).await;
    let quarantine = s.backend.quarantine();
    let mut body = json!({
        "status": if db_ok { "ok" } else { "unavailable" },
        "version": env!("CARGO_PKG_VERSION"),
        "database": s.store.dialect().as_str(),
        "backend": { "name": s.backend.name(), "capabilities": s.backend.capabilities(), "details": s.backend.health() },
        "quarantined": quarantine.len(),
        "reconciler": s.progress.report(),
    });
    if admin {
        body["quarantine"] = json!(quarantine);
    }
    (db_ok, body)
}

/// Refreshes the figures read at each scrape and renders them (`full`:
/// those that name a tenant or its VMs too), as OpenMetrics text.
pub(crate) async fn metrics(s: &AppState, full: bool) -> String {
    match crate::quota::figures(&s.store).await {
        Ok(f) => s.metrics.set_quotas(f),
        Err(e) => tracing::warn!(error = %e, "quota figures not exported"),
    }
    match s.store.state_counts(vmaas_model::ObjectKind::VirtualMachine).await {
        Ok(counts) => s.metrics.set_vm_counts(
            vmaas_model::VmState::ALL
                .iter()
                .map(|st| (st.short(), counts.get(st.as_str()).map_or(0, |n| i64::try_from(*n).unwrap_or(i64::MAX)))),
        ),
        Err(e) => tracing::warn!(error = %e, "VM state figures not exported"),
    }
    let backend = s.backend.clone();
    match tokio::task::spawn_blocking(move || backend.memory()).await {
        Ok(m) => s.metrics.set_vm_memory(&m),
        Err(e) => tracing::warn!(error = %e, "VM memory figures not exported"),
    }
    s.metrics.render(full)
}
