//! A played virt-api: KubeVirt's aggregated API server for
//! `subresources.kubevirt.io/v1`, registered with the real kube-apiserver
//! as an `APIService` behind a `Service` and an `EndpointSlice`, the way
//! KubeVirt installs it. It serves the `console` subresource of the VMIs
//! that exist (a serial line that greets with the VMI's name, echoes what
//! is typed and answers a line with a prompt) and their `vnc` subresource
//! (as virt-api does, the VNC socket of the QEMU that runs the VMI: here a
//! real QEMU the test starts and names with [`show`]), and their `pause`
//! and `unpause`, which it plays with virt-handler's part (the VMI's
//! `Paused` condition), and nothing else.
//!
//! It runs in the test process ([`crate::aggregated`]), so the aggregator's
//! packets never leave the cluster's namespace.

use axum::Router;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use reqwest::Method;
use serde_json::{Value, json};

use crate::aggregated::Aggregated;
use crate::k8s::{Cluster, KubeApi};

/// The group and version virt-api serves.
const GROUP_VERSION: &str = "subresources.kubevirt.io/v1";

/// Serves the played virt-api for `cluster` (made by
/// [`Cluster::start_aggregated`]) and waits until the aggregator reports
/// it available.
pub async fn serve(cluster: &mut Cluster) {
    let app = Router::new()
        .route(&format!("/apis/{GROUP_VERSION}"), get(discovery))
        .route(&format!("/apis/{GROUP_VERSION}/namespaces/{{ns}}/virtualmachineinstances/{{name}}/console"), get(console))
        .route(&format!("/apis/{GROUP_VERSION}/namespaces/{{ns}}/virtualmachineinstances/{{name}}/vnc"), get(vnc))
        .route(&format!("/apis/{GROUP_VERSION}/namespaces/{{ns}}/virtualmachineinstances/{{name}}/{{action}}"), put(pause))
        .with_state(cluster.api());
    let a = Aggregated { namespace: "kubevirt", service: "virt-api", port: 8443, group: "subresources.kubevirt.io", version: "v1" };
    crate::aggregated::serve(cluster, &a, app).await;
}

/// The discovery document the aggregator checks.
async fn discovery() -> axum::Json<Value> {
    axum::Json(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": GROUP_VERSION,
        "resources": [{"name": "virtualmachineinstances/console", "singularName": "", "namespaced": true,
            "kind": "VirtualMachineInstance", "verbs": ["get"]},
            {"name": "virtualmachineinstances/vnc", "singularName": "", "namespaced": true,
            "kind": "VirtualMachineInstance", "verbs": ["get"]},
            {"name": "virtualmachineinstances/pause", "singularName": "", "namespaced": true,
            "kind": "VirtualMachineInstance", "verbs": ["update"]},
            {"name": "virtualmachineinstances/unpause", "singularName": "", "namespaced": true,
            "kind": "VirtualMachineInstance", "verbs": ["update"]}]}))
}

/// The VNC sockets of the VMIs' QEMUs, by `ns/name`.
fn displays() -> &'static std::sync::Mutex<std::collections::HashMap<String, std::path::PathBuf>> {
    static DISPLAYS: std::sync::OnceLock<std::sync::Mutex<std::collections::HashMap<String, std::path::PathBuf>>> =
        std::sync::OnceLock::new();
    DISPLAYS.get_or_init(Default::default)
}

/// Says that VMI `vmi` (`ns/name`) runs in the QEMU whose VNC socket is `socket`.
pub fn show(vmi: &str, socket: std::path::PathBuf) {
    displays().lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(vmi.to_owned(), socket);
}

/// The display of VMI `ns/name`: its QEMU's VNC in binary frames both ways.
async fn vnc(State(k): State<KubeApi>, Path((ns, name)): Path<(String, String)>, ws: WebSocketUpgrade) -> Response {
    if let Some(missing) = missing_vmi(&k, &ns, &name).await {
        return missing;
    }
    let socket = displays().lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&format!("{ns}/{name}")).cloned();
    let Some(Ok(qemu)) = futures::future::OptionFuture::from(socket.map(tokio::net::UnixStream::connect)).await else {
        return (StatusCode::INTERNAL_SERVER_ERROR, format!("no display for {ns}/{name}")).into_response();
    };
    ws.protocols(["plain.kubevirt.io"]).on_upgrade(move |socket| relay(socket, qemu))
}

/// RFB between the viewer's WebSocket and QEMU's VNC socket.
async fn relay(mut socket: WebSocket, mut qemu: tokio::net::UnixStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        tokio::select! {
            n = qemu.read(&mut buf) => match n {
                Ok(0) | Err(_) => break,
                Ok(n) => if socket.send(Message::Binary(buf[..n].to_vec().into())).await.is_err() { break },
            },
            msg = socket.recv() => match msg {
                Some(Ok(Message::Binary(b))) => if qemu.write_all(&b).await.is_err() { break },
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                Some(Ok(_)) => {}
            },
        }
    }
}

/// A refusal in a Kubernetes `Status`, as virt-api answers.
fn refused(code: StatusCode, message: String) -> Response {
    let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code.as_u16(), "message": message});
    (code, axum::Json(status)).into_response()
}

/// `pause` and `unpause` of VMI `ns/name`, as virt-api and virt-handler
/// do them together: a running VMI gets (or loses) the `Paused` condition
/// (`PausedByUser`), its Ready condition following, and its VM's
/// printable status says `Paused` (or `Running`); asking what already is
/// so is a 409, as KubeVirt's.
async fn pause(State(k): State<KubeApi>, Path((ns, name, action)): Path<(String, String, String)>) -> Response {
    let wanted = match action.as_str() {
        "pause" => true,
        "unpause" => false,
        _ => return refused(StatusCode::NOT_FOUND, format!("no subresource {action}")),
    };
    let path = format!("/apis/kubevirt.io/v1/namespaces/{ns}/virtualmachineinstances/{name}");
    let (st, vmi) = k.request(Method::GET, &path, None, None).await;
    if st != 200 {
        return refused(StatusCode::NOT_FOUND, format!("virtualmachineinstance {ns}/{name} not found"));
    }
    if vmi["status"]["phase"] != "Running" {
        return refused(StatusCode::CONFLICT, "VMI is not running".into());
    }
    let conditions = vmi["status"]["conditions"].as_array().cloned().unwrap_or_default();
    let is_paused = conditions.iter().any(|c| c["type"] == "Paused" && c["status"] == "True");
    if is_paused == wanted {
        return refused(StatusCode::CONFLICT, format!("VMI is {}", if wanted { "already paused" } else { "not paused" }));
    }
    let mut conditions: Vec<Value> = conditions.into_iter().filter(|c| c["type"] != "Paused" && c["type"] != "Ready").collect();
    let ready = if wanted {
        json!({"type": "Ready", "status": "False", "reason": "PodConditionMissing"})
    } else {
        json!({"type": "Ready", "status": "True"})
    };
    conditions.push(ready);
    if wanted {
        conditions.push(json!({"type": "Paused", "status": "True", "reason": "PausedByUser", "message": "VMI was paused by user"}));
    }
    for c in &mut conditions {
        c["lastProbeTime"] = Value::Null;
        c["lastTransitionTime"] = Value::Null;
    }
    let (st, body) = k.write_status(&vmi, "virtualmachineinstances", json!({"conditions": conditions})).await;
    if st != 200 {
        return refused(StatusCode::INTERNAL_SERVER_ERROR, body.to_string());
    }
    let vm = json!({"apiVersion": "kubevirt.io/v1", "metadata": {"namespace": ns, "name": name}});
    let printable =
        if wanted { json!({"printableStatus": "Paused", "ready": false}) } else { json!({"printableStatus": "Running", "ready": true}) };
    k.write_status(&vm, "virtualmachines", printable).await;
    StatusCode::OK.into_response()
}

/// A 404 like virt-api's when VMI `ns/name` does not exist.
async fn missing_vmi(k: &KubeApi, ns: &str, name: &str) -> Option<Response> {
    let (st, _) = k.request(Method::GET, &format!("/apis/kubevirt.io/v1/namespaces/{ns}/virtualmachineinstances/{name}"), None, None).await;
    (st != 200).then(|| {
        let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404,
            "message": format!("virtualmachineinstance {ns}/{name} not found")});
        (StatusCode::NOT_FOUND, axum::Json(status)).into_response()
    })
}

/// The console of VMI `ns/name`: 404 when there is no such VMI.
async fn console(State(k): State<KubeApi>, Path((ns, name)): Path<(String, String)>, ws: WebSocketUpgrade) -> Response {
    if let Some(missing) = missing_vmi(&k, &ns, &name).await {
        return missing;
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
