//! Imported images: `DATA_DIR/images/<id>/`, one directory each, holding
//! `disk.qcow2` or `disk.raw` and `import.json` (format, sizes, SHA-256)
//! once the import succeeded, or `failed.txt` saying why it did not. A file
//! is received into `disk.part` (downloaded from its URL by a task of the
//! backend, or uploaded through the API), streamed, hashed and counted on
//! the way, never held whole in memory; then checked ([`crate::vetting`])
//! and renamed. VMs boot from overlays of it: the file is never written.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use async_trait::async_trait;
use futures::{Stream, StreamExt};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tracing::{info, warn};
use vmaas_backend::{
    BackendError, Cleanup, Driver, ImageFile, ImageImport, ImageObservation, ImageTarget, ImageUploads, Requeue, Upload, Wake,
};
use vmaas_model::ObjectKind;

use crate::atomic::write_atomic;
use crate::images::{Image, ImageError, ImageManifest};
use crate::sources::{FETCH_FAILED, MAX_REDIRECTS, SourcePolicy, describe};

mod registry;

pub use registry::SCHEME as REGISTRY_SCHEME;

const DONE: &str = "import.json";
const FAILED: &str = "failed.txt";
const PART: &str = "disk.part";

/// What `import.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Imported {
    format: String,
    virtual_size: u64,
    size_bytes: u64,
    sha256: String,
}

impl Imported {
    fn file(&self) -> ImageFile {
        ImageFile { format: self.format.clone(), virtual_size: self.virtual_size, size_bytes: self.size_bytes, sha256: self.sha256.clone() }
    }

    fn disk_name(&self) -> String {
        format!("disk.{}", self.format)
    }
}

/// An import under way.
#[derive(Debug, Default)]
struct Job {
    bytes: AtomicU64,
    total: Mutex<Option<u64>>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// Why an import failed: what the tenant is told (a fetch's own reason
/// is logged, not told).
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// Refused, unreachable, a failed answer, or cut off.
    #[error("{}", FETCH_FAILED)]
    Fetch,
    /// A file came, and is refused for its size, or could not be written.
    #[error("{0}")]
    File(String),
    /// The file is not a disk image this host boots.
    #[error(transparent)]
    Refused(#[from] crate::vetting::Refused),
    /// The file is not the one `spec.sha256` names.
    #[error("checksum mismatch: the file's SHA-256 is {got}, spec.sha256 says {want}")]
    Checksum {
        /// The file's.
        got: String,
        /// The spec's.
        want: String,
    },
    /// Writing what was received failed.
    #[error("writing the image: {0}")]
    Write(#[source] std::io::Error),
    /// Making the file the image failed.
    #[error("keeping the image: {0}")]
    Keep(#[source] std::io::Error),
    /// The record of the import cannot be written.
    #[error("recording the import: {0}")]
    Record(#[source] serde_json::Error),
    /// A task of the import died.
    #[error("{0}")]
    Task(#[from] tokio::task::JoinError),
}

/// Why a download gave no file.
enum Fetch {
    /// Refused, unreachable, a failed answer, or cut off: the tenant is
    /// told [`FETCH_FAILED`] only.
    Failed(String),
    /// A file came, and is refused for what it is (the tenant is told why).
    File(String),
}

/// Why receiving a file failed.
enum Received {
    /// The stream of bytes broke off.
    Body(String),
    /// The file is refused, or could not be written.
    File(String),
}

impl Received {
    fn into_message(self) -> String {
        match self {
            Self::Body(m) | Self::File(m) => m,
        }
    }
}

/// The image import driver.
pub struct Imports {
    dir: PathBuf,
    jobs: Mutex<HashMap<String, Arc<Job>>>,
    wake: Arc<OnceLock<Wake>>,
    http: reqwest::Client,
    sources: Arc<SourcePolicy>,
}

/// The image imported as `id` under `dir`, to boot from, or why there is none.
pub fn imported(dir: &Path, id: &str) -> Result<Image, ImageError> {
    let d = dir.join(id);
    let text = std::fs::read(d.join(DONE)).map_err(|e| ImageError::NotReady { id: id.to_owned(), source: e })?;
    let done: Imported = serde_json::from_slice(&text).map_err(|e| ImageError::Manifest { path: d.join(DONE), source: e })?;
    let manifest = ImageManifest {
        clone_hook: false,
        name: id.to_owned(),
        description: String::new(),
        kernel: None,
        initrd: None,
        disk: done.disk_name(),
        cmdline: None,
        firmware: None,
        secure_boot: None,
        tpm: None,
        guest_os_family: None,
    };
    Ok(Image { manifest, dir: d })
}

impl Imports {
    /// Images kept under `dir`, fetched only from where `sources` allows;
    /// `wake` tells the reconciler when one is done.
    pub fn new(dir: PathBuf, wake: Arc<OnceLock<Wake>>, sources: Arc<SourcePolicy>) -> Self {
        Self { dir, jobs: Mutex::new(HashMap::new()), wake, http: sources.client(), sources }
    }

    fn jobs(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Job>>> {
        self.jobs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What is on disk for `id`: done, failed, or nothing yet.
    async fn on_disk(&self, id: &str) -> Option<ImageObservation> {
        let d = self.dir.join(id);
        if let Ok(text) = tokio::fs::read(d.join(DONE)).await {
            return match serde_json::from_slice::<Imported>(&text) {
                Ok(i) => Some(ImageObservation::Ready(i.file())),
                Err(e) => Some(ImageObservation::Failed(format!("its import record is damaged: {e}"))),
            };
        }
        tokio::fs::read_to_string(d.join(FAILED)).await.ok().map(ImageObservation::Failed)
    }

    fn progress(job: &Job) -> ImageObservation {
        let total = *job.total.lock().unwrap_or_else(|p| p.into_inner());
        ImageObservation::Importing { bytes: job.bytes.load(Ordering::Relaxed), total }
    }

    /// Starts downloading `url` for `t` in a task of its own.
    fn start_download(self: &Arc<Self>, t: &ImageTarget, url: String) -> Arc<Job> {
        let job = Arc::new(Job::default());
        // Listed before the task starts: a task that ends at once takes it off again.
        self.jobs().insert(t.id.clone(), job.clone());
        let (me, id, spec, j) = (self.clone(), t.id.clone(), t.spec.clone(), job.clone());
        let task = tokio::spawn(async move {
            let outcome = me.download(&id, &url, &spec, &j).await;
            me.finish(&id, &spec, outcome).await;
        });
        *job.task.lock().unwrap_or_else(|p| p.into_inner()) = Some(task);
        job
    }

    /// Downloads `url` within the policy's total time limit. A refused or
    /// failed fetch is logged with its reason and told to the tenant as
    /// [`FETCH_FAILED`], whatever the reason.
    async fn download(&self, id: &str, url: &str, spec: &ImageImport, job: &Job) -> Result<(String, u64), ImportError> {
        let total = self.sources.limits.total;
        let fetch = async {
            match url.starts_with(registry::SCHEME) {
                true => self.pull_into(id, url, spec, job).await,
                false => self.fetch_into(id, url, spec, job).await,
            }
        };
        let outcome = match tokio::time::timeout(total, fetch).await {
            Ok(outcome) => outcome,
            Err(_) => Err(Fetch::Failed(format!("the download took longer than {total:?}"))),
        };
        outcome.map_err(|e| match e {
            Fetch::Failed(why) => {
                warn!(image = %id, source = %url, reason = %why, "image fetch refused or failed");
                ImportError::Fetch
            }
            Fetch::File(why) => ImportError::File(why),
        })
    }

    /// The answer to a GET of `url`, redirects followed one checked hop at a time.
    async fn answer(&self, url: &str) -> Result<reqwest::Response, Fetch> {
        let failed = Fetch::Failed;
        let mut at = reqwest::Url::parse(url).map_err(|e| failed(format!("{url:?} is not a URL: {e}")))?;
        for _ in 0..=MAX_REDIRECTS {
            self.sources.check_url(&at).await.map_err(|e| failed(format!("fetching {at}: {e}")))?;
            let rsp = self.http.get(at.clone()).send().await.map_err(|e| failed(format!("fetching {at}: {}", describe(&e))))?;
            if let Some(peer) = rsp.remote_addr() {
                self.sources.check_socket(peer).map_err(|e| failed(format!("fetching {at}: connected to {e}")))?;
            }
            if !rsp.status().is_redirection() {
                return Ok(rsp);
            }
            let to = rsp.headers().get(reqwest::header::LOCATION).and_then(|l| l.to_str().ok());
            let to = to.ok_or_else(|| failed(format!("fetching {at}: a redirect without a Location")))?;
            at = at.join(to).map_err(|e| failed(format!("fetching {at}: the redirect to {to:?} is not a URL: {e}")))?;
            if !matches!(at.scheme(), "http" | "https") {
                return Err(failed(format!("a redirect to {at}, which is not http(s)")));
            }
        }
        Err(failed(format!("more than {MAX_REDIRECTS} redirects")))
    }

    async fn fetch_into(&self, id: &str, url: &str, spec: &ImageImport, job: &Job) -> Result<(String, u64), Fetch> {
        let rsp = self.answer(url).await?;
        if !rsp.status().is_success() {
            return Err(Fetch::Failed(format!("fetching {url}: the server answered HTTP {}", rsp.status())));
        }
        if let Some(len) = rsp.content_length() {
            if len > spec.max_bytes {
                return Err(Fetch::File(format!("the file has {len} bytes, more than the {} this server accepts", spec.max_bytes)));
            }
            *job.total.lock().unwrap_or_else(|p| p.into_inner()) = Some(len);
        }
        let body = rsp.bytes_stream().map(|c| c.map_err(std::io::Error::other));
        self.receive(id, body, spec.max_bytes, job).await.map_err(|e| match e {
            Received::Body(why) => Fetch::Failed(why),
            Received::File(why) => Fetch::File(why),
        })
    }

    /// Writes `body` into `disk.part` of `id`, hashing and counting; the
    /// SHA-256 and the size.
    async fn receive(
        &self,
        id: &str,
        body: impl Stream<Item = std::io::Result<bytes::Bytes>>,
        max: u64,
        job: &Job,
    ) -> Result<(String, u64), Received> {
        let d = self.dir.join(id);
        tokio::fs::create_dir_all(&d).await.map_err(|e| Received::File(format!("creating {}: {e}", d.display())))?;
        let _ = tokio::fs::remove_file(d.join(FAILED)).await;
        // One thread writes and another hashes while this task receives:
        // the three overlap (SHA-256 takes 0.6 s of CPU a GiB here), and
        // no write goes through the runtime's pool. Each chunk goes to both
        // (a `Bytes` is shared, not copied).
        let (tx, rx) = tokio::sync::mpsc::channel::<bytes::Bytes>(64);
        let (hash_tx, hash_rx) = tokio::sync::mpsc::channel::<bytes::Bytes>(64);
        let part = d.join(PART);
        let writer = tokio::task::spawn_blocking(move || write_synced(&part, rx));
        let hasher = tokio::task::spawn_blocking(move || sha256_of(hash_rx));
        let mut n = 0u64;
        let mut body = std::pin::pin!(body);
        let received = async {
            while let Some(chunk) = body.next().await {
                let chunk = chunk.map_err(|e| Received::Body(format!("receiving the image: {}", describe(&e))))?;
                n += chunk.len() as u64;
                if n > max {
                    return Err(Received::File(format!("the file is larger than the {max} bytes this server accepts")));
                }
                // The channels are bounded: a slow disk slows the sender down.
                hash_tx.send(chunk.clone()).await.map_err(|_| Received::File("hashing the image failed".to_owned()))?;
                tx.send(chunk).await.map_err(|_| Received::File("writing the image failed".to_owned()))?;
                job.bytes.store(n, Ordering::Relaxed);
            }
            Ok(())
        }
        .await;
        drop((tx, hash_tx));
        let written = writer.await.map_err(|e| Received::File(format!("writing the image: {e}")))?;
        let digest = hasher.await.map_err(|e| Received::File(format!("hashing the image: {e}")))?;
        // A failed write is why the sending stopped, if it did.
        written.map_err(|e| Received::File(e.to_string()))?;
        received?;
        Ok((digest, n))
    }

    /// Checks what was received and makes it the image, or records why not;
    /// wakes the reconciler either way.
    async fn finish(&self, id: &str, spec: &ImageImport, received: Result<(String, u64), ImportError>) -> ImageObservation {
        let d = self.dir.join(id);
        let outcome = match received {
            Ok((sha, n)) => self.accept(&d, spec, sha, n).await,
            Err(m) => Err(m),
        };
        let _ = tokio::fs::remove_file(d.join(PART)).await;
        let seen = match outcome {
            Ok(done) => {
                info!(image = %id, format = %done.format, bytes = done.size_bytes, "image imported");
                ImageObservation::Ready(done.file())
            }
            Err(m) => {
                warn!(image = %id, error = %m, "image import failed");
                // Recorded, so that it is not tried again until the image is deleted.
                let m = m.to_string();
                let recorded = match tokio::fs::create_dir_all(&d).await {
                    Ok(()) => tokio::fs::write(d.join(FAILED), &m).await,
                    Err(e) => Err(e),
                };
                if let Err(e) = recorded {
                    warn!(image = %id, error = %e, "cannot record a failed import");
                }
                ImageObservation::Failed(m)
            }
        };
        self.jobs().remove(id);
        if let Some(w) = self.wake.get() {
            w.wake(ObjectKind::Image, id);
        }
        seen
    }

    async fn accept(&self, d: &Path, spec: &ImageImport, sha256: String, size_bytes: u64) -> Result<Imported, ImportError> {
        if let Some(want) = spec.sha256.as_deref().filter(|w| *w != sha256) {
            return Err(ImportError::Checksum { got: sha256, want: want.to_owned() });
        }
        let part = d.join(PART);
        let vetted = tokio::task::spawn_blocking(move || crate::vetting::vet(&part)).await??;
        let done = Imported { format: vetted.format.into(), virtual_size: vetted.virtual_size, size_bytes, sha256 };
        tokio::fs::rename(d.join(PART), d.join(done.disk_name())).await.map_err(ImportError::Keep)?;
        let text = serde_json::to_vec_pretty(&done).map_err(ImportError::Record)?;
        let path = d.join(DONE);
        tokio::task::spawn_blocking(move || write_atomic(&path, &text)).await?.map_err(ImportError::Keep)?;
        Ok(done)
    }
}

/// What the writer gathers of smaller chunks before it writes them.
const WRITE_BUFFER: usize = 64 << 10;

/// Bytes written between two requests to the kernel to start writing
/// them to disk.
const WRITEBACK_EVERY: u64 = 32 << 20;

/// Writes the chunks of `rx` to `path`, then syncs it to disk. Every
/// [`WRITEBACK_EVERY`] bytes the kernel is asked to start writing back
/// what was written (`POSIX_FADV_DONTNEED` starts the writeback of dirty
/// pages without waiting for it), so the disk works while the rest
/// arrives and the final sync has little left.
fn write_synced(path: &Path, mut rx: tokio::sync::mpsc::Receiver<bytes::Bytes>) -> Result<(), ImportError> {
    use std::io::Write;
    let file = std::fs::File::create(path).map_err(ImportError::Write)?;
    // Chunks as large as the buffer go to the file without a copy into
    // it (an HTTP body's come in 100–400 KiB); smaller ones are gathered.
    let mut out = std::io::BufWriter::with_capacity(WRITE_BUFFER, file);
    let (mut written, mut flushed) = (0u64, 0u64);
    while let Some(chunk) = rx.blocking_recv() {
        out.write_all(&chunk).map_err(ImportError::Write)?;
        written += chunk.len() as u64;
        if written - flushed >= WRITEBACK_EVERY {
            out.flush().map_err(ImportError::Write)?;
            start_writeback(out.get_ref(), flushed, written - flushed);
            flushed = written;
        }
    }
    let file = out.into_inner().map_err(|e| ImportError::Write(e.into_error()))?;
    file.sync_all().map_err(ImportError::Write)
}

/// The SHA-256 of the chunks of `rx`, in lowercase hex.
fn sha256_of(mut rx: tokio::sync::mpsc::Receiver<bytes::Bytes>) -> String {
    let mut hash = Sha256::new();
    while let Some(chunk) = rx.blocking_recv() {
        hash.update(&chunk);
    }
    hex(&hash.finalize())
}

/// Asks the kernel to start writing `len` bytes of `file` from `offset`
/// to disk, and to drop them from the page cache once written; a refusal
/// only means the final sync does all of it.
fn start_writeback(file: &std::fs::File, offset: u64, len: u64) {
    let len = std::num::NonZeroU64::new(len);
    let _ = rustix::fs::fadvise(file, offset, len, rustix::fs::Advice::DontNeed);
}

/// `bytes` in lowercase hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The driver, shared with its download tasks.
pub struct ImportDriver(pub Arc<Imports>);

#[async_trait]
impl Driver<ImageImport, ImageObservation> for ImportDriver {
    async fn ensure(&self, t: &ImageTarget) -> Result<(ImageObservation, Requeue), BackendError> {
        let step = std::time::Duration::from_millis(500);
        if let Some(job) = self.0.jobs().get(&t.id).cloned() {
            return Ok((Imports::progress(&job), Requeue::after(step)));
        }
        if let Some(done) = self.0.on_disk(&t.id).await {
            return Ok((done, Requeue::AwaitChange));
        }
        let Some(url) = t.spec.source.clone() else {
            let why = format!("waiting for the upload: PUT /api/fulfillment/v1/images/{}/content", t.id);
            return Ok((ImageObservation::Pending(why), Requeue::AwaitChange));
        };
        let job = self.0.start_download(t, url);
        Ok((Imports::progress(&job), Requeue::after(step)))
    }

    async fn delete(&self, id: &str) -> Result<Cleanup, BackendError> {
        if let Some(job) = self.0.jobs().remove(id)
            && let Some(task) = job.task.lock().unwrap_or_else(|p| p.into_inner()).take()
        {
            task.abort();
        }
        let d = self.0.dir.join(id);
        match tokio::fs::remove_dir_all(&d).await {
            Ok(()) => info!(image = %id, "imported image removed"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(BackendError::transient(format!("removing {}", d.display()), e)),
        }
        Ok(Cleanup::Done)
    }
}

#[async_trait]
impl ImageUploads for ImportDriver {
    async fn upload(&self, t: &ImageTarget, body: Upload) -> Result<ImageObservation, BackendError> {
        if let Some(ImageObservation::Ready(_)) = self.0.on_disk(&t.id).await {
            return Err(BackendError::invalid("uploading an image", "it is imported already"));
        }
        let job = Arc::new(Job::default());
        {
            let mut jobs = self.0.jobs();
            if jobs.contains_key(&t.id) {
                return Err(BackendError::invalid("uploading an image", "an import of this image is under way"));
            }
            jobs.insert(t.id.clone(), job.clone());
        }
        let received = self.0.receive(&t.id, body, t.spec.max_bytes, &job).await.map_err(|e| ImportError::File(e.into_message()));
        Ok(self.0.finish(&t.id, &t.spec, received).await)
    }
}
