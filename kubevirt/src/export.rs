//! Exports on a cluster, the way `virtctl vmexport download` makes them: a
//! token Secret and a KubeVirt `VirtualMachineExport` of the stopped VM,
//! the volume's claim or the snapshot, in its namespace. Once KubeVirt says
//! it is Ready, the volume's raw image is fetched through KubeVirt's export
//! proxy (`--kubevirt-export-proxy`: the path of the link KubeVirt reports,
//! on the URL the server is given; the reported host is never connected
//! to) with the token, written as one qcow2 (`qemu-img convert`) and
//! hashed. The export and its Secret are deleted whatever happened.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::StreamExt;
use kube::core::DynamicObject;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tracing::{info, warn};
use vmaas_backend::{BackendError, ExportFile, ExportSource, Exports as ExportsApi};
use vmaas_model::ObjectKind;
use vmaas_model::k8s::clone::claims_of;
use vmaas_model::k8s::export::{ExportSeen, observe_vm_export, token_secret, vm_export};
use vmaas_model::k8s::names::derived;

use crate::cluster::{as_json, place_of};
use crate::names::labels;
use crate::proxy::Proxy;
use crate::shared::Shared;

/// KubeVirt's export proxy, as the server reaches it.
pub type ExportProxy = Proxy;

/// How long KubeVirt may take to make an export Ready.
const READY_WAIT: Duration = Duration::from_secs(300);

/// Makes exports through KubeVirt.
pub struct Exports {
    shared: Arc<Shared>,
    http: reqwest::Client,
    proxy: ExportProxy,
    /// Where exports are written before they are streamed.
    scratch: PathBuf,
}

/// What is exported, as KubeVirt names it.
struct Source {
    /// The owner label of the export's objects.
    owner: (ObjectKind, String),
    namespace: String,
    /// `apiGroup`, `kind` and `name` of the `VirtualMachineExport`'s source.
    reference: Value,
    /// The claim whose volume is wanted.
    claim: String,
}

impl Exports {
    /// Exports through `proxy`, writing files under `scratch`.
    pub(crate) fn new(shared: Arc<Shared>, proxy: ExportProxy, scratch: PathBuf) -> Result<Self, BackendError> {
        Ok(Self { http: proxy.client("export proxy")?, shared, proxy, scratch })
    }

    /// The KubeVirt names of `what`.
    async fn source(&self, what: &ExportSource) -> Result<Source, BackendError> {
        let s = &self.shared;
        s.listed()?;
        let missing = |what: &str| BackendError::invalid("exporting", format!("{what} is not on the cluster"));
        match what {
            ExportSource::VmDisk(id) => {
                let vm = s.vms.of_or_listed(&s.cluster, id).await?.into_iter().next().ok_or_else(|| missing("the virtual machine"))?;
                let claim = claim_of(&vm, "rootdisk").ok_or_else(|| missing("the virtual machine's boot disk"))?;
                let (namespace, name) = place_of(&vm);
                let reference = json!({"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": name});
                Ok(Source { owner: (ObjectKind::VirtualMachine, id.clone()), namespace, reference, claim })
            }
            ExportSource::Volume(id) => {
                let dv = s.data_volumes.of_or_listed(&s.cluster, id).await?.into_iter().next().ok_or_else(|| missing("the volume"))?;
                let (namespace, name) = place_of(&dv);
                let reference = json!({"apiGroup": "", "kind": "PersistentVolumeClaim", "name": name});
                Ok(Source { owner: (ObjectKind::Volume, id.clone()), namespace, reference, claim: name })
            }
            ExportSource::Snapshot { id, disk } => {
                let snap = s.snapshots.of_or_listed(&s.cluster, id).await?.into_iter().next().ok_or_else(|| missing("the snapshot"))?;
                let (namespace, name) = place_of(&snap);
                let vm_name = as_json(&snap)["spec"]["source"]["name"].as_str().unwrap_or_default().to_owned();
                let disk = disk.as_deref().unwrap_or("rootdisk");
                let vm = s.vms.get(&namespace, &vm_name);
                let claim = vm.and_then(|vm| claim_of(&vm, disk)).unwrap_or_else(|| match disk {
                    "rootdisk" => derived(&vm_name, "root"),
                    other => other.to_owned(),
                });
                let reference = json!({"apiGroup": "snapshot.kubevirt.io", "kind": "VirtualMachineSnapshot", "name": name});
                Ok(Source { owner: (ObjectKind::ComputeInstanceSnapshot, id.clone()), namespace, reference, claim })
            }
        }
    }

    /// Waits until KubeVirt says export `name` is Ready: the raw image link of `claim`.
    async fn link(&self, src: &Source, name: &str) -> Result<String, BackendError> {
        let api = self.shared.cluster.api(&self.shared.cluster.res.vm_export, &src.namespace);
        let deadline = Instant::now() + READY_WAIT;
        loop {
            let seen = api.get_opt(name).await.map_err(|e| crate::cluster::failure(format!("reading VirtualMachineExport {name}"), e))?;
            match observe_vm_export(seen.as_ref().map(as_json).as_ref(), &src.claim) {
                ExportSeen::Ready(url) => return Ok(url),
                ExportSeen::Failed(why) => return Err(BackendError::invalid(format!("exporting through KubeVirt ({name})"), why)),
                ExportSeen::Pending(how) if Instant::now() > deadline => {
                    let why = format!("not Ready in {} s: {how}", READY_WAIT.as_secs());
                    return Err(BackendError::transient(format!("exporting through KubeVirt ({name})"), why));
                }
                ExportSeen::Pending(_) => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        }
    }

    /// Fetches `url`'s path through the export proxy with `token` into `to`.
    async fn fetch(&self, url: &str, token: &str, to: &Path) -> Result<(), BackendError> {
        let context = format!("fetching {url} through the export proxy");
        let parsed = reqwest::Url::parse(url).map_err(|e| BackendError::invalid(context.clone(), e))?;
        let path = match parsed.query() {
            Some(q) => format!("{}?{q}", parsed.path()),
            None => parsed.path().to_owned(),
        };
        let response = self.http.get(self.proxy.at(&path)).header("x-kubevirt-export-token", token).send().await;
        let response = response.map_err(|e| BackendError::transient(context.clone(), e))?;
        if !response.status().is_success() {
            let why = format!("the export proxy answered {}", response.status());
            return Err(BackendError::transient(context, why));
        }
        let io = |e: std::io::Error| BackendError::transient(format!("writing {}", to.display()), e);
        let mut file = tokio::fs::File::create(to).await.map_err(io)?;
        let mut body = response.bytes_stream();
        while let Some(chunk) = body.next().await {
            file.write_all(&chunk.map_err(|e| BackendError::transient(context.clone(), e))?).await.map_err(io)?;
        }
        file.flush().await.map_err(io)
    }

    /// Makes export `name` of `src` with `token` and fetches it as qcow2 into `to`.
    async fn make(&self, src: &Source, name: &str, token: &str, to: &Path) -> Result<(), BackendError> {
        let s = &self.shared;
        let own = labels(src.owner.0, &src.owner.1);
        let mut secret = token_secret(&derived(name, "token"), &src.namespace, token);
        secret["metadata"]["labels"] = json!(own);
        s.cluster.apply(&s.cluster.res.secret, &secret).await?;
        let mut export = vm_export(name, &src.namespace, &src.reference, &derived(name, "token"));
        export["metadata"]["labels"] = json!(own);
        s.cluster.apply(&s.cluster.res.vm_export, &export).await?;
        let url = self.link(src, name).await?;
        let raw = to.with_extension("raw");
        let _raw = vmaas_backend::export::Partial::new(&raw);
        let fetched = self.fetch(&url, token, &raw).await;
        let converted = match fetched {
            Ok(()) => convert(&raw, to).await,
            Err(e) => Err(e),
        };
        let _ = tokio::fs::remove_file(&raw).await;
        converted
    }

    /// Deletes export `name` and its token Secret.
    async fn forget(&self, src: &Source, name: &str) {
        forget(&self.shared, &src.namespace, name).await;
    }
}

/// Deletes export `name` of namespace `ns` and its token Secret.
async fn forget(s: &Shared, ns: &str, name: &str) {
    for (ar, n) in [(&s.cluster.res.vm_export, name.to_owned()), (&s.cluster.res.secret, derived(name, "token"))] {
        if let Err(e) = s.cluster.delete(ar, ns, &n).await {
            warn!(export = %name, error = %e, "leaving an export object behind");
        }
    }
}

/// An export's objects, deleted in the background if the export is
/// dropped before it deletes them itself (its client went away).
struct Abandoned(Option<(Arc<Shared>, String, String)>);

impl Drop for Abandoned {
    fn drop(&mut self) {
        if let (Some((s, ns, name)), Ok(rt)) = (self.0.take(), tokio::runtime::Handle::try_current()) {
            rt.spawn(async move { forget(&s, &ns, &name).await });
        }
    }
}

/// The claim (DataVolume or PVC) behind volume `volume` of KubeVirt VM `vm`.
fn claim_of(vm: &DynamicObject, volume: &str) -> Option<String> {
    claims_of(&as_json(vm)).remove(volume)
}

/// `raw` as one qcow2 file `to`.
async fn convert(raw: &Path, to: &Path) -> Result<(), BackendError> {
    let context = "converting the exported image to qcow2 (qemu-img, from qemu-utils)";
    let out = tokio::process::Command::new("qemu-img")
        .args(["convert", "-q", "-f", "raw", "-O", "qcow2"])
        .arg(raw)
        .arg(to)
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| BackendError::invalid(context, e))?;
    if !out.status.success() {
        return Err(BackendError::invalid(context, String::from_utf8_lossy(&out.stderr).trim().to_owned()));
    }
    Ok(())
}

#[async_trait]
impl ExportsApi for Exports {
    async fn export(&self, what: &ExportSource) -> Result<ExportFile, BackendError> {
        let src = self.source(what).await?;
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        let name = derived(src.reference["name"].as_str().unwrap_or("export"), &format!("export-{}", &nonce[..8]));
        let token = format!("{nonce}{}", uuid::Uuid::new_v4().simple());
        tokio::fs::create_dir_all(&self.scratch)
            .await
            .map_err(|e| BackendError::transient(format!("creating {}", self.scratch.display()), e))?;
        let to = self.scratch.join(format!("{name}.qcow2"));
        let guard = vmaas_backend::export::Partial::new(&to);
        let mut abandoned = Abandoned(Some((self.shared.clone(), src.namespace.clone(), name.clone())));
        let made = self.make(&src, &name, &token, &to).await;
        abandoned.0 = None;
        self.forget(&src, &name).await;
        made?;
        let size = tokio::fs::metadata(&to).await.map_err(|e| BackendError::transient(format!("reading {}", to.display()), e))?.len();
        guard.keep();
        info!(export = %name, bytes = size, "exported through KubeVirt");
        // Not hashed here: whoever sends it hashes it as it reads it.
        Ok(ExportFile { path: to, size, sha256: None, temporary: true })
    }
}
