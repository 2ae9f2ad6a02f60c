//! Command-line flags of the server's operational features, shared by its
//! subcommands: TLS (and the plain-HTTP rule).

use std::path::{Path, PathBuf};

use crate::tls::TlsSource;

/// Where the self-signed certificate is kept in the data directory.
pub const SELF_SIGNED_DIR: &str = "tls";

/// TLS of the API.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct TlsArgs {
    /// Serve HTTPS with this PEM certificate chain (leaf first); read again when it changes.
    #[arg(long, env = "VMAAS_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The certificate's PEM private key; read again when it changes.
    #[arg(long, env = "VMAAS_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Serve HTTPS with a self-signed certificate made once and kept in
    /// DATA_DIR/tls (for development); its fingerprint is logged.
    #[arg(long, env = "VMAAS_TLS_SELF_SIGNED", conflicts_with = "tls_cert")]
    pub tls_self_signed: bool,
    /// Further DNS names or addresses of the self-signed certificate (it
    /// always covers localhost, 127.0.0.1 and ::1).
    #[arg(long = "tls-name", env = "VMAAS_TLS_NAMES", value_delimiter = ',')]
    pub tls_names: Vec<String>,
    /// Serve plain HTTP on an address other than loopback (tokens then
    /// cross the network in clear).
    #[arg(long, env = "VMAAS_INSECURE_LISTEN")]
    pub insecure_listen: bool,
}

impl TlsArgs {
    /// The certificate the flags ask for; `None` for plain HTTP.
    pub fn source(&self, data_dir: &Path) -> Option<TlsSource> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(TlsSource::Files { cert: cert.clone(), key: key.clone() }),
            _ if self.tls_self_signed => Some(TlsSource::SelfSigned { dir: data_dir.join(SELF_SIGNED_DIR), names: self.tls_names.clone() }),
            _ => None,
        }
    }
}
