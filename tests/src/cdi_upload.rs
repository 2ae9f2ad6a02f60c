//! Played CDI uploads: cdi-apiserver's `UploadTokenRequest`
//! (`upload.cdi.kubevirt.io/v1beta1`, aggregated behind the real
//! kube-apiserver, [`crate::aggregated`]) and CDI's upload proxy, which
//! takes a file with such a token (TLS on a host loopback port, `socat` in
//! front of a unix socket), keeps it for the test to compare, and fills the
//! DataVolume as CDI would. A token is for one PVC and used once.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use reqwest::Method;
use serde_json::{Value, json};

use crate::aggregated::{Aggregated, certificate};
use crate::k8s::{Cluster, KubeApi};

const GROUP_VERSION: &str = "upload.cdi.kubevirt.io/v1beta1";

/// Files the played proxy took, by `namespace/pvc`.
pub type Received = Arc<Mutex<HashMap<String, Vec<u8>>>>;

/// The played upload proxy, as a server is pointed at it.
pub struct UploadProxy {
    /// `https://127.0.0.1:PORT`.
    pub url: String,
    /// Its certificate, to trust (`--cdi-upload-proxy-ca`).
    pub ca: PathBuf,
    /// What it took.
    pub received: Received,
}

#[derive(Clone)]
struct Played {
    k: KubeApi,
    /// Unused tokens: the PVC each is for.
    tokens: Arc<Mutex<HashMap<String, (String, String)>>>,
    received: Received,
}

/// Serves the played cdi-apiserver and upload proxy for `cluster` (made by
/// [`Cluster::start_aggregated`]).
pub async fn serve(cluster: &mut Cluster) -> UploadProxy {
    let played = Played { k: cluster.api(), tokens: Arc::default(), received: Arc::default() };
    let api = Router::new()
        .route(&format!("/apis/{GROUP_VERSION}"), get(discovery))
        .route(&format!("/apis/{GROUP_VERSION}/namespaces/{{ns}}/uploadtokenrequests"), post(token))
        .with_state(played.clone());
    let a = Aggregated { namespace: "cdi", service: "cdi-api", port: 8444, group: "upload.cdi.kubevirt.io", version: "v1beta1" };
    crate::aggregated::serve(cluster, &a, api).await;

    let proxy =
        Router::new().route("/v1beta1/upload", post(upload)).layer(axum::extract::DefaultBodyLimit::disable()).with_state(played.clone());
    let sock = cluster.dir().join("cdi-uploadproxy.sock");
    let listener = tokio::net::UnixListener::bind(&sock).expect("the upload proxy's socket");
    cluster.keep_task(tokio::spawn(async move {
        let _ = axum::serve(listener, proxy).await;
    }));
    let (cert, key) = certificate(cluster.dir(), "cdi-uploadproxy");
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port");
    let mut tls = crate::netns::tls_to_unix(Command::new("socat"), &format!("127.0.0.1:{port}"), &cert, &key, &sock);
    cluster.keep(&mut tls, "socat-uploadproxy.log");
    let url = format!("https://127.0.0.1:{port}");
    wait_listening(port).await;
    UploadProxy { url, ca: cert, received: played.received }
}

/// Waits until something listens on loopback port `port`.
async fn wait_listening(port: u16) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        assert!(std::time::Instant::now() < deadline, "the upload proxy's socat never listened on {port}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

async fn discovery() -> axum::Json<Value> {
    axum::Json(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": GROUP_VERSION,
        "resources": [{"name": "uploadtokenrequests", "singularName": "uploadtokenrequest", "namespaced": true,
            "kind": "UploadTokenRequest", "verbs": ["create"]}]}))
}

/// A token for the PVC the request names.
async fn token(State(p): State<Played>, Path(ns): Path<String>, body: Bytes) -> Response {
    let req: Value = serde_json::from_slice(&body).unwrap_or_default();
    let Some(pvc) = req["spec"]["pvcName"].as_str().map(str::to_owned) else {
        let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 400, "message": "spec.pvcName is required"});
        return (StatusCode::BAD_REQUEST, axum::Json(status)).into_response();
    };
    let token = uuid::Uuid::new_v4().simple().to_string();
    p.tokens.lock().expect("tokens").insert(token.clone(), (ns, pvc));
    let mut answer = req.clone();
    answer["status"] = json!({ "token": token });
    (StatusCode::CREATED, axum::Json(answer)).into_response()
}

/// The upload: a valid token's PVC is filled with the body.
async fn upload(State(p): State<Played>, headers: HeaderMap, body: Bytes) -> Response {
    let bearer = headers.get("authorization").and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    let Some((ns, pvc)) = bearer.and_then(|t| p.tokens.lock().expect("tokens").remove(t)) else {
        return (StatusCode::UNAUTHORIZED, "unknown or used token").into_response();
    };
    p.received.lock().expect("received").insert(format!("{ns}/{pvc}"), body.to_vec());
    let dv = json!({"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume", "metadata": {"name": pvc, "namespace": ns}});
    let (st, _) = p.k.request(Method::GET, &KubeApi::path_of(&dv, "datavolumes"), None, None).await;
    if st != 200 {
        return (StatusCode::NOT_FOUND, "no DataVolume for that PVC").into_response();
    }
    p.k.write_status(&dv, "datavolumes", json!({"phase": "Succeeded", "progress": "100.0%"})).await;
    StatusCode::OK.into_response()
}
