//! TLS for the API (rustls): a certificate and key from PEM files, read
//! again when they change on disk (hot reload, for certificate rotation
//! without a restart), or a self-signed certificate for development kept
//! in the data directory. ALPN offers HTTP/2 (gRPC) and HTTP/1.1.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use rustls::crypto::aws_lc_rs;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use sha2::{Digest, Sha256};
use tokio_rustls::TlsAcceptor;
use tracing::{info, warn};

/// How often the certificate files are looked at for changes.
pub const RELOAD_POLL: Duration = Duration::from_secs(1);

/// File names of the self-signed certificate in its directory.
pub const SELF_SIGNED_CERT: &str = "self-signed.crt";
/// The self-signed certificate's key, beside it (mode 0600).
pub const SELF_SIGNED_KEY: &str = "self-signed.key";

/// Where the server's certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsSource {
    /// PEM files (the certificate chain, leaf first, and its private key),
    /// reloaded when they change.
    Files {
        /// The certificate chain.
        cert: PathBuf,
        /// The private key (PKCS#8, PKCS#1 or SEC1).
        key: PathBuf,
    },
    /// A self-signed certificate in `dir`, made on first use and kept, for
    /// `localhost`, the loopback addresses and `names`.
    SelfSigned {
        /// Where it is kept.
        dir: PathBuf,
        /// Further DNS names or IP addresses it is for.
        names: Vec<String>,
    },
}

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file cannot be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A file holds no usable PEM certificate or key.
    #[error("{path}: {reason}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// rustls refused the certificate or key.
    #[error("TLS: {0}")]
    Rustls(#[from] rustls::Error),
    /// The self-signed certificate cannot be made.
    #[error("making the self-signed certificate: {0}")]
    Generate(#[from] rcgen::Error),
}

/// The server's TLS: an acceptor whose certificate can change under it.
#[derive(Clone)]
pub struct Tls {
    acceptor: TlsAcceptor,
    resolver: Arc<Reloading>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").field("cert", &self.resolver.cert).field("fingerprint", &self.fingerprint()).finish()
    }
}

impl Tls {
    /// Loads (or, self-signed, makes) the certificate `source` names.
    pub fn load(source: &TlsSource) -> Result<Self, TlsError> {
        let (cert, key) = match source {
            TlsSource::Files { cert, key } => (cert.clone(), key.clone()),
            TlsSource::SelfSigned { dir, names } => self_signed(dir, names)?,
        };
        let resolver = Arc::new(Reloading::load(cert, key)?);
        let provider = Arc::new(aws_lc_rs::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_cert_resolver(resolver.clone());
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Self { acceptor: TlsAcceptor::from(Arc::new(config)), resolver })
    }

    /// What accepts connections.
    pub fn acceptor(&self) -> &TlsAcceptor {
        &self.acceptor
    }

    /// The certificate file in use.
    pub fn cert_path(&self) -> &Path {
        &self.resolver.cert
    }

    /// SHA-256 of the leaf certificate in use, as `AB:CD:…`.
    pub fn fingerprint(&self) -> String {
        self.resolver.current().1.clone()
    }

    /// Looks at the files every [`RELOAD_POLL`] and takes a changed
    /// certificate for new connections; a broken one is logged and the
    /// one in use is kept. Runs until the task is aborted.
    pub async fn watch(self) {
        let mut seen = stamp(&self.resolver.cert, &self.resolver.key);
        loop {
            tokio::time::sleep(RELOAD_POLL).await;
            let now = stamp(&self.resolver.cert, &self.resolver.key);
            if now == seen {
                continue;
            }
            seen = now;
            match self.resolver.reload() {
                Ok(fp) => info!(cert = %self.resolver.cert.display(), fingerprint = %fp, "TLS certificate reloaded"),
                Err(e) => warn!(error = %e, "the changed TLS certificate cannot be used; keeping the one in use"),
            }
        }
    }
}

/// When the files were last changed, and how big they are.
fn stamp(cert: &Path, key: &Path) -> [Option<(SystemTime, u64)>; 2] {
    let one = |p: &Path| std::fs::metadata(p).ok().and_then(|m| Some((m.modified().ok()?, m.len())));
    [one(cert), one(key)]
}

/// A certificate resolver whose certificate can be replaced.
struct Reloading {
    cert: PathBuf,
    key: PathBuf,
    current: RwLock<(Arc<CertifiedKey>, String)>,
}

impl std::fmt::Debug for Reloading {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reloading").field("cert", &self.cert).finish()
    }
}

impl Reloading {
    fn load(cert: PathBuf, key: PathBuf) -> Result<Self, TlsError> {
        let loaded = certified_key(&cert, &key)?;
        Ok(Self { cert, key, current: RwLock::new(loaded) })
    }

    fn current(&self) -> (Arc<CertifiedKey>, String) {
        self.current.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Reads the files again; the new fingerprint.
    fn reload(&self) -> Result<String, TlsError> {
        let loaded = certified_key(&self.cert, &self.key)?;
        let fp = loaded.1.clone();
        *self.current.write().unwrap_or_else(std::sync::PoisonError::into_inner) = loaded;
        Ok(fp)
    }
}

impl ResolvesServerCert for Reloading {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current().0)
    }
}

/// The certificate chain and key of two PEM files, checked to belong
/// together, with the leaf's fingerprint.
fn certified_key(cert: &Path, key: &Path) -> Result<(Arc<CertifiedKey>, String), TlsError> {
    let read = |p: &Path| std::fs::read(p).map_err(|source| TlsError::Io { path: p.to_owned(), source });
    let pem_err = |p: &Path, reason: String| TlsError::Pem { path: p.to_owned(), reason };
    let cert_pem = read(cert)?;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| pem_err(cert, format!("not a PEM certificate chain: {e}")))?;
    let Some(leaf) = chain.first() else {
        return Err(pem_err(cert, "holds no certificate".into()));
    };
    let fingerprint = fingerprint(leaf);
    let key_der = PrivateKeyDer::from_pem_slice(&read(key)?).map_err(|e| pem_err(key, format!("not a PEM private key: {e}")))?;
    let provider = aws_lc_rs::default_provider();
    let certified = CertifiedKey::from_der(chain, key_der, &provider)
        .map_err(|e| pem_err(key, format!("does not go with the certificate {}: {e}", cert.display())))?;
    Ok((Arc::new(certified), fingerprint))
}

/// SHA-256 of a DER certificate as colon-separated upper-case hex.
pub fn fingerprint(der: &[u8]) -> String {
    Sha256::digest(der).iter().map(|b| format!("{b:02X}")).collect::<Vec<_>>().join(":")
}

/// The self-signed certificate in `dir`, made if absent: its two paths.
fn self_signed(dir: &Path, names: &[String]) -> Result<(PathBuf, PathBuf), TlsError> {
    let (cert, key) = (dir.join(SELF_SIGNED_CERT), dir.join(SELF_SIGNED_KEY));
    if cert.exists() && key.exists() {
        return Ok((cert, key));
    }
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| TlsError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let mut all = vec!["localhost".to_owned(), "127.0.0.1".to_owned(), "::1".to_owned()];
    all.extend(names.iter().filter(|n| !n.is_empty()).cloned());
    all.dedup();
    let pair = rcgen::KeyPair::generate()?;
    let mut params = rcgen::CertificateParams::new(all)?;
    params.distinguished_name.push(rcgen::DnType::CommonName, "vmaas-server (self-signed)");
    params.not_before = rcgen::date_time_ymd(2020, 1, 1);
    params.not_after = rcgen::date_time_ymd(2100, 1, 1);
    let made = params.self_signed(&pair)?;
    write_private(&key, pair.serialize_pem().as_bytes()).map_err(io(&key))?;
    std::fs::write(&cert, made.pem()).map_err(io(&cert))?;
    Ok((cert, key))
}

/// Writes a file only its owner can read.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)?;
    f.write_all(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_self_signed_certificate_is_made_once_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let first = Tls::load(&TlsSource::SelfSigned { dir: dir.path().into(), names: vec!["vmaas.test".into()] }).unwrap();
        let again = Tls::load(&TlsSource::SelfSigned { dir: dir.path().into(), names: vec![] }).unwrap();
        assert_eq!(first.fingerprint(), again.fingerprint());
        assert_eq!(first.fingerprint().len(), 32 * 3 - 1);
        let mode = std::fs::metadata(dir.path().join(SELF_SIGNED_KEY)).unwrap().permissions();
        assert_eq!(std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777, 0o600);
    }

    #[test]
    fn a_key_of_another_certificate_is_refused_naming_the_file() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (cert, _) = self_signed(a.path(), &[]).unwrap();
        let (_, key) = self_signed(b.path(), &[]).unwrap();
        let e = Tls::load(&TlsSource::Files { cert, key: key.clone() }).unwrap_err().to_string();
        assert!(e.contains(&key.display().to_string()) && e.contains("does not go with"), "{e}");
        let e = Tls::load(&TlsSource::Files { cert: key.clone(), key: key.clone() }).unwrap_err().to_string();
        assert!(e.contains("certificate"), "{e}");
    }

    #[test]
    fn a_changed_certificate_is_taken_and_a_broken_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = self_signed(&dir.path().join("a"), &[]).unwrap();
        let tls = Tls::load(&TlsSource::Files { cert: cert.clone(), key: key.clone() }).unwrap();
        let before = tls.fingerprint();
        let (cert2, key2) = self_signed(&dir.path().join("b"), &[]).unwrap();
        std::fs::copy(&cert2, &cert).unwrap();
        std::fs::copy(&key2, &key).unwrap();
        let after = tls.resolver.reload().unwrap();
        assert_ne!(before, after);
        assert_eq!(tls.fingerprint(), after);
        std::fs::write(&key, "garbage").unwrap();
        assert!(tls.resolver.reload().is_err());
        assert_eq!(tls.fingerprint(), after, "the certificate in use is kept");
    }
}
