//! OSAC's `ConsoleSessions.Create` on REST, `POST /console_sessions` (and
//! so on gRPC through its HTTP rule): a single-use ticket to a compute
//! instance's serial or graphical console, named by id or name in the
//! caller's tenant. The ticket opens the console's WebSocket (the answer's
//! `url`, a vmaas addition) or, as its bearer token, `ConsoleProxy.Connect`.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use vmaas_model::Envelope;

use super::console::url_of;
use super::extract::ApiJson;
use crate::app::consoles;
use crate::app::consoles::tickets::ConsoleType;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

/// `POST /console_sessions`: OSAC's console sessions, by resource.
pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/console_sessions", post(create))
}

/// What a console is of (OSAC's `ConsoleResourceType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
pub enum ConsoleResourceType {
    /// A compute instance: a VM (the default).
    #[default]
    #[serde(rename = "CONSOLE_RESOURCE_TYPE_COMPUTE_INSTANCE", alias = "CONSOLE_RESOURCE_TYPE_UNSPECIFIED")]
    ComputeInstance,
    /// A bare-metal host: not served by vmaas.
    #[serde(rename = "CONSOLE_RESOURCE_TYPE_HOST")]
    Host,
}

/// OSAC's `ConsoleSession`: asked with `resource_id` and `type`, answered
/// with the ticket and its expiry too.
#[derive(Debug, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OsacConsoleSession {
    /// `CONSOLE_RESOURCE_TYPE_COMPUTE_INSTANCE`.
    #[serde(default)]
    pub resource_type: ConsoleResourceType,
    /// The compute instance's id or name; answered with its id.
    #[serde(default)]
    pub resource_id: String,
    /// `CONSOLE_TYPE_SERIAL` (the default) or `CONSOLE_TYPE_VNC`.
    #[serde(default, rename = "type")]
    pub kind: ConsoleType,
    /// The client's own id: a connection with it takes the place of the
    /// caller's older one with the same id (on any replica).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub client_id: String,
    /// Output only: the ticket.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ticket: String,
    /// Output only: when it expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Output only (vmaas): the console's WebSocket path, ticket included.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub url: String,
}

/// Open a console session of a compute instance (OSAC's `ConsoleSessions.Create`): a single-use ticket, 60 s.
#[utoipa::path(post, path = "/api/fulfillment/v1/console_sessions", tag = "virtual machines",
    request_body = Envelope<OsacConsoleSession>,
    responses((status = 201, body = Envelope<OsacConsoleSession>), (status = 400, body = ApiError), (status = 404, body = ApiError),
        (status = 410, body = ApiError, description = "The VM is being deleted"), (status = 429, body = ApiError, description = "Too many unused tickets")),
    security(("bearer" = [])))]
pub(super) async fn create(
    State(s): State<AppState>,
    caller: Caller,
    ApiJson(Envelope { object: req }): ApiJson<Envelope<OsacConsoleSession>>,
) -> Result<(StatusCode, Json<Envelope<OsacConsoleSession>>), ApiError> {
    let host = req.resource_type == ConsoleResourceType::Host;
    let (id, issued) = consoles::session_of(&s, &caller, host, &req.resource_id, req.kind, &req.client_id).await?;
    let url = url_of(&id, req.kind, &issued.ticket);
    let answer = OsacConsoleSession {
        resource_type: ConsoleResourceType::ComputeInstance,
        resource_id: id,
        kind: req.kind,
        client_id: req.client_id,
        ticket: issued.ticket,
        expires_at: Some(issued.expires_at),
        url,
    };
    Ok((StatusCode::CREATED, Json(Envelope { object: answer })))
}
