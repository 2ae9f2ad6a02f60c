//! A file server on loopback for image imports: `GET /NAME` answers the
//! file `NAME` of its directory, with its length; `GET /slow/NAME` sends it
//! in 64 KiB pieces 20 ms apart (an import that takes a while);
//! `GET /stall/NAME` sends its headers and then nothing, and
//! `GET /trickle/NAME` one byte a second (hostile sources, each bounded by
//! the file's length and the server's life); `GET /redirect?to=URL`
//! answers 302 to URL; anything else is a 404.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// A running file server.
pub struct FileServer {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FileServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn read(dir: &std::path::Path, name: &str) -> Option<Vec<u8>> {
    if name.contains('/') || name.starts_with('.') {
        return None;
    }
    std::fs::read(dir.join(name)).ok()
}

async fn file(State(dir): State<PathBuf>, Path(name): Path<String>) -> Response {
    match read(&dir, &name) {
        Some(data) => ([(header::CONTENT_LENGTH, data.len().to_string())], data).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn slow(State(dir): State<PathBuf>, Path(name): Path<String>) -> Response {
    let Some(data) = read(&dir, &name) else { return StatusCode::NOT_FOUND.into_response() };
    let len = data.len();
    let pieces: Vec<Vec<u8>> = data.chunks(64 << 10).map(<[u8]>::to_vec).collect();
    let stream = futures::stream::iter(pieces).then(|p| async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        Ok::<_, std::io::Error>(p)
    });
    ([(header::CONTENT_LENGTH, len.to_string())], Body::from_stream(stream)).into_response()
}

async fn stall(State(dir): State<PathBuf>, Path(name): Path<String>) -> Response {
    let Some(data) = read(&dir, &name) else { return StatusCode::NOT_FOUND.into_response() };
    let stream = futures::stream::once(async { std::future::pending::<Result<Vec<u8>, std::io::Error>>().await });
    ([(header::CONTENT_LENGTH, data.len().to_string())], Body::from_stream(stream)).into_response()
}

async fn trickle(State(dir): State<PathBuf>, Path(name): Path<String>) -> Response {
    let Some(data) = read(&dir, &name) else { return StatusCode::NOT_FOUND.into_response() };
    let len = data.len();
    let stream = futures::stream::iter(data).then(|b| async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        Ok::<_, std::io::Error>(vec![b])
    });
    ([(header::CONTENT_LENGTH, len.to_string())], Body::from_stream(stream)).into_response()
}

/// Where `/redirect` sends the client.
#[derive(serde::Deserialize)]
struct To {
    to: String,
}

async fn redirect(axum::extract::Query(q): axum::extract::Query<To>) -> Response {
    (StatusCode::FOUND, [(header::LOCATION, q.to)]).into_response()
}

use futures::StreamExt;

impl FileServer {
    /// Serves `dir` on a free loopback port.
    pub async fn start(dir: PathBuf) -> Self {
        let app = Router::new()
            .route("/redirect", get(redirect))
            .route("/slow/{name}", get(slow))
            .route("/stall/{name}", get(stall))
            .route("/trickle/{name}", get(trickle))
            .route("/{name}", get(file))
            .with_state(dir);
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { url: format!("http://{addr}"), task }
    }
}

/// The SHA-256 of file `path`, in lower-case hex (`sha256sum`'s).
pub fn sha256_of(path: &std::path::Path) -> String {
    let out = std::process::Command::new("sha256sum").arg(path).output().expect("sha256sum");
    assert!(out.status.success(), "sha256sum {}: {}", path.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap_or_default().to_owned()
}
