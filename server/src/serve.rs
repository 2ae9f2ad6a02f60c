//! The HTTP server loop, with the limits that keep one client from taking
//! the server down: a connection cap, a deadline for each request's
//! headers (which is also the idle timeout between requests on a kept-alive
//! connection), and a bounded wait for connections at shutdown. Body size
//! and body read time are limited by layers of the router. Each connection
//! speaks HTTP/1.1 or HTTP/2 (gRPC): with prior knowledge in plain text, by
//! ALPN over TLS. With TLS, the handshake must also end within the header
//! deadline.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::http::StatusCode;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::{debug, warn};

use crate::error::{ApiError, Code};

/// Limits of the HTTP server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// Time a client has to send a request's headers, and to start the next
    /// request on a kept-alive connection.
    pub header_timeout: Duration,
    /// Time a client has to send a request's body.
    pub body_timeout: Duration,
    /// Connections served at once; more are answered 503 and closed.
    pub max_connections: usize,
    /// Largest request body, in bytes (413 beyond).
    pub max_body_bytes: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            max_connections: 1024,
            max_body_bytes: 1 << 20,
        }
    }
}

/// Requests one HTTP/2 connection (gRPC's transport) may have open at once.
const H2_STREAMS: u32 = 256;

/// How long open connections get to finish at shutdown.
const DRAIN: Duration = Duration::from_secs(5);

/// The answer to a connection over the cap: a 503 with the API's error body.
fn busy() -> Vec<u8> {
    let e = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, Code::Unavailable, "too many open connections: retry later");
    let body = serde_json::to_string(&e).unwrap_or_default();
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
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
    let open = Arc::new(AtomicUsize::new(0));
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
        if open.load(Ordering::SeqCst) >= limits.max_connections {
            debug!(%peer, "connection refused: at the connection cap");
            conns.spawn(refuse(stream));
            continue;
        }
        open.fetch_add(1, Ordering::SeqCst);
        let (app, open, stop, tls) = (app.clone(), open.clone(), stop_rx.clone(), tls.clone());
        conns.spawn(async move {
            let _ = stream.set_nodelay(true);
            match tls {
                None => connection(stream, peer, app, limits, stop).await,
                Some(tls) => match tokio::time::timeout(limits.header_timeout, tls.accept(stream)).await {
                    Ok(Ok(stream)) => connection(stream, peer, app, limits, stop).await,
                    Ok(Err(e)) => debug!(%peer, error = %e, "TLS handshake failed"),
                    Err(_) => debug!(%peer, "TLS handshake timed out"),
                },
            }
            open.fetch_sub(1, Ordering::SeqCst);
        });
    }
    if tokio::time::timeout(DRAIN, async { while conns.join_next().await.is_some() {} }).await.is_err() {
        conns.abort_all();
    }
    Ok(())
}

async fn refuse(mut stream: TcpStream) {
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(&busy())).await;
}

/// Serves HTTP on one connection (plain or TLS) until it ends or the server stops.
async fn connection<I>(stream: I, peer: std::net::SocketAddr, app: axum::Router, limits: HttpLimits, mut stop: watch::Receiver<bool>)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    // Each request knows its client's address (the audit log records it).
    let app = tower::ServiceExt::map_request(app, move |mut req: axum::http::Request<hyper::body::Incoming>| {
        req.extensions_mut().insert(axum::extract::ConnectInfo(peer));
        req
    });
    let service = TowerToHyperService::new(app);
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(limits.header_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(H2_STREAMS)
        .keep_alive_interval(Some(limits.header_timeout))
        .keep_alive_timeout(limits.header_timeout);
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => {
            if let Err(e) = r {
                debug!(error = %e, "connection ended with an error");
            }
        }
        _ = stop.changed() => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}
