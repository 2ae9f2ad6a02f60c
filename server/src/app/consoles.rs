//! Consoles: a session (a short-lived, single-use [`tickets`] ticket for
//! one VM's serial console or display), the admission of a connection (by
//! its ticket, used up, or by a bearer token; its [`clients`] hold), and
//! the backend's consoles themselves.

pub(crate) mod clients;
pub(crate) mod tickets;

use axum::http::StatusCode;
use chrono::Utc;
use tracing::info;
use vmaas_model::ObjectKind;

use super::scope::scope;
use super::simple;
use crate::auth::Caller;
use crate::error::{ApiError, Code};
use crate::state::AppState;
use clients::Hold;
use tickets::{ConsoleType, Used};

/// A ticket handed out: use it within `expires_at`, once.
pub(crate) struct Issued {
    /// The single-use ticket.
    pub ticket: String,
    /// When the ticket stops being valid.
    pub expires_at: chrono::DateTime<Utc>,
}

/// A new session of the caller's VM `id`'s `kind` of console, for the
/// caller's client `client_id` (empty: none).
pub(crate) async fn open_session(s: &AppState, caller: &Caller, id: &str, kind: ConsoleType, client_id: &str) -> Result<Issued, ApiError> {
    let vm = s.store.get_vm(id, &scope(caller)).await?;
    if vm.deleted_at.is_some() {
        return Err(gone(&vm.name, "is being deleted"));
    }
    let who = tickets::For { tenant: &vm.tenant, subject: &caller.subject, client_id };
    let (ticket, expires_at) = tickets::issue(&s.store, id, &who, kind).await?;
    info!(vm = %id, by = %caller.subject, console = ?kind, "console session opened");
    Ok(Issued { ticket, expires_at })
}

/// OSAC's console session (`ConsoleSessions.Create`): a new session of
/// the console of the caller's compute instance `resource` names (its id
/// or name); `host`: the session is asked of a bare-metal host, which is
/// not served. Answers the instance's id and the ticket.
pub(crate) async fn session_of(
    s: &AppState,
    caller: &Caller,
    host: bool,
    resource: &str,
    kind: ConsoleType,
    client_id: &str,
) -> Result<(String, Issued), ApiError> {
    if host {
        return Err(ApiError::field("object.resource_type", "is not served by vmaas: only compute instances have consoles"));
    }
    if resource.trim().is_empty() {
        return Err(ApiError::field("object.resource_id", "must name a compute instance by id or name"));
    }
    let id = vm_id(s, caller, resource).await?;
    let issued = open_session(s, caller, &id, kind, client_id).await?;
    Ok((id, issued))
}

/// The id of the caller's VM `reference` names (its id, else its name).
pub(crate) async fn vm_id(s: &AppState, caller: &Caller, reference: &str) -> Result<String, ApiError> {
    match simple::by_id_or_name(s, &scope(caller), ObjectKind::VirtualMachine, reference).await?.as_slice() {
        [one] => Ok(one.id.clone()),
        [] => Err(ApiError::not_found("compute instance", reference)),
        _ => Err(ApiError::precondition(format!("several compute instances are named {reference:?}: give its id"))),
    }
}

/// The hold on its client of a connection to VM `id`'s `kind` of console
/// (none without a client id): by `ticket` (used up), else by the bearer
/// token `bearer`; 410 while the VM is being deleted.
pub(crate) async fn admitted(
    s: &AppState,
    id: &str,
    ticket: Option<&str>,
    bearer: Option<&str>,
    kind: ConsoleType,
) -> Result<Option<Hold>, ApiError> {
    let mut client = None;
    let seen = match ticket {
        Some(t) => {
            let Some(used) = tickets::redeem(&s.store, t, id, kind).await? else {
                return Err(ApiError::unauthenticated(
                    "the console ticket is unknown, used already, expired, or for another VM or console",
                ));
            };
            client = used.client;
            // The ticket was issued for this VM: it dies with it.
            s.store.get_vm(id, &crate::store::Scope::All).await.map_err(|_| gone(id, "was deleted"))?
        }
        None => {
            let token = bearer.ok_or_else(|| ApiError::unauthenticated("send ?ticket= from POST …/console_sessions, or a bearer token"))?;
            let caller = s.keys.verify(token.trim()).await?;
            s.store.get_vm(id, &scope(&caller)).await?
        }
    };
    hold_open(s, &seen, client).await
}

/// What the ticket `ticket` (any VM's, any console) opens, using it up,
/// and the connection's hold on its client; the VM must not be being deleted.
pub(crate) async fn admitted_by_ticket(s: &AppState, ticket: &str) -> Result<(Used, Option<Hold>), ApiError> {
    let used = tickets::redeem_any(&s.store, ticket)
        .await?
        .ok_or_else(|| ApiError::unauthenticated("the console ticket is unknown, used already or expired"))?;
    let vm = &used.vm;
    let record = s.store.get_vm(vm, &crate::store::Scope::All).await.map_err(|_| gone(vm, "was deleted"))?;
    let hold = hold_open(s, &record, used.client.clone()).await?;
    Ok((used, hold))
}

/// The connection's hold on its `client` (none without one), unless the
/// VM `vm` is being deleted (410: its console is closed).
async fn hold_open(s: &AppState, vm: &crate::store::VmRecord, client: Option<String>) -> Result<Option<Hold>, ApiError> {
    if vm.deleted_at.is_some() {
        return Err(gone(&vm.name, "is being deleted"));
    }
    s.console_clients.hold(&s.store, client).await
}

/// 410: the console of the VM `name`, which `what` (is being deleted, was deleted), is closed.
fn gone(name: &str, what: &str) -> ApiError {
    ApiError::new(StatusCode::GONE, Code::FailedPrecondition, format!("virtual machine {name:?} {what}: its console is closed"))
}

/// The backend's consoles, or a 400 saying it has none.
fn consoles(s: &AppState) -> Result<std::sync::Arc<dyn vmaas_backend::Consoles>, ApiError> {
    s.backend.consoles().ok_or_else(|| ApiError::precondition(format!("the {} backend has no serial console", s.backend.name())))
}

/// VM `id`'s serial console: what it printed so far, then what it prints.
pub(crate) async fn serial(s: &AppState, id: &str) -> Result<vmaas_backend::Console, ApiError> {
    consoles(s)?.open(id).await.map_err(|e| ApiError::precondition(e.to_string()))
}

/// VM `id`'s display (RFB, as VNC speaks it).
pub(crate) async fn display(s: &AppState, id: &str) -> Result<vmaas_backend::Display, ApiError> {
    consoles(s)?.display(id).await.map_err(|e| ApiError::precondition(e.to_string()))
}

/// The buffered serial console output of the caller's VM `id`.
pub(crate) async fn log(s: &AppState, caller: &Caller, id: &str) -> Result<Vec<u8>, ApiError> {
    s.store.get_vm(id, &scope(caller)).await?;
    consoles(s)?.log(id).await.map_err(|e| ApiError::precondition(e.to_string()))
}
