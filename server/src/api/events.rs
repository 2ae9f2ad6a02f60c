//! `GET /api/events/v1/events`: OSAC's `Events.Watch` over HTTP. Every
//! change of every object the caller may see, as `{"id", "type",
//! "<kind>": object}`; with `watch=true` a Server-Sent Events stream whose
//! event ids resume it (`Last-Event-ID`, or `after`), else one page of the
//! events after `after`. `filter` is CEL over the event (`event.type ==
//! EVENT_TYPE_OBJECT_UPDATED && event.virtual_machine.metadata.name == 'web'`).

use std::convert::Infallible;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::http::HeaderValue;
use axum::http::header::{AUTHORIZATION, CONNECTION};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use futures::StreamExt;
use serde::Deserialize;

use super::extract::ApiQuery;
use super::shared::raw_json;
use crate::app::events::{self, Followed};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::events::Audience;
use crate::serve::conns::ConnMark;
use crate::state::AppState;

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/api/events/v1/events", get(events))
}

/// Query of the event stream.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct EventsQuery {
    /// Stream the events as Server-Sent Events (else: one page of those after `after`).
    #[serde(default)]
    watch: bool,
    /// Resume after this event id (also taken from `Last-Event-ID`); absent: from now.
    after: Option<i64>,
    /// A CEL expression over the event, e.g. `event.type == EVENT_TYPE_OBJECT_DELETED`.
    filter: Option<String>,
}

/// Watch the events of the objects you may see.
#[utoipa::path(get, path = "/api/events/v1/events", tag = "events", params(EventsQuery),
    responses((status = 200, description = "`text/event-stream` with `watch=true`, else `{\"items\": [events]}`"),
        (status = 400, body = ApiError), (status = 410, body = ApiError, description = "The events after `after` were trimmed: list again, and watch from now"),
        (status = 429, body = ApiError, description = "RESOURCE_EXHAUSTED: the tenant or the token holds as many streams as it may (`--watches-per-tenant`, `--watches-per-token`); the connection closes")),
    security(("bearer" = [])))]
pub(super) async fn events(
    State(s): State<AppState>,
    caller: Caller,
    conn: Option<Extension<ConnMark>>,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<EventsQuery>,
) -> Result<Response, ApiError> {
    let sees = Audience::new(caller, q.filter.as_deref())?;
    let after = q.after.map(Ok).or_else(|| last_event_id(&headers)).transpose()?;
    if !q.watch {
        let items = events::page(&s, &sees, after).await?;
        return Ok(raw_json(format!("{{\"items\":[{}]}}", items.join(","))));
    }
    let auth = headers.get(AUTHORIZATION).map(|v| v.as_bytes());
    let slot = match crate::watches::start(&s.watches, &sees.caller.tenant, auth, conn.as_ref().map(|c| &c.0)) {
        Ok(slot) => slot,
        Err(e) => {
            // Refused: the connection closes too, so a client retrying in
            // a loop holds no connection meanwhile.
            let mut refused = e.into_response();
            refused.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
            return Ok(refused);
        }
    };
    let stream = events::watch(&s, after, slot).await?;
    let items = stream.filter_map(move |f| {
        futures::future::ready(match f {
            Followed::Event(e) if sees.sees(&e.row.tenant, &e.value) => {
                Some(Ok::<_, Infallible>(SseEvent::default().id(e.row.seq.to_string()).data(&e.json)))
            }
            _ => None,
        })
    });
    Ok(Sse::new(items).keep_alive(KeepAlive::default()).into_response())
}

/// The `Last-Event-ID` header, if sent.
fn last_event_id(headers: &HeaderMap) -> Option<Result<i64, ApiError>> {
    let v = headers.get("last-event-id")?;
    Some(v.to_str().ok().and_then(|t| t.trim().parse().ok()).ok_or_else(|| ApiError::field("Last-Event-ID", "must be an event id")))
}
