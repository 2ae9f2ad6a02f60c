//! A played virt-api: KubeVirt's aggregated API server for
//! `subresources.kubevirt.io/v1`, registered with the real kube-apiserver
//! as an `APIService` behind a `Service` and an `EndpointSlice`, the way
//! KubeVirt installs it. It serves the `console` subresource of the VMIs
//! that exist (a serial line that greets with the VMI's name, echoes what
//! is typed and answers a line with a prompt), and nothing else.
//!
//! It runs in the test process on a unix socket; `socat` in the cluster's
//! namespace terminates TLS at [`AGGREGATED_ADDRESS`]`:8443` and passes the
//! stream on, so the aggregator's packets never leave that namespace.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use reqwest::Method;
use serde_json::{Value, json};

use crate::k8s::{AGGREGATED_ADDRESS, Cluster, KubeApi};

/// The group and version virt-api serves.
const GROUP_VERSION: &str = "subresources.kubevirt.io/v1";

/// Serves the played virt-api for `cluster` (made by
/// [`Cluster::start_aggregated`]) and waits until the aggregator reports
/// it available.
pub async fn serve(cluster: &mut Cluster) {
    let d = cluster.dir().to_owned();
    let (sock, cert, key) = (d.join("virt-api.sock"), d.join("virt-api.crt"), d.join("virt-api.key"));
    let ok = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=virt-api.kubevirt.svc", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(Stdio::null())
        .status()
        .expect("openssl");
    assert!(ok.success(), "a certificate for virt-api");
    let netns = cluster.netns.as_ref().expect("an aggregated cluster (Cluster::start_aggregated)");
    let mut tls = netns.tls_to_unix(&format!("{AGGREGATED_ADDRESS}:8443"), &cert, &key.display().to_string(), &sock);
    let listener = tokio::net::UnixListener::bind(&sock).expect("the virt-api socket");
    let app = Router::new()
        .route(&format!("/apis/{GROUP_VERSION}"), get(discovery))
        .route(&format!("/apis/{GROUP_VERSION}/namespaces/{{ns}}/virtualmachineinstances/{{name}}/console"), get(console))
        .with_state(cluster.api());
    cluster.keep_task(tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    }));
    cluster.keep(&mut tls, "socat-virt-api.log");
    register(&cluster.api()).await;
}

/// What KubeVirt's install makes for virt-api: its namespace, Service,
/// EndpointSlice (the test plays the endpoint controller) and APIService.
async fn register(k: &KubeApi) {
    k.namespace("kubevirt").await;
    let objects = [
        (
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "virt-api", "namespace": "kubevirt"},
            "spec": {"ports": [{"port": 443, "targetPort": 8443, "protocol": "TCP"}]}}),
            "services",
        ),
        (
            json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "virt-api-1", "namespace": "kubevirt", "labels": {"kubernetes.io/service-name": "virt-api"}},
            "addressType": "IPv4", "endpoints": [{"addresses": [AGGREGATED_ADDRESS], "conditions": {"ready": true}}],
            "ports": [{"port": 8443, "protocol": "TCP"}]}),
            "endpointslices",
        ),
        (
            json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": "v1.subresources.kubevirt.io"},
            "spec": {"group": "subresources.kubevirt.io", "version": "v1", "service": {"namespace": "kubevirt", "name": "virt-api", "port": 443},
                "insecureSkipTLSVerify": true, "groupPriorityMinimum": 1000, "versionPriority": 15}}),
            "apiservices",
        ),
    ];
    for (o, plural) in &objects {
        let (st, body) = k.apply(o, plural, "virt-operator").await;
        assert!(st < 300, "{plural}: {st} {body}");
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, s) = k.request(Method::GET, "/apis/apiregistration.k8s.io/v1/apiservices/v1.subresources.kubevirt.io", None, None).await;
        let conditions = s["status"]["conditions"].as_array().cloned().unwrap_or_default();
        if conditions.iter().any(|c| c["type"] == "Available" && c["status"] == "True") {
            return;
        }
        assert!(Instant::now() < deadline, "virt-api not available to the aggregator: {s:#}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The discovery document the aggregator checks.
async fn discovery() -> axum::Json<Value> {
    axum::Json(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": GROUP_VERSION,
        "resources": [{"name": "virtualmachineinstances/console", "singularName": "", "namespaced": true,
            "kind": "VirtualMachineInstance", "verbs": ["get"]}]}))
}

/// The console of VMI `ns/name`: 404 when there is no such VMI.
async fn console(State(k): State<KubeApi>, Path((ns, name)): Path<(String, String)>, ws: WebSocketUpgrade) -> Response {
    let (st, _) = k.request(Method::GET, &format!("/apis/kubevirt.io/v1/namespaces/{ns}/virtualmachineinstances/{name}"), None, None).await;
    if st != 200 {
        let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404,
            "message": format!("virtualmachineinstance {ns}/{name} not found")});
        return (StatusCode::NOT_FOUND, axum::Json(status)).into_response();
    }
    ws.protocols(["plain.kubevirt.io"]).on_upgrade(move |socket| serial(socket, format!("{ns}/{name}")))
}

/// A serial line: a greeting naming the VMI, what is typed echoed, and a
/// prompt after each line.
async fn serial(mut socket: WebSocket, vmi: String) {
    let greeting = format!("\r\nDebian GNU/Linux 12 {vmi} ttyS0\r\n\r\nlogin: ");
    if socket.send(Message::Binary(greeting.into_bytes().into())).await.is_err() {
        return;
    }
    while let Some(Ok(msg)) = socket.recv().await {
        let typed = match msg {
            Message::Binary(b) => b.to_vec(),
            Message::Text(t) => t.as_str().as_bytes().to_vec(),
            Message::Close(_) => break,
            _ => continue,
        };
        let mut answer = Vec::new();
        for b in typed {
            if b == b'\r' || b == b'\n' {
                answer.extend_from_slice(b"\r\nPassword: ");
            } else {
                answer.push(b);
            }
        }
        if socket.send(Message::Binary(answer.into())).await.is_err() {
            break;
        }
    }
}
