//! Console sessions and the serial console: a WebSocket per viewer,
//! authorised by a short-lived single-use ticket (or the tenant's bearer
//! token), and the buffered log. The graphical console is in
//! [`super::display`], behind the same sessions.

use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use bytes::Bytes;
use chrono::Utc;
use serde::{Deserialize, Serialize};
use tracing::debug;

use super::extract::ApiQuery;
use super::shared::PREFIX;
use crate::app::consoles;
use crate::app::consoles::clients::{EVICTED, Hold, evicted};
use crate::app::consoles::tickets::ConsoleType;
use crate::auth::Caller;
use crate::error::{ApiError, Code};
use crate::state::AppState;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/virtual_machines/{id}/console_sessions", post(create_session))
        .route("/virtual_machines/{id}/console", get(console))
        .route("/virtual_machines/{id}/console_log", get(console_log))
}

/// What a console session is for (an empty body: the serial console).
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionRequest {
    /// `CONSOLE_TYPE_SERIAL` (the default) or `CONSOLE_TYPE_VNC`.
    #[serde(default, rename = "type")]
    pub kind: ConsoleType,
    /// The client's own id (OSAC's `client_id`): a connection with it
    /// takes the place of the caller's older one with the same id.
    #[serde(default)]
    pub client_id: String,
}

/// A console session: connect to `url` within `expires_at`, once.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ConsoleSession {
    /// The single-use ticket.
    pub ticket: String,
    /// When the ticket stops being valid.
    pub expires_at: chrono::DateTime<Utc>,
    /// The WebSocket path, ticket included.
    pub url: String,
    /// Which console the ticket opens.
    #[serde(rename = "type")]
    pub kind: ConsoleType,
}

/// Open a console session: a single-use ticket for the serial console's WebSocket, or with `{"type": "CONSOLE_TYPE_VNC"}` the graphical console's, valid for 60 s.
#[utoipa::path(post, path = "/api/fulfillment/v1/virtual_machines/{id}/console_sessions", tag = "virtual machines",
    params(("id" = String, Path, description = "VM id (UUID)")), request_body(content = Option<SessionRequest>),
    responses((status = 201, body = ConsoleSession), (status = 404, body = ApiError), (status = 410, body = ApiError, description = "The VM is being deleted"),
        (status = 429, body = ApiError, description = "Too many unused tickets")),
    security(("bearer" = [])))]
pub(super) async fn create_session(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<(StatusCode, Json<ConsoleSession>), ApiError> {
    let req: SessionRequest =
        if body.iter().all(u8::is_ascii_whitespace) { SessionRequest::default() } else { crate::decode::decode(&body)? };
    Ok((StatusCode::CREATED, Json(session(&s, &caller, &id, req.kind, &req.client_id).await?)))
}

/// A new session of the caller's VM `id`'s `kind` of console, for the
/// caller's client `client_id` (empty: none), with its WebSocket's path.
pub(super) async fn session(
    s: &AppState,
    caller: &Caller,
    id: &str,
    kind: ConsoleType,
    client_id: &str,
) -> Result<ConsoleSession, ApiError> {
    let issued = consoles::open_session(s, caller, id, kind, client_id).await?;
    let url = url_of(id, kind, &issued.ticket);
    Ok(ConsoleSession { ticket: issued.ticket, expires_at: issued.expires_at, url, kind })
}

/// The path of VM `id`'s `kind` of console's WebSocket, `ticket` included.
pub(super) fn url_of(id: &str, kind: ConsoleType, ticket: &str) -> String {
    let path = if kind == ConsoleType::Vnc { "vnc" } else { "console" };
    format!("{PREFIX}/virtual_machines/{id}/{path}?ticket={ticket}")
}

/// The query of a console's WebSocket.
#[derive(Deserialize)]
pub(super) struct ConsoleQuery {
    ticket: Option<String>,
}

/// The hold on its client of a connection to VM `id`'s `kind` of console
/// the caller may open: by `?ticket=`, or by the bearer token in `headers`.
pub(super) async fn admitted(
    s: &AppState,
    id: &str,
    q: ConsoleQuery,
    headers: &HeaderMap,
    kind: ConsoleType,
) -> Result<Option<Hold>, ApiError> {
    let bearer = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    consoles::admitted(s, id, q.ticket.as_deref(), bearer, kind).await
}

/// The upgrade, or 400 saying this is a WebSocket endpoint.
pub(super) fn upgrade(ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>) -> Result<WebSocketUpgrade, ApiError> {
    ws.map_err(|e| {
        ApiError::new(
            e.status(),
            Code::InvalidArgument,
            format!("this is a WebSocket endpoint; connect with a WebSocket client ({})", e.body_text()),
        )
    })
}

/// The serial console over a WebSocket: output as binary frames (the buffered
/// log first), input from text or binary frames. Authorised by `?ticket=`
/// from a console session, or by the bearer token.
#[utoipa::path(get, path = "/api/fulfillment/v1/virtual_machines/{id}/console", tag = "virtual machines",
    params(("id" = String, Path, description = "VM id (UUID)"), ("ticket" = Option<String>, Query, description = "Ticket from console_sessions")),
    responses((status = 101, description = "Switching to the WebSocket protocol"), (status = 400, body = ApiError, description = "Not a WebSocket request"), (status = 401, body = ApiError), (status = 404, body = ApiError),
        (status = 410, body = ApiError, description = "The VM is being deleted or was deleted")))]
pub(super) async fn console(
    State(s): State<AppState>,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<ConsoleQuery>,
    headers: HeaderMap,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let hold = admitted(&s, &id, q, &headers, ConsoleType::Serial).await?;
    let ws = upgrade(ws)?;
    let console = consoles::serial(&s, &id).await?;
    Ok(ws.on_upgrade(move |socket| pump(socket, console, id, hold)))
}

/// The close frame of a connection a newer one of its client took the place of.
pub(super) fn evicted_frame() -> axum::extract::ws::CloseFrame {
    axum::extract::ws::CloseFrame { code: axum::extract::ws::close_code::POLICY, reason: EVICTED.into() }
}

async fn pump(mut socket: WebSocket, mut console: vmaas_backend::Console, id: String, mut hold: Option<Hold>) {
    if !console.history.is_empty() && socket.send(Message::Binary(Bytes::from(std::mem::take(&mut console.history)))).await.is_err() {
        return;
    }
    loop {
        tokio::select! {
            out = console.output.recv() => match out {
                Ok(chunk) => if socket.send(Message::Binary(chunk)).await.is_err() { break },
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => debug!(vm = %id, skipped = n, "console viewer lagged"),
                Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                    let _ = socket.send(Message::Close(None)).await;
                    break;
                }
            },
            () = evicted(&mut hold) => {
                let _ = socket.send(Message::Close(Some(evicted_frame()))).await;
                break;
            }
            msg = socket.recv() => match msg {
                Some(Ok(Message::Text(t))) => { if console.input.send(Bytes::from(t.as_str().to_owned())).await.is_err() { break } }
                Some(Ok(Message::Binary(b))) => { if console.input.send(b).await.is_err() { break } }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                Some(Ok(_)) => {}
            },
        }
    }
    debug!(vm = %id, "console viewer left");
}

/// The buffered serial console output, as plain text.
#[utoipa::path(get, path = "/api/fulfillment/v1/virtual_machines/{id}/console_log", tag = "virtual machines",
    params(("id" = String, Path, description = "VM id (UUID)")),
    responses((status = 200, description = "The console log", content_type = "text/plain"), (status = 404, body = ApiError)),
    security(("bearer" = [])))]
pub(super) async fn console_log(State(s): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Response, ApiError> {
    let log = consoles::log(&s, &caller, &id).await?;
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], log).into_response())
}
