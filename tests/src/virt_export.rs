//! Playing KubeVirt's export controller and its export proxy
//! (virt-exportproxy) for the kubevirt backend's export tests. The
//! controller writes a `VirtualMachineExport`'s status Ready with a raw
//! image link per claim on a made-up external host (data: nothing connects
//! to it); the proxy, on loopback, serves that link's path to a request
//! bearing the token of the export's Secret, and counts what it served.
//! Each claim's image is [`disk_of`] it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use base64::Engine;
use reqwest::Method;
use serde_json::{Value, json};

use crate::k8s::KubeApi;

/// VirtualMachineExports, cluster-wide.
pub const EXPORTS: &str = "/apis/export.kubevirt.io/v1beta1/virtualmachineexports";
/// The external host links name (made up: never connected to).
const EXTERNAL: &str = "https://virt-exportproxy.kubevirt.example";

/// The raw image of claim `claim`: 1 MiB of a pattern naming it, 1 MiB of
/// zeros, then 4 KiB of `0xab`.
pub fn disk_of(claim: &str) -> Vec<u8> {
    let mut d: Vec<u8> = claim.bytes().chain(*b"|").cycle().take(1 << 20).collect();
    d.resize(2 << 20, 0);
    d.extend(std::iter::repeat_n(0xab, 4096));
    d
}

/// The played controller and proxy; both stop when dropped.
pub struct VirtExport {
    /// The proxy's URL, for `--kubevirt-export-proxy`.
    pub url: String,
    served: Arc<AtomicUsize>,
    readied: Arc<std::sync::Mutex<Vec<Value>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for VirtExport {
    fn drop(&mut self) {
        self.tasks.iter().for_each(tokio::task::JoinHandle::abort);
    }
}

impl VirtExport {
    /// Starts playing on `api`.
    pub async fn start(api: KubeApi) -> Self {
        let served = Arc::new(AtomicUsize::new(0));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let url = format!("http://{}", listener.local_addr().expect("its address"));
        let app = Router::new()
            .route("/api/export.kubevirt.io/v1beta1/namespaces/{ns}/{name}/volumes/{volume}/disk.img", get(image))
            .with_state((api.clone(), served.clone()));
        let proxy = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let readied = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = readied.clone();
        let controller = tokio::spawn(async move {
            let end = Instant::now() + Duration::from_secs(600);
            while Instant::now() < end {
                let (_, list) = api.request(Method::GET, EXPORTS, None, None).await;
                for e in list["items"].as_array().into_iter().flatten().filter(|e| e["status"]["phase"].is_null()) {
                    ready(&api, e).await;
                    seen.lock().expect("the list").push(e.clone());
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
        Self { url, served, readied, tasks: vec![proxy, controller] }
    }

    /// The exports made Ready, as they were then.
    pub fn readied(&self) -> Vec<Value> {
        self.readied.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// How many images the proxy served.
    pub fn served(&self) -> usize {
        self.served.load(Ordering::Relaxed)
    }
}

async fn get_json(api: &KubeApi, path: &str) -> Value {
    api.request(Method::GET, path, None, None).await.1
}

/// The claim of the boot disk of KubeVirt VM `ns/name`.
async fn root_claim(api: &KubeApi, ns: &str, name: &str) -> String {
    let vm = get_json(api, &format!("/apis/kubevirt.io/v1/namespaces/{ns}/virtualmachines/{name}")).await;
    let volumes = vm["spec"]["template"]["spec"]["volumes"].as_array().cloned().unwrap_or_default();
    let root = volumes.iter().find(|v| v["name"] == "rootdisk").map(|v| v["dataVolume"]["name"].clone());
    root.and_then(|n| n.as_str().map(str::to_owned)).unwrap_or_default()
}

/// What KubeVirt's export controller writes once export `e` is ready: a
/// link to the raw image of the claim it exports (named `<export>-<claim>`
/// for a snapshot, whose claims KubeVirt makes for the export).
async fn ready(api: &KubeApi, e: &Value) {
    let (ns, name) = (e["metadata"]["namespace"].as_str().unwrap_or(""), e["metadata"]["name"].as_str().unwrap_or(""));
    let source = &e["spec"]["source"];
    let source_name = source["name"].as_str().unwrap_or("");
    let volume = match source["kind"].as_str() {
        Some("VirtualMachine") => root_claim(api, ns, source_name).await,
        Some("VirtualMachineSnapshot") => {
            let snap =
                get_json(api, &format!("/apis/snapshot.kubevirt.io/v1beta1/namespaces/{ns}/virtualmachinesnapshots/{source_name}")).await;
            let claim = root_claim(api, ns, snap["spec"]["source"]["name"].as_str().unwrap_or("")).await;
            format!("{name}-{claim}")
        }
        _ => source_name.to_owned(),
    };
    let url = format!("{EXTERNAL}/api/export.kubevirt.io/v1beta1/namespaces/{ns}/{name}/volumes/{volume}/disk.img");
    let link = json!({"cert": "", "volumes": [{"name": volume, "formats": [{"format": "raw", "url": url}, {"format": "gzip", "url": format!("{url}.gz")}]}]});
    let status = json!({"phase": "Ready", "tokenSecretRef": e["spec"]["tokenSecretRef"], "serviceName": format!("virt-export-{name}"),
        "links": {"external": link}});
    api.write_status(e, "virtualmachineexports", status).await;
}

/// The proxy: the image of the volume's claim, to the export's token only.
async fn image(
    State((api, served)): State<(KubeApi, Arc<AtomicUsize>)>,
    Path((ns, name, volume)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Response {
    let export = get_json(&api, &format!("/apis/export.kubevirt.io/v1beta1/namespaces/{ns}/virtualmachineexports/{name}")).await;
    let secret =
        get_json(&api, &format!("/api/v1/namespaces/{ns}/secrets/{}", export["spec"]["tokenSecretRef"].as_str().unwrap_or("-"))).await;
    let token = secret["data"]["token"].as_str().and_then(|t| base64::engine::general_purpose::STANDARD.decode(t).ok());
    let given = headers.get("x-kubevirt-export-token").map(|v| v.as_bytes().to_vec());
    if token.is_none() || token != given {
        return (StatusCode::UNAUTHORIZED, "a token of the export's Secret is needed").into_response();
    }
    served.fetch_add(1, Ordering::Relaxed);
    let claim = volume.strip_prefix(&format!("{name}-")).unwrap_or(&volume);
    disk_of(claim).into_response()
}
