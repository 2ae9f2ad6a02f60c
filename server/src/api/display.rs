//! The graphical console: the VM's display as RFB (what VNC speaks) over a
//! WebSocket, binary frames both ways, as noVNC connects to it. Opened with
//! a ticket from `POST …/console_sessions` with `{"type":
//! "CONSOLE_TYPE_VNC"}` (single-use, 60 s, bound to the VM and the kind of
//! console) or the tenant's bearer token; the backend hands each viewer a
//! connection of its own to the display (on qemu, the VM's `vnc.sock`).

use axum::Router;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::get;
use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tracing::{debug, info};

use super::console::{ConsoleQuery, admitted, evicted_frame, upgrade};
use super::extract::ApiQuery;
use crate::app::consoles;
use crate::app::consoles::clients::{Hold, evicted};
use crate::app::consoles::tickets::ConsoleType;
use crate::error::ApiError;
use crate::state::AppState;

/// The WebSocket subprotocol noVNC offers for binary frames.
const BINARY: &str = "binary";

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/virtual_machines/{id}/vnc", get(vnc))
}

/// The graphical console over a WebSocket: RFB in binary frames both ways.
/// Authorised by `?ticket=` from a `CONSOLE_TYPE_VNC` console session, or
/// by the bearer token.
#[utoipa::path(get, path = "/api/fulfillment/v1/virtual_machines/{id}/vnc", tag = "virtual machines",
    params(("id" = String, Path, description = "VM id (UUID)"), ("ticket" = Option<String>, Query, description = "Ticket from a CONSOLE_TYPE_VNC console session")),
    responses((status = 101, description = "Switching to the WebSocket protocol"), (status = 400, body = ApiError, description = "Not a WebSocket request, or the VM is not running"),
        (status = 401, body = ApiError), (status = 404, body = ApiError), (status = 410, body = ApiError, description = "The VM is being deleted or was deleted")))]
pub(super) async fn vnc(
    State(s): State<AppState>,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<ConsoleQuery>,
    headers: HeaderMap,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let hold = admitted(&s, &id, q, &headers, ConsoleType::Vnc).await?;
    let ws = upgrade(ws)?.protocols([BINARY]);
    let display = consoles::display(&s, &id).await?;
    info!(vm = %id, "graphical console viewer joined");
    Ok(ws.on_upgrade(move |socket| pump(socket, display, id, hold)))
}

/// RFB from the display to the viewer and back, until either side ends
/// (or a newer connection of the viewer's client takes its place).
async fn pump(mut socket: WebSocket, mut display: vmaas_backend::Display, id: String, mut hold: Option<Hold>) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        tokio::select! {
            () = evicted(&mut hold) => {
                let _ = socket.send(Message::Close(Some(evicted_frame()))).await;
                break;
            }
            n = display.read(&mut buf) => match n {
                Ok(0) | Err(_) => {
                    let _ = socket.send(Message::Close(None)).await;
                    break;
                }
                Ok(n) => if socket.send(Message::Binary(Bytes::copy_from_slice(&buf[..n]))).await.is_err() { break },
            },
            msg = socket.recv() => match msg {
                Some(Ok(Message::Binary(b))) => { if display.write_all(&b).await.is_err() { break } }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                Some(Ok(_)) => {}
            },
        }
    }
    debug!(vm = %id, "graphical console viewer left");
}
