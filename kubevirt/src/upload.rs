//! Images uploaded through the API, on a cluster, the way `virtctl
//! image-upload` does it: a DataVolume with an `upload` source in the
//! images namespace (`image-<id>`, with its DataSource, as an import has),
//! an `UploadTokenRequest` to CDI's aggregated API for a token bound to its
//! PVC, and the file streamed to CDI's upload proxy with that token
//! (`--cdi-upload-proxy`). The server counts and hashes the bytes on their
//! way: a file over the limit or with another SHA-256 than asked is
//! refused, its DataVolume deleted (a new upload makes a new one) and the
//! refusal kept on the DataSource until then.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tracing::info;
use vmaas_backend::{BackendError, ImageObservation, ImageTarget, ImageUploads, Upload};

use crate::cluster::as_json;
use crate::image::data_source_name;
use crate::shared::Shared;

/// Annotation of an uploaded image's DataSource: why its last upload was refused.
pub const REFUSED: &str = "vmaas.io/upload-refused";

/// How long an upload waits for CDI to be ready to take it.
const READY_WAIT: Duration = Duration::from_secs(120);

/// CDI's upload proxy, as the server reaches it.
pub type UploadProxy = crate::proxy::Proxy;

/// Takes uploaded images to CDI.
pub struct Uploads {
    shared: Arc<Shared>,
    http: reqwest::Client,
    proxy: UploadProxy,
}

/// Why an upload did not go through CDI.
#[derive(Debug, thiserror::Error)]
pub(crate) enum UploadRefused {
    /// The DataVolume was filled already.
    #[error("the image was uploaded already")]
    Done,
    /// CDI failed to prepare the DataVolume.
    #[error("CDI could not prepare the upload")]
    Prepare,
    /// CDI did not get ready in time.
    #[error("CDI did not get ready for the upload in {} s", READY_WAIT.as_secs())]
    NotReady,
    /// The file is larger than the image allows.
    #[error("the file is larger than the {0} bytes allowed")]
    TooLarge(u64),
    /// The proxy could not be reached, or the connection broke.
    #[error("sending the file to CDI's upload proxy: {0}")]
    Send(reqwest::Error),
    /// The proxy answered with an error.
    #[error("CDI's upload proxy refused the file ({status}): {body}")]
    Proxy { status: reqwest::StatusCode, body: String },
    /// The file is not the one the image names.
    #[error("the file's SHA-256 is {got}, not {want}")]
    Digest { got: String, want: String },
}

impl Uploads {
    /// Uploads through `proxy`.
    pub(crate) fn new(shared: Arc<Shared>, proxy: UploadProxy) -> Result<Self, BackendError> {
        let http = proxy.client("upload proxy")?;
        Ok(Self { shared, http, proxy })
    }

    /// Waits until CDI says the DataVolume `ns/name` takes the upload.
    pub(crate) async fn ready(&self, ns: &str, name: &str) -> Result<(), UploadRefused> {
        let s = &self.shared;
        let deadline = Instant::now() + READY_WAIT;
        loop {
            let dv = s.data_volumes.get(ns, name).map(|o| as_json(&o));
            match dv.as_ref().and_then(|d| d["status"]["phase"].as_str()) {
                Some("UploadReady") => return Ok(()),
                Some("Succeeded") => return Err(UploadRefused::Done),
                Some("Failed") => return Err(UploadRefused::Prepare),
                _ if Instant::now() > deadline => return Err(UploadRefused::NotReady),
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }

    /// A token for uploading into PVC `ns/name`, from CDI's aggregated API.
    pub(crate) async fn token(&self, ns: &str, name: &str) -> Result<String, BackendError> {
        let body = json!({"apiVersion": "upload.cdi.kubevirt.io/v1beta1", "kind": "UploadTokenRequest",
            "metadata": {"name": name, "namespace": ns}, "spec": {"pvcName": name}});
        let request = http::Request::post(format!("/apis/upload.cdi.kubevirt.io/v1beta1/namespaces/{ns}/uploadtokenrequests"))
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(body.to_string().into_bytes())
            .map_err(|e| BackendError::invalid("asking CDI for an upload token", e))?;
        let answer: Value = self
            .shared
            .cluster
            .client()
            .request(request)
            .await
            .map_err(|e| BackendError::transient("asking CDI for an upload token", e))?;
        answer["status"]["token"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| BackendError::transient("asking CDI for an upload token", "the answer has no status.token"))
    }

    /// Sends `body` (at most `max` bytes) to the upload proxy with
    /// `token`: what was sent, or why it was refused.
    pub(crate) async fn send(&self, max: u64, token: &str, body: Upload) -> Result<Sent, UploadRefused> {
        let count = Arc::new(AtomicU64::new(0));
        let hasher = Arc::new(std::sync::Mutex::new(Sha256::new()));
        let (c, h) = (count.clone(), hasher.clone());
        let counted = body.map(move |chunk| {
            let chunk = chunk?;
            if c.fetch_add(chunk.len() as u64, Ordering::Relaxed) + chunk.len() as u64 > max {
                return Err(std::io::Error::other(UploadRefused::TooLarge(max)));
            }
            if let Ok(mut h) = h.lock() {
                h.update(&chunk);
            }
            Ok(chunk)
        });
        let url = self.proxy.at("/v1beta1/upload");
        let sent = self.http.post(&url).bearer_auth(token).body(reqwest::Body::wrap_stream(counted)).send().await;
        let bytes = count.load(Ordering::Relaxed);
        if bytes > max {
            return Err(UploadRefused::TooLarge(max));
        }
        let response = sent.map_err(UploadRefused::Send)?;
        if !response.status().is_success() {
            let status = response.status();
            return Err(UploadRefused::Proxy { status, body: response.text().await.unwrap_or_default() });
        }
        let sha256 = hasher.lock().map(|h| format!("{:x}", h.clone().finalize())).unwrap_or_default();
        Ok(Sent { bytes, sha256 })
    }

    /// Refuses the upload of `t`: its DataVolume goes, the reason stays on its DataSource.
    async fn refuse(&self, t: &ImageTarget, why: UploadRefused) -> Result<ImageObservation, BackendError> {
        let why = why.to_string();
        let s = &self.shared;
        let name = data_source_name(&t.id);
        s.cluster.delete(&s.cluster.res.data_volume, &s.cfg.images_namespace, &name).await?;
        let (_, mut ds) = s.upload_manifests(t);
        ds["metadata"]["annotations"] = json!({ REFUSED: why });
        s.cluster.apply(&s.cluster.res.data_source, &ds).await?;
        info!(image = %t.id, reason = %why, "upload refused");
        Ok(ImageObservation::Failed(why))
    }
}

/// What reached the upload proxy.
pub(crate) struct Sent {
    /// How many bytes.
    pub bytes: u64,
    /// Their SHA-256, in hex.
    pub sha256: String,
}

impl Shared {
    /// The DataVolume (an `upload` source) and DataSource of uploaded image `t`.
    pub(crate) fn upload_manifests(&self, t: &ImageTarget) -> (Value, Value) {
        (self.data_volume(t, json!({"upload": {}})), self.data_source(t))
    }
}

#[async_trait]
impl ImageUploads for Uploads {
    async fn upload(&self, t: &ImageTarget, body: Upload) -> Result<ImageObservation, BackendError> {
        let s = &self.shared;
        s.listed()?;
        let (dv, ds) = s.upload_manifests(t);
        s.cluster.apply(&s.cluster.res.data_volume, &dv).await?;
        s.cluster.apply(&s.cluster.res.data_source, &ds).await?;
        let name = data_source_name(&t.id);
        let ns = &s.cfg.images_namespace;
        if let Err(why) = self.ready(ns, &name).await {
            return Ok(ImageObservation::Failed(why.to_string()));
        }
        let token = self.token(ns, &name).await?;
        let sent = match self.send(t.spec.max_bytes, &token, body).await {
            Ok(sent) => sent,
            Err(why) => return self.refuse(t, why).await,
        };
        if let Some(want) = t.spec.sha256.as_deref().filter(|w| !w.eq_ignore_ascii_case(&sent.sha256)) {
            return self.refuse(t, UploadRefused::Digest { got: sent.sha256.clone(), want: want.to_owned() }).await;
        }
        info!(image = %t.id, bytes = sent.bytes, "image uploaded to CDI");
        Ok(ImageObservation::Importing { bytes: sent.bytes, total: Some(sent.bytes) })
    }
}
