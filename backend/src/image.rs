//! The images a backend can boot VMs from, as it finds them.

/// One image of the backend's catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogImage {
    /// Its name, as `vm_image` gives it.
    pub name: String,
    /// What it holds.
    pub description: String,
    /// The disk format: `qcow2` or `raw` (empty when unreadable).
    pub format: String,
    /// The size the guest sees, in bytes.
    pub virtual_size: u64,
    /// Why VMs cannot boot from it, if they cannot.
    pub problem: Option<String>,
    /// Whether it is the one VMs naming `default` boot.
    pub default: bool,
}

/// The desired state of one imported image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageImport {
    /// The `http(s)` URL or `docker://` reference to import it from;
    /// none: it is uploaded.
    pub source: Option<String>,
    /// The SHA-256 the file must have, in lower-case hex.
    pub sha256: Option<String>,
    /// The largest file accepted, in bytes.
    pub max_bytes: u64,
    /// What a registry that refuses anonymous pulls is asked with, while
    /// the import goes on (none: anonymous).
    pub credentials: Option<Credentials>,
}

/// A user name and password, in the clear only in memory, only while an
/// import needs them; never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The user name.
    pub username: String,
    /// The password or token.
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials").field("username", &self.username).field("password", &"<redacted>").finish()
    }
}

/// One imported image as a driver sees it.
pub type ImageTarget = crate::driver::Target<ImageImport>;

/// A usable image file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageFile {
    /// `qcow2` or `raw`.
    pub format: String,
    /// The size the guest sees.
    pub virtual_size: u64,
    /// The size of the file.
    pub size_bytes: u64,
    /// Its SHA-256, in hex.
    pub sha256: String,
}

/// What an image driver reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageObservation {
    /// Waiting for something (the upload); the message says what.
    Pending(String),
    /// Being imported: bytes so far, of how many if known.
    Importing {
        /// Bytes received.
        bytes: u64,
        /// Bytes expected, if the source said.
        total: Option<u64>,
    },
    /// Usable.
    Ready(ImageFile),
    /// Refused or broken; the message says why. It stands until the image
    /// is deleted.
    Failed(String),
}

/// The driver of imported images.
pub type ImageDriver = dyn crate::driver::Driver<ImageImport, ImageObservation>;

/// A stream of bytes uploaded by a client.
pub type Upload = std::pin::Pin<Box<dyn futures::Stream<Item = Result<bytes::Bytes, std::io::Error>> + Send>>;

/// The file at `path` as an [`Upload`], read `chunk` bytes at a time.
pub async fn file_upload(path: &std::path::Path, chunk: usize) -> std::io::Result<Upload> {
    let file = tokio::fs::File::open(path).await?;
    let chunks = futures::stream::unfold(Some(file), move |file| async move {
        use tokio::io::AsyncReadExt;
        let mut file = file?;
        let mut buf = vec![0; chunk];
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(bytes::Bytes::from(buf)), Some(file)))
            }
            Err(e) => Some((Err(e), None)),
        }
    });
    Ok(Box::pin(chunks))
}

/// Takes uploaded images.
#[async_trait::async_trait]
pub trait ImageUploads: Send + Sync {
    /// Stores the file of image `t` from `body`, streamed (never held whole
    /// in memory), checked as an import is; what the image is then.
    async fn upload(&self, t: &ImageTarget, body: Upload) -> Result<ImageObservation, crate::BackendError>;
}
