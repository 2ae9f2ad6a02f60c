//! A proxy of the cluster the server reaches over HTTPS at a URL it is
//! given (CDI's upload proxy, KubeVirt's export proxy), never at an address
//! the cluster reports.

use std::path::PathBuf;
use std::time::Duration;

use vmaas_backend::BackendError;

/// A proxy, as the server reaches it.
#[derive(Debug, Clone)]
pub struct Proxy {
    /// Its URL (`https://cdi-uploadproxy.example`), without a path.
    pub url: String,
    /// A PEM file of the CA its certificate is signed by (else the system's roots).
    pub ca: Option<PathBuf>,
}

impl Proxy {
    /// An HTTP client for the proxy (`what` names it in errors).
    pub(crate) fn client(&self, what: &str) -> Result<reqwest::Client, BackendError> {
        let mut b = reqwest::Client::builder().connect_timeout(Duration::from_secs(10));
        if let Some(path) = &self.ca {
            let context = format!("reading the {what}'s CA {}", path.display());
            let pem = std::fs::read(path).map_err(|e| BackendError::invalid(context.clone(), e))?;
            for cert in reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| BackendError::invalid(context.clone(), e))? {
                b = b.add_root_certificate(cert);
            }
        }
        b.build().map_err(|e| BackendError::invalid(format!("making the {what}'s client"), e))
    }

    /// `path_and_query` (of a link the cluster reports) on the proxy's URL.
    pub(crate) fn at(&self, path_and_query: &str) -> String {
        format!("{}{path_and_query}", self.url.trim_end_matches('/'))
    }
}
