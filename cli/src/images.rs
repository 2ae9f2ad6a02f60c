//! `vmaas image`: the OS images VMs can boot from, and importing one from
//! a URL or a file, with a progress bar.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Subcommand;
use tokio::io::AsyncReadExt;
use vmaas_client::Client;
use vmaas_model::image::{Image, ImageSpec, ImageState, RegistryCredentials};
use vmaas_model::{CreateObject, MetadataInput};

use crate::Format;
use crate::net::{one, page};

const IMAGES: &str = "/images";

/// `vmaas image …`
#[derive(Debug, Subcommand)]
pub enum ImageCmd {
    /// List the images VMs can boot from (`vm_image`).
    #[command(alias = "ls")]
    List(crate::args::ListArgs),
    /// Show one image.
    Get {
        /// Its name (or an imported image's id).
        name: String,
    },
    /// Import an image from an http(s) URL, a `docker://` registry reference
    /// (a containerDisk) or a local file (qcow2 or raw).
    Import {
        /// Its name, for `vm_image`.
        name: String,
        /// An http(s) URL the server fetches, or a file uploaded from here.
        source: String,
        /// The SHA-256 the file must have.
        #[arg(long)]
        sha256: Option<String>,
        /// Publish it for every tenant (administrators).
        #[arg(long)]
        public: bool,
        /// A description.
        #[arg(long, default_value = "")]
        description: String,
        /// The user name a `docker://` registry that refuses anonymous
        /// pulls is asked with; its password is read from
        /// `VMAAS_REGISTRY_PASSWORD`, or from standard input with
        /// `--registry-password-stdin`.
        #[arg(long)]
        registry_username: Option<String>,
        /// Read the registry password from standard input (one line).
        #[arg(long, requires = "registry_username")]
        registry_password_stdin: bool,
    },
    /// Delete your imported images no VM or volume uses.
    Prune {
        /// Only list what would go.
        #[arg(long)]
        dry_run: bool,
        /// Only images unused for at least this long, e.g. 1h or 7d.
        #[arg(long)]
        unused_for: Option<String>,
    },
    /// Delete an imported image (refused while VMs or volumes use it).
    #[command(alias = "rm")]
    Delete {
        /// Its name or id.
        name: String,
    },
}

const HEADER: [&str; 6] = ["NAME", "STATE", "FORMAT", "SIZE", "REFS", "DESCRIPTION"];

fn row(i: &Image) -> Vec<String> {
    let state = i.status.state.as_str().trim_start_matches("IMAGE_STATE_").to_owned();
    let size = format!("{}Mi", i.status.virtual_size.div_ceil(1 << 20));
    vec![i.metadata.name.clone(), state, i.status.format.clone(), size, i.status.references.to_string(), i.spec.description.clone()]
}

/// Polls image `id` until it is READY, drawing the server's progress.
async fn follow(client: &Client, id: &str) -> anyhow::Result<Image> {
    let mut bar = crate::progress::Bar::new();
    let deadline = Instant::now() + Duration::from_secs(6 * 3600);
    loop {
        let i: Image = client.get_object(IMAGES, id).await?;
        match i.status.state {
            ImageState::Ready => {
                bar.show(i.status.size_bytes, Some(i.status.size_bytes));
                bar.end();
                return Ok(i);
            }
            ImageState::Failed => {
                bar.end();
                bail!("import of {:?} failed: {}", i.metadata.name, i.status.message.unwrap_or_default());
            }
            ImageState::Importing => bar.show(i.status.progress_bytes, Some(i.status.size_bytes).filter(|n| *n > 0)),
            ImageState::Pending => {}
        }
        if Instant::now() > deadline {
            return Err(crate::exit::TimedOut(format!("gave up waiting for the import of {:?}", i.metadata.name)).into());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Streams `path` to image `id`, drawing how much was sent.
async fn upload(client: &Client, id: &str, path: &Path) -> anyhow::Result<Image> {
    let file = tokio::fs::File::open(path).await.with_context(|| format!("opening {}", path.display()))?;
    let total = file.metadata().await?.len();
    let sent = Arc::new(AtomicU64::new(0));
    let counter = sent.clone();
    let chunks = futures::stream::unfold(file, move |mut f| {
        let counter = counter.clone();
        async move {
            let mut buf = vec![0u8; 1 << 20];
            match f.read(&mut buf).await {
                Ok(0) => None,
                Ok(n) => {
                    buf.truncate(n);
                    counter.fetch_add(n as u64, Ordering::Relaxed);
                    Some((Ok::<_, std::io::Error>(buf), f))
                }
                Err(e) => Some((Err(e), f)),
            }
        }
    });
    let mut bar = crate::progress::Bar::new();
    let put = client.upload_image(id, chunks);
    tokio::pin!(put);
    let done = loop {
        tokio::select! {
            r = &mut put => break r,
            _ = tokio::time::sleep(Duration::from_millis(200)) => bar.show(sent.load(Ordering::Relaxed), Some(total)),
        }
    };
    bar.show(sent.load(Ordering::Relaxed), Some(total));
    bar.end();
    Ok(done?)
}

/// The registry password: `VMAAS_REGISTRY_PASSWORD`, or a line of
/// standard input when `stdin`.
fn registry_password(stdin: bool) -> anyhow::Result<String> {
    if stdin {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).context("reading the registry password from standard input")?;
        return Ok(line.trim_end_matches(['\r', '\n']).to_owned());
    }
    std::env::var("VMAAS_REGISTRY_PASSWORD")
        .context("--registry-username needs a password: set VMAAS_REGISTRY_PASSWORD or pass --registry-password-stdin")
}

async fn import(client: &Client, name: String, source: String, spec: ImageSpec, password: Option<String>) -> anyhow::Result<Image> {
    let is_url = source.contains("://");
    let spec = ImageSpec { source: is_url.then(|| source.clone()), ..spec };
    let req = CreateObject {
        type_url: None,
        id: None,
        metadata: Some(MetadataInput { name: Some(name), ..Default::default() }),
        spec,
        status: None,
    };
    // The model never writes a password out, so it is put in here.
    let mut body = serde_json::to_value(&req)?;
    if let Some(p) = password {
        body["spec"]["registry_credentials"]["password"] = p.into();
    }
    let created: Image = client.create_object(IMAGES, &body).await?;
    if is_url { follow(client, &created.id).await } else { upload(client, &created.id, Path::new(&source)).await }
}

/// Runs a `vmaas image` command.
pub async fn image(client: &Client, cmd: ImageCmd, format: Format) -> anyhow::Result<()> {
    match cmd {
        ImageCmd::List(l) => page(format, &client.list_objects_where::<Image>(IMAGES, l.filter()?.as_deref()).await?, row, &HEADER),
        ImageCmd::Get { name } => {
            let i: Image = client.get_object(IMAGES, &name).await?;
            one(format, &i, row(&i), &HEADER)
        }
        ImageCmd::Import { name, source, sha256, public, description, registry_username, registry_password_stdin } => {
            let password = registry_username.as_ref().map(|_| registry_password(registry_password_stdin)).transpose()?;
            let registry_credentials = registry_username.map(|username| RegistryCredentials { username, password: String::new() });
            let spec = ImageSpec { description, sha256, public, registry_credentials, ..Default::default() };
            let i = import(client, name, source, spec, password).await?;
            one(format, &i, row(&i), &HEADER)
        }
        ImageCmd::Prune { dry_run, unused_for } => {
            let pruned = client.prune_images(dry_run, unused_for.as_deref()).await?;
            if dry_run && format == Format::Table {
                eprintln!("would prune {} image(s):", pruned.items.len());
            }
            page(format, &pruned, row, &HEADER)
        }
        ImageCmd::Delete { name } => {
            let i: Image = client.get_object(IMAGES, &name).await?;
            let i: Image = client.delete_object(IMAGES, &i.id).await?;
            one(format, &i, row(&i), &HEADER)
        }
    }
}
