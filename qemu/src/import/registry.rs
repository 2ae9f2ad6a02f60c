//! Images from OCI registries (`docker://HOST[:PORT]/REPOSITORY[:TAG|@sha256:DIGEST]`),
//! laid out as KubeVirt's containerDisks: the disk is the one file under
//! `/disk/` in the image's layers. The manifest (of `linux/amd64` in an
//! index) is fetched and, when the reference names a digest, checked
//! against it; the layers together may not exceed the import's byte limit,
//! and each is verified by its digest as it streams in and kept no longer
//! than it takes to look for the disk. Every request goes through a
//! [`FetchProxy`] that enforces the image source policy.

use std::io::Read;
use std::path::Path;

use oci_client::client::{ClientConfig, ClientProtocol, linux_amd64_resolver};
use oci_client::errors::OciDistributionError;
use oci_client::manifest::OciImageManifest;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use sha2::{Digest, Sha256};
use vmaas_backend::ImageImport;

use super::{Fetch, Imports, Job, PART, Received, hex};
use crate::fetch_proxy::FetchProxy;

/// The scheme of a registry image reference.
pub const SCHEME: &str = "docker://";

/// Layers an image may have at most.
const MAX_LAYERS: usize = 64;

/// A layer while it is looked through.
const LAYER: &str = "layer.part";

/// Why a layer holds no disk, or a disk that cannot be taken.
#[derive(Debug, thiserror::Error)]
enum LayerError {
    /// Reading the layer failed (not a tar, a broken gzip stream, a full disk).
    #[error("reading the layer: {0}")]
    Read(#[from] std::io::Error),
    /// The disk is larger than the import may be.
    #[error("its disk has {0} bytes, more than the {1} bytes this server accepts")]
    TooLarge(u64, u64),
}

impl Imports {
    /// Pulls the containerDisk `source` names into `disk.part` of `id`: the
    /// disk's SHA-256 and size.
    pub(super) async fn pull_into(&self, id: &str, source: &str, spec: &ImageImport, job: &Job) -> Result<(String, u64), Fetch> {
        let text = source.strip_prefix(SCHEME).unwrap_or(source);
        let reference: Reference = text.parse().map_err(|e| Fetch::File(format!("{source:?} is not an image reference: {e}")))?;
        let proxy = FetchProxy::start(self.sources.clone()).await.map_err(|e| Fetch::Failed(format!("starting the fetch proxy: {e}")))?;
        let client = self.registry_client(&proxy);
        let pulled = self.pull_layers(&client, &reference, id, spec, job).await;
        match (pulled, proxy.refused()) {
            // A refusal is told like any failed fetch, whatever the client made of it.
            (Err(_), Some(why)) => Err(Fetch::Failed(format!("pulling {source}: {why}"))),
            (outcome, _) => outcome,
        }
    }

    /// An OCI client that makes every request through `proxy`, speaking
    /// plain HTTP only to the registries the operator named.
    fn registry_client(&self, proxy: &FetchProxy) -> Client {
        let plain = self.sources.plain_http_registries();
        let config = ClientConfig {
            protocol: if plain.is_empty() { ClientProtocol::Https } else { ClientProtocol::HttpsExcept(plain.to_vec()) },
            platform_resolver: Some(Box::new(linux_amd64_resolver)),
            read_timeout: Some(self.sources.limits.read),
            connect_timeout: Some(self.sources.limits.read),
            http_proxy: Some(proxy.url.clone()),
            https_proxy: Some(proxy.url.clone()),
            max_concurrent_download: 1,
            ..ClientConfig::default()
        };
        Client::new(config)
    }

    async fn pull_layers(
        &self,
        client: &Client,
        reference: &Reference,
        id: &str,
        spec: &ImageImport,
        job: &Job,
    ) -> Result<(String, u64), Fetch> {
        let auth = match &spec.credentials {
            Some(c) => RegistryAuth::Basic(c.username.clone(), c.password.clone()),
            None => RegistryAuth::Anonymous,
        };
        let authed = spec.credentials.is_some();
        let (manifest, digest) = client.pull_image_manifest(reference, &auth).await.map_err(|e| told(reference, authed, e))?;
        tracing::info!(image = %id, reference = %reference, %digest, layers = manifest.layers.len(), "pulling a registry image");
        check_layers(&manifest, spec.max_bytes)?;
        let d = self.dir.join(id);
        // The topmost layer holding a disk wins, as it would in the container's file system.
        for layer in manifest.layers.iter().rev() {
            let stream = client.pull_blob_stream(reference, layer).await.map_err(|e| told(reference, authed, e))?;
            if let Some(len) = stream.content_length {
                *job.total.lock().unwrap_or_else(|p| p.into_inner()) = Some(len);
            }
            self.receive(id, stream, spec.max_bytes, job).await.map_err(|e| match e {
                Received::Body(why) => Fetch::Failed(why),
                Received::File(why) => Fetch::File(why),
            })?;
            tokio::fs::rename(d.join(PART), d.join(LAYER)).await.map_err(|e| Fetch::File(format!("keeping a layer: {e}")))?;
            let (from, to, max) = (d.join(LAYER), d.join(PART), spec.max_bytes);
            let found = tokio::task::spawn_blocking(move || disk_of_layer(&from, &to, max)).await;
            let _ = tokio::fs::remove_file(d.join(LAYER)).await;
            match found {
                Ok(Ok(Some(disk))) => return Ok(disk),
                Ok(Ok(None)) => {}
                Ok(Err(e)) => return Err(Fetch::File(format!("layer {}: {e}", layer.digest))),
                Err(e) => return Err(Fetch::File(format!("reading layer {}: {e}", layer.digest))),
            }
        }
        Err(Fetch::File(format!(
            "{reference} holds no disk: a containerDisk has its disk image (qcow2 or raw) as the one file under /disk/"
        )))
    }
}

/// Refuses a manifest with too many layers, or layers larger in all than
/// the limit: however many are pulled before the disk is found, the
/// download stays within it.
fn check_layers(manifest: &OciImageManifest, max: u64) -> Result<(), Fetch> {
    if manifest.layers.len() > MAX_LAYERS {
        return Err(Fetch::File(format!("the image has {} layers, more than {MAX_LAYERS}", manifest.layers.len())));
    }
    let total = manifest.layers.iter().try_fold(0u64, |sum, l| u64::try_from(l.size).ok().and_then(|s| sum.checked_add(s)));
    match total {
        Some(n) if n <= max => Ok(()),
        Some(n) => Err(Fetch::File(format!("the image's layers have {n} bytes, more than the {max} bytes this server accepts"))),
        None => Err(Fetch::File("the image's manifest gives a layer a size that is no size".into())),
    }
}

/// What the tenant is told of a failed pull: the registry's own answer
/// (it is at an allowed address), or, for a connection that failed, the
/// words of any failed fetch.
fn told(reference: &Reference, authed: bool, e: OciDistributionError) -> Fetch {
    use OciDistributionError as E;
    use oci_client::errors::OciErrorCode as Code;
    match e {
        E::RequestError(_) | E::IoError(_) | E::GenericError(_) => Fetch::Failed(format!("pulling {reference}: {e}")),
        E::ImageManifestNotFoundError(_) => Fetch::File(format!("the registry has no image {reference}")),
        E::RegistryError { envelope, .. }
            if envelope.errors.iter().any(|e| matches!(e.code, Code::ManifestUnknown | Code::NameUnknown)) =>
        {
            Fetch::File(format!("the registry has no image {reference}: {envelope}"))
        }
        E::UnauthorizedError { .. } | E::AuthenticationFailure(_) if authed => {
            Fetch::File(format!("the registry refused the credentials given (spec.registry_credentials) to pull {reference}"))
        }
        E::UnauthorizedError { .. } | E::AuthenticationFailure(_) => Fetch::File(format!(
            "the registry asks for credentials to pull {reference}, and anonymous pulls are refused: give spec.registry_credentials"
        )),
        E::RegistryError { envelope, .. } if envelope.errors.iter().any(|e| matches!(e.code, Code::Unauthorized | Code::Denied)) => {
            Fetch::File(match authed {
                true => format!("the registry refused the credentials given (spec.registry_credentials) to pull {reference}: {envelope}"),
                false => format!("the registry asks for credentials to pull {reference}: give spec.registry_credentials ({envelope})"),
            })
        }
        E::RegistryError { envelope, .. } => Fetch::File(format!("the registry refused {reference}: {envelope}")),
        E::DigestError(d) => Fetch::File(format!("{reference}: the registry's answer is not the one its digest names: {d}")),
        other => Fetch::File(format!("pulling {reference}: {other}")),
    }
}

/// Copies the disk of the layer at `layer` (a tar, gzipped or not) to
/// `to`: its SHA-256 and size, or nothing when the layer has no file under
/// `disk/`.
fn disk_of_layer(layer: &Path, to: &Path, max: u64) -> Result<Option<(String, u64)>, LayerError> {
    let mut file = std::fs::File::open(layer)?;
    let mut magic = [0u8; 2];
    let gzipped = file.read(&mut magic)? == 2 && magic == [0x1f, 0x8b];
    let file = std::fs::File::open(layer)?;
    // Parallel gzip writers (umoci among them) write several gzip members.
    let reader: Box<dyn Read> = if gzipped { Box::new(flate2::read::MultiGzDecoder::new(file)) } else { Box::new(file) };
    let mut archive = tar::Archive::new(reader);
    for entry in archive.entries()? {
        let mut entry = entry?;
        if !entry.header().entry_type().is_file() || !under_disk(&entry.path()?) {
            continue;
        }
        let size = entry.header().size()?;
        if size > max {
            return Err(LayerError::TooLarge(size, max));
        }
        return Ok(Some(copy_hashed(&mut entry, to)?));
    }
    Ok(None)
}

/// Whether `path` (in a layer) is a file right under `disk/`.
fn under_disk(path: &Path) -> bool {
    let parts: Vec<_> = path.components().filter(|c| !matches!(c, std::path::Component::CurDir | std::path::Component::RootDir)).collect();
    parts.len() == 2 && parts[0].as_os_str() == "disk"
}

/// Writes `from` to `to`, hashing it, and syncs it: the SHA-256 and size.
fn copy_hashed(from: &mut impl Read, to: &Path) -> std::io::Result<(String, u64)> {
    use std::io::Write;
    let mut out = std::io::BufWriter::with_capacity(4 << 20, std::fs::File::create(to)?);
    let (mut hash, mut n, mut buf) = (Sha256::new(), 0u64, vec![0u8; 1 << 20]);
    loop {
        let got = from.read(&mut buf)?;
        if got == 0 {
            break;
        }
        hash.update(&buf[..got]);
        out.write_all(&buf[..got])?;
        n += got as u64;
    }
    out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    Ok((hex(&hash.finalize()), n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_files_right_under_disk_are_disks() {
        for p in ["disk/disk.qcow2", "./disk/a.img", "/disk/x"] {
            assert!(under_disk(Path::new(p)), "{p}");
        }
        for p in ["disk", "disk/a/b.img", "etc/disk/a", "disks/a.img"] {
            assert!(!under_disk(Path::new(p)), "{p}");
        }
    }

    #[test]
    fn a_gzipped_layer_gives_its_disk_and_a_layer_without_one_none() {
        let dir = tempfile::tempdir().unwrap();
        let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast()));
        let data = b"QFI\xfb not really a disk";
        let header = |len: usize| {
            let mut h = tar::Header::new_gnu();
            h.set_size(len as u64);
            h.set_mode(0o644);
            h
        };
        tar.append_data(&mut header(1), "etc/hostname", &b"x"[..]).unwrap();
        tar.append_data(&mut header(data.len()), "disk/disk.qcow2", &data[..]).unwrap();
        let layer = dir.path().join("l");
        std::fs::write(&layer, tar.into_inner().unwrap().finish().unwrap()).unwrap();
        let to = dir.path().join("d");
        let (sha, n) = disk_of_layer(&layer, &to, 1 << 20).unwrap().unwrap();
        assert_eq!((std::fs::read(&to).unwrap(), n), (data.to_vec(), data.len() as u64));
        assert_eq!(sha, hex(&Sha256::digest(data)));
        assert!(matches!(disk_of_layer(&layer, &to, 4), Err(LayerError::TooLarge(_, 4))));
        let mut empty = tar::Builder::new(Vec::new());
        empty.append_data(&mut header(1), "etc/hostname", &b"x"[..]).unwrap();
        std::fs::write(&layer, empty.into_inner().unwrap()).unwrap();
        assert!(disk_of_layer(&layer, &to, 1 << 20).unwrap().is_none());
    }
}
