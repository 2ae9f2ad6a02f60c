//! A forward proxy on loopback, one per registry pull, through which the
//! OCI client makes every request (the manifest, the token realm, each
//! blob, and every redirect it follows on its own). The client builds its
//! own HTTP stack, so [`SourcePolicy`] is enforced here instead: each
//! target host is resolved once, only allowed addresses are dialled (never
//! the server's own sockets), and the first refusal is kept so the pull can
//! tell a refused address from a failed registry. The proxy asks a secret
//! of its one client, so nothing else on the host can use it.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use base64::prelude::{BASE64_STANDARD, Engine as _};
use bytes::Bytes;
use http_body_util::{Either, Empty};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, PROXY_AUTHORIZATION};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tracing::{debug, warn};

use crate::sources::SourcePolicy;

type Body = Either<Empty<Bytes>, Incoming>;

/// A running proxy; stopped on drop.
pub(crate) struct FetchProxy {
    /// `http://USER:SECRET@127.0.0.1:PORT`, for the client's proxy settings.
    pub url: String,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

struct State {
    policy: Arc<SourcePolicy>,
    /// The `Proxy-Authorization` the client must send.
    auth: HeaderValue,
    /// Why the first refused target was refused.
    refused: Mutex<Option<String>>,
}

impl FetchProxy {
    /// Listens on loopback for one client, dialling only where `policy` allows.
    pub(crate) async fn start(policy: Arc<SourcePolicy>) -> std::io::Result<Self> {
        let listener = TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).await?;
        let at = listener.local_addr()?;
        let secret = uuid::Uuid::new_v4().simple().to_string();
        // Basic auth of `pull:SECRET`, as reqwest sends it for a proxy URL with user info.
        let auth =
            HeaderValue::from_str(&format!("Basic {}", BASE64_STANDARD.encode(format!("pull:{secret}")))).map_err(std::io::Error::other)?;
        let state = Arc::new(State { policy, auth, refused: Mutex::new(None) });
        let task = tokio::spawn(serve(listener, state.clone()));
        Ok(Self { url: format!("http://pull:{secret}@{at}"), state, task })
    }

    /// Why a target was refused, if one was.
    pub(crate) fn refused(&self) -> Option<String> {
        self.state.refused.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Drop for FetchProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(listener: TcpListener, state: Arc<State>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let state = state.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| handle(req, state.clone()));
            let conn = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).with_upgrades();
            if let Err(e) = conn.await {
                debug!(error = %e, "fetch proxy connection ended");
            }
        });
    }
}

fn answer(status: StatusCode) -> Response<Body> {
    let mut r = Response::new(Either::Left(Empty::new()));
    *r.status_mut() = status;
    r
}

async fn handle(mut req: Request<Incoming>, state: Arc<State>) -> Result<Response<Body>, Infallible> {
    if req.headers().get(PROXY_AUTHORIZATION) != Some(&state.auth) {
        return Ok(answer(StatusCode::PROXY_AUTHENTICATION_REQUIRED));
    }
    let Some(authority) = req.uri().authority().cloned() else { return Ok(answer(StatusCode::BAD_REQUEST)) };
    let default_port = if req.method() == Method::CONNECT { 443 } else { 80 };
    let port = authority.port_u16().unwrap_or(default_port);
    let stream = match dial(&state, authority.host(), port).await {
        Ok(s) => s,
        Err(status) => return Ok(answer(status)),
    };
    if req.method() == Method::CONNECT {
        tokio::spawn(async move {
            match hyper::upgrade::on(req).await {
                Ok(up) => {
                    let _ = tokio::io::copy_bidirectional(&mut TokioIo::new(up), &mut { stream }).await;
                }
                Err(e) => debug!(error = %e, "fetch proxy tunnel not upgraded"),
            }
        });
        return Ok(answer(StatusCode::OK));
    }
    // A plain-HTTP request in absolute form: sent on in origin form.
    let path = req.uri().path_and_query().map_or("/", |p| p.as_str()).to_owned();
    *req.uri_mut() = match path.parse() {
        Ok(u) => u,
        Err(_) => return Ok(answer(StatusCode::BAD_REQUEST)),
    };
    req.headers_mut().remove(PROXY_AUTHORIZATION);
    req.headers_mut().remove("proxy-connection");
    let Ok((mut send, conn)) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await else {
        return Ok(answer(StatusCode::BAD_GATEWAY));
    };
    tokio::spawn(conn);
    Ok(match send.send_request(req).await {
        Ok(rsp) => rsp.map(Either::Right),
        Err(e) => {
            debug!(error = %e, "fetch proxy request failed");
            answer(StatusCode::BAD_GATEWAY)
        }
    })
}

/// A connection to `host:port` at an address the policy allows; refusals
/// are kept, and answered 403, failures 502.
async fn dial(state: &State, host: &str, port: u16) -> Result<TcpStream, StatusCode> {
    let addrs = match crate::sources::sockets(host, port).await {
        Ok(a) => a,
        Err(e) => {
            debug!(host, error = %e, "fetch proxy cannot resolve");
            return Err(StatusCode::BAD_GATEWAY);
        }
    };
    let mut refused = None;
    for a in addrs {
        match state.policy.check_socket(a) {
            Ok(()) => match tokio::time::timeout(state.policy.limits.read, TcpStream::connect(a)).await {
                Ok(Ok(s)) => return Ok(s),
                Ok(Err(e)) => debug!(%a, error = %e, "fetch proxy cannot connect"),
                Err(_) => debug!(%a, "fetch proxy connect timed out"),
            },
            Err(e) => refused = refused.or(Some(format!("{host}:{port}: {e}"))),
        }
    }
    let Some(why) = refused else { return Err(StatusCode::BAD_GATEWAY) };
    warn!(reason = %why, "registry fetch refused by the image source policy");
    state.refused.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(why);
    Err(StatusCode::FORBIDDEN)
}
