//! The HTTP server loop, with the limits that keep one client from taking
//! the server down ([`conns`]): a connection cap per client address below
//! the global one, and room made for new clients by letting go of the
//! oldest connection that never got an answer; a deadline for a
//! connection's first bytes and for each request's headers (also the idle
//! timeout between requests on a kept-alive HTTP/1.1 connection); an HTTP/2
//! connection closed once it has had no request in flight for the idle
//! limit (and pinged meanwhile); and a bounded wait for connections at
//! shutdown. Body size and the whole body's read time are limited by
//! layers of the router. Each connection speaks HTTP/1.1 or HTTP/2 (gRPC),
//! decided here before hyper sees it: with prior knowledge in plain text
//! (the client preface), by ALPN over TLS. With TLS, the handshake must
//! also end within the header deadline.

pub mod conns;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::http::Request;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::{debug, warn};

use self::conns::{Admission, Conns, Ticket};
use crate::error::ApiError;

/// Limits of the HTTP server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// Time a client has to send a connection's first bytes and a request's
    /// headers, and to start the next request on a kept-alive connection.
    pub header_timeout: Duration,
    /// Time a client has to send a request's whole body.
    pub body_timeout: Duration,
    /// Connections served at once.
    pub max_connections: usize,
    /// Connections one client address may have open at once; more are answered 503.
    pub max_connections_per_client: usize,
    /// How long an HTTP/2 connection with no request in flight stays open.
    pub idle_timeout: Duration,
    /// Largest request body, in bytes (413 beyond).
    pub max_body_bytes: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            max_connections: 1024,
            max_connections_per_client: 256,
            idle_timeout: Duration::from_secs(60),
            max_body_bytes: 1 << 20,
        }
    }
}

/// Requests one HTTP/2 connection (gRPC's transport) may have open at once.
const H2_STREAMS: u32 = 256;

/// How long open connections get to finish at shutdown.
const DRAIN: Duration = Duration::from_secs(5);

/// The answer to a connection over a cap: a 503 with the API's error body.
fn busy(why: &str) -> Vec<u8> {
    let e = ApiError::unavailable(why);
    let body = serde_json::to_string(&e).unwrap_or_default();
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: {}\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        crate::error::UNAVAILABLE_RETRY.as_secs().max(1),
        body.len()
    )
    .into_bytes()
}

/// Serves `app` on `listener` within `limits` until `shutdown` resolves,
/// over TLS when `tls` is given.
pub async fn serve(
    listener: TcpListener,
    app: axum::Router,
    limits: HttpLimits,
    tls: Option<tokio_rustls::TlsAcceptor>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    let open = Conns::new(limits.max_connections, limits.max_connections_per_client);
    let mut conns = JoinSet::new();
    let mut stop = stop_rx.clone();
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stop.changed() => break,
        };
        while conns.try_join_next().is_some() {}
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of file descriptors, usually: wait instead of spinning.
                warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let ticket = match open.admit(peer.ip()) {
            Admission::Admitted(t) => t,
            refused => {
                debug!(%peer, ?refused, "connection refused");
                conns.spawn(refuse(stream, matches!(refused, Admission::ClientFull)));
                continue;
            }
        };
        let (app, stop, tls) = (app.clone(), stop_rx.clone(), tls.clone());
        conns.spawn(async move {
            let _ = stream.set_nodelay(true);
            let evict = ticket.evict.clone();
            tokio::select! {
                _ = accept(stream, peer, app, limits, stop, tls, &ticket) => {}
                _ = evict.notified() => debug!(%peer, "connection let go to make room: it was never answered"),
            }
        });
    }
    if tokio::time::timeout(DRAIN, async { while conns.join_next().await.is_some() {} }).await.is_err() {
        conns.abort_all();
    }
    Ok(())
}

/// Takes the connection from its first bytes on: the TLS handshake or the
/// client's preface decides the protocol, within the header deadline.
async fn accept(
    stream: TcpStream,
    peer: SocketAddr,
    app: axum::Router,
    limits: HttpLimits,
    stop: watch::Receiver<bool>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    ticket: &Ticket,
) {
    let Some(tls) = tls else {
        match tokio::time::timeout(limits.header_timeout, protocol_of(&stream)).await {
            Ok(Some(h2)) => connection(stream, peer, app, limits, stop, h2, ticket).await,
            Ok(None) => debug!(%peer, "the connection closed before a request"),
            Err(_) => debug!(%peer, "no request in time: closed"),
        }
        return;
    };
    match tokio::time::timeout(limits.header_timeout, tls.accept(stream)).await {
        Ok(Ok(stream)) => {
            let h2 = stream.get_ref().1.alpn_protocol() == Some(&b"h2"[..]);
            connection(stream, peer, app, limits, stop, h2, ticket).await;
        }
        Ok(Err(e)) => debug!(%peer, error = %e, "TLS handshake failed"),
        Err(_) => debug!(%peer, "TLS handshake timed out"),
    }
}

/// HTTP/2's client preface.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Whether a plain connection speaks HTTP/2 (its first bytes are the
/// preface) or HTTP/1.1, from what it sent so far; `None` if it closed.
/// Waits until the bytes decide it (bounded by the caller's deadline).
async fn protocol_of(stream: &TcpStream) -> Option<bool> {
    let mut buf = [0u8; PREFACE.len()];
    loop {
        let n = stream.peek(&mut buf).await.ok().filter(|n| *n > 0)?;
        if buf[..n] != PREFACE[..n] {
            return Some(false);
        }
        if n == PREFACE.len() {
            return Some(true);
        }
        // A prefix of the preface: wait for more bytes.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Answers a connection that may not be served 503, with the API's error body.
async fn refuse(mut stream: TcpStream, client_full: bool) {
    let why =
        if client_full { "too many open connections from your address: retry later" } else { "too many open connections: retry later" };
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(&busy(why))).await;
}

/// Requests in flight on one connection, and when the last one ended
/// (milliseconds since the connection opened: no lock per request).
#[derive(Debug)]
struct Activity {
    in_flight: AtomicUsize,
    opened: Instant,
    last_ms: AtomicU64,
}

impl Activity {
    fn new() -> Arc<Self> {
        Arc::new(Self { in_flight: AtomicUsize::new(0), opened: Instant::now(), last_ms: AtomicU64::new(0) })
    }

    fn begin(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(self.clone())
    }

    /// How long the connection has had no request in flight (zero while one is).
    fn idle(&self) -> Duration {
        if self.in_flight.load(Ordering::SeqCst) > 0 {
            return Duration::ZERO;
        }
        self.opened.elapsed().saturating_sub(Duration::from_millis(self.last_ms.load(Ordering::SeqCst)))
    }
}

/// One request in flight, until its response's body is over.
#[derive(Debug)]
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let now = u64::try_from(self.0.opened.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.0.last_ms.store(now, Ordering::SeqCst);
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A response body that keeps its request counted as in flight until it ends.
struct Tracked {
    inner: axum::body::Body,
    _in_flight: InFlight,
}

impl hyper::body::Body for Tracked {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Serves HTTP/1.1 or HTTP/2 (`h2`) on one connection (plain or TLS) until
/// it ends, stays idle too long, or the server stops.
async fn connection<I>(
    stream: I,
    peer: SocketAddr,
    app: axum::Router,
    limits: HttpLimits,
    mut stop: watch::Receiver<bool>,
    h2: bool,
    ticket: &Ticket,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let activity = Activity::new();
    let (seen, answered, mark) = (activity.clone(), ticket.answered.clone(), ticket.mark());
    // Each request knows its client's address (the audit log records it),
    // and its connection (an event stream takes it off the caps).
    let service = hyper::service::service_fn(move |mut req: Request<Incoming>| {
        req.extensions_mut().insert(axum::extract::ConnectInfo(peer));
        req.extensions_mut().insert(mark.clone());
        let (in_flight, app, answered) = (seen.begin(), app.clone(), answered.clone());
        async move {
            let rsp = tower::ServiceExt::oneshot(app, req).await.unwrap_or_else(|e: Infallible| match e {});
            answered.store(true, Ordering::Relaxed);
            Ok::<_, Infallible>(rsp.map(|inner| Tracked { inner, _in_flight: in_flight }))
        }
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(limits.header_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(H2_STREAMS)
        .keep_alive_interval(Some(limits.header_timeout))
        .keep_alive_timeout(limits.header_timeout);
    let builder = if h2 { builder.http2_only() } else { builder.http1_only() };
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
    let mut conn = std::pin::pin!(conn);
    let mut tick = tokio::time::interval(Duration::from_secs(1).min(limits.idle_timeout));
    loop {
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    debug!(%peer, error = %e, "connection ended with an error");
                }
                return;
            }
            _ = tick.tick(), if h2 => {
                if activity.idle() >= limits.idle_timeout {
                    debug!(%peer, "HTTP/2 connection idle: closed");
                    break;
                }
            }
            _ = stop.changed() => break,
        }
    }
    conn.as_mut().graceful_shutdown();
    let _ = tokio::time::timeout(DRAIN, conn).await;
}
