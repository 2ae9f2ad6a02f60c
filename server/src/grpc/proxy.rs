//! `ConsoleProxy.Connect` of `osac.public.v1`: a console's bytes both ways
//! on one bidirectional gRPC stream. The caller's bearer token is a ticket
//! from `ConsoleSessions.Create` (single-use, 60 s), which names the VM and
//! the kind of console: the serial console (what it printed so far first)
//! or the display (RFB, as VNC speaks it). The first response is the status
//! CONNECTED, then the console's output; the last is DISCONNECTED when the
//! console closes. A console that cannot be opened is the call's status
//! (UNAUTHENTICATED, FAILED_PRECONDITION), before any response.

use std::pin::Pin;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor, MethodDescriptor, ReflectMessage, Value as Field};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tonic::{Status, Streaming};
use tracing::{debug, info};

use crate::app::consoles;
use crate::app::consoles::clients::{EVICTED, Hold, evicted};
use crate::app::consoles::tickets::{ConsoleType, Used};
use crate::state::AppState;

/// The responses of a connection.
pub type ProxyStream = Pin<Box<dyn Stream<Item = Result<DynamicMessage, Status>> + Send>>;

/// Typed input waiting to reach the console.
const INPUT_QUEUE: usize = 64;

/// A console's output as a stream of chunks, and a way to type.
struct Pipe {
    output: Pin<Box<dyn Stream<Item = Bytes> + Send>>,
    input: mpsc::Sender<Bytes>,
}

/// Connects the stream `req` to the console its ticket opens.
pub async fn connect(
    state: AppState,
    method: MethodDescriptor,
    req: tonic::Request<Streaming<DynamicMessage>>,
) -> Result<tonic::Response<ProxyStream>, Status> {
    let (Used { vm, kind, .. }, hold) = admitted(&state, req.metadata(), method.parent_pool()).await?;
    let pipe = open(&state, &vm, kind).await?;
    info!(vm = %vm, console = ?kind, "console proxied over gRPC");
    tokio::spawn(typed(req.into_inner(), method.input(), pipe.input, vm));
    Ok(tonic::Response::new(responses(events(pipe.output, hold), method.output())))
}

/// What the caller's ticket (its bearer token) opens, using the ticket up,
/// and the connection's hold on its client (with a client id); the VM must
/// not be being deleted.
async fn admitted(state: &AppState, meta: &tonic::metadata::MetadataMap, pool: &DescriptorPool) -> Result<(Used, Option<Hold>), Status> {
    let to_status = |e| super::status::from_api(pool, e);
    let bearer = meta.get("authorization").and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer ")).map(str::trim);
    let ticket =
        bearer.ok_or_else(|| Status::unauthenticated("send the ticket of a console session as `authorization: Bearer <ticket>`"))?;
    consoles::admitted_by_ticket(state, ticket).await.map_err(to_status)
}

/// What the console's `output` becomes for the client.
enum Event {
    /// What it printed.
    Output(Bytes),
    /// The end, and why.
    Ended(&'static str),
}

/// `output`'s chunks, then why it ended: it closed, or a newer connection
/// of the client took `hold`'s place.
fn events(output: Pin<Box<dyn Stream<Item = Bytes> + Send>>, hold: Option<Hold>) -> impl Stream<Item = Event> + Send {
    futures::stream::unfold(Some((output, hold)), |state| async move {
        let (mut output, mut hold) = state?;
        tokio::select! {
            chunk = output.next() => Some(match chunk {
                Some(c) => (Event::Output(c), Some((output, hold))),
                None => (Event::Ended("the console closed"), None),
            }),
            () = evicted(&mut hold) => Some((Event::Ended(EVICTED), None)),
        }
    })
}

/// VM `vm`'s `kind` of console, from the backend.
async fn open(state: &AppState, vm: &str, kind: ConsoleType) -> Result<Pipe, Status> {
    let to_status = |e: crate::error::ApiError| Status::failed_precondition(e.message);
    match kind {
        ConsoleType::Serial => Ok(serial(consoles::serial(state, vm).await.map_err(to_status)?)),
        ConsoleType::Vnc => Ok(display(consoles::display(state, vm).await.map_err(to_status)?)),
    }
}

/// The responses: CONNECTED, each chunk of output, DISCONNECTED and why.
fn responses(events: impl Stream<Item = Event> + Send + 'static, response: MessageDescriptor) -> ProxyStream {
    let out = Out::new(response);
    let connected = futures::stream::once(futures::future::ready(Ok(out.status("CONSOLE_CONNECTION_STATE_CONNECTED", ""))));
    let printed = events.map(move |e| {
        Ok(match e {
            Event::Output(chunk) => out.output(chunk),
            Event::Ended(why) => out.status("CONSOLE_CONNECTION_STATE_DISCONNECTED", why),
        })
    });
    Box::pin(connected.chain(printed))
}

/// The serial console as a pipe: its history, then what it prints.
fn serial(console: vmaas_backend::Console) -> Pipe {
    let history = futures::stream::iter((!console.history.is_empty()).then(|| Bytes::from(console.history)));
    let live = futures::stream::unfold(console.output, |mut rx| async move {
        loop {
            match rx.recv().await {
                Ok(chunk) => return Some((chunk, rx)),
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
    Pipe { output: Box::pin(history.chain(live)), input: console.input }
}

/// The display as a pipe: its bytes, and a task writing what is typed.
fn display(display: vmaas_backend::Display) -> Pipe {
    let (reader, mut writer) = tokio::io::split(display);
    let (input, mut typed) = mpsc::channel::<Bytes>(INPUT_QUEUE);
    tokio::spawn(async move {
        while let Some(b) = typed.recv().await {
            if writer.write_all(&b).await.is_err() {
                break;
            }
        }
    });
    let output = futures::stream::unfold(reader, |mut r| async move {
        let mut buf = vec![0u8; 64 * 1024];
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Bytes::from(buf), r))
            }
        }
    });
    Pipe { output: Box::pin(output), input }
}

/// Moves what the client sends (`input.data`) to the console until it ends.
async fn typed(mut stream: Streaming<DynamicMessage>, request: MessageDescriptor, input: mpsc::Sender<Bytes>, vm: String) {
    let data = request.get_field_by_name("input").and_then(|f| f.kind().as_message().and_then(|m| m.get_field_by_name("data")));
    while let Ok(Some(msg)) = stream.message().await {
        let bytes = msg
            .get_field_by_name("input")
            .and_then(|i| i.as_message().zip(data.as_ref()).and_then(|(m, d)| m.get_field(d).as_bytes().cloned()));
        if let Some(b) = bytes.filter(|b| !b.is_empty())
            && input.send(b).await.is_err()
        {
            break;
        }
    }
    debug!(vm = %vm, "console proxy client stopped sending");
}

/// Builds the responses.
#[derive(Clone)]
struct Out {
    response: MessageDescriptor,
}

impl Out {
    fn new(response: MessageDescriptor) -> Self {
        Self { response }
    }

    /// A response whose `field` is a message of that field's type with `set` applied.
    fn with(&self, field: &str, set: impl FnOnce(&mut DynamicMessage)) -> DynamicMessage {
        let mut out = DynamicMessage::new(self.response.clone());
        if let Some(kind) = self.response.get_field_by_name(field).and_then(|f| f.kind().as_message().cloned()) {
            let mut inner = DynamicMessage::new(kind);
            set(&mut inner);
            out.set_field_by_name(field, Field::Message(inner));
        }
        out
    }

    fn output(&self, chunk: Bytes) -> DynamicMessage {
        self.with("output", |m| m.set_field_by_name("data", Field::Bytes(chunk)))
    }

    fn status(&self, state: &str, message: &str) -> DynamicMessage {
        self.with("status", |m| {
            if let Some(n) =
                m.descriptor().get_field_by_name("state").and_then(|f| f.kind().as_enum().and_then(|e| e.get_value_by_name(state)))
            {
                m.set_field_by_name("state", Field::EnumNumber(n.number()));
            }
            m.set_field_by_name("message", Field::String(message.to_owned()));
        })
    }
}
