//! Whom the client trusts over HTTPS, shared by its HTTP client and the
//! console's WebSocket (`wss://`): the platform's roots plus an optional
//! CA file, or, when asked, any certificate (`insecure`, development only).

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, aws_lc_rs};
use rustls::{DigitallySignedStruct, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

use crate::Error;

/// What the client trusts.
#[derive(Debug, Clone, Default)]
pub struct Trust {
    /// Accept any certificate.
    pub insecure: bool,
    /// Further CAs (or self-signed certificates) to trust, PEM.
    pub ca_pem: Option<Vec<u8>>,
}

impl Trust {
    /// An HTTP client builder trusting as this says: the platform's
    /// roots, the extra CA, or anything when insecure.
    pub fn http_builder(&self) -> Result<reqwest::ClientBuilder, Error> {
        let mut builder = reqwest::Client::builder();
        if self.insecure {
            builder = builder.tls_danger_accept_invalid_certs(true);
        }
        for root in self.extra_roots()? {
            let cert = reqwest::Certificate::from_der(&root).map_err(|e| Error::Usage(format!("the CA file: {e}")))?;
            builder = builder.tls_certs_merge([cert]);
        }
        Ok(builder)
    }

    /// The CA file's certificates, checked to be PEM.
    pub fn extra_roots(&self) -> Result<Vec<CertificateDer<'static>>, Error> {
        let Some(pem) = &self.ca_pem else { return Ok(Vec::new()) };
        let certs = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| Error::Usage(format!("the CA file is not a PEM certificate: {e}")))?;
        if certs.is_empty() {
            return Err(Error::Usage("the CA file holds no PEM certificate".into()));
        }
        Ok(certs)
    }

    /// A rustls client configuration trusting what `self` says, offering
    /// HTTP/1.1 by ALPN (what a WebSocket upgrade needs).
    pub fn rustls_config(&self) -> Result<Arc<rustls::ClientConfig>, Error> {
        let provider = Arc::new(aws_lc_rs::default_provider());
        let tls = |e: rustls::Error| Error::Usage(format!("TLS: {e}"));
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions().map_err(tls)?;
        let verifier: Arc<dyn ServerCertVerifier> = if self.insecure {
            Arc::new(AnyCertificate(provider))
        } else {
            Arc::new(rustls_platform_verifier::Verifier::new_with_extra_roots(self.extra_roots()?, provider).map_err(tls)?)
        };
        let mut config = builder.dangerous().with_custom_certificate_verifier(verifier).with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

/// Accepts any server certificate (still checking the handshake's
/// signatures with its key): `insecure`.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_must_hold_a_pem_certificate() {
        let bad = Trust { insecure: false, ca_pem: Some(b"not a certificate".to_vec()) };
        assert!(bad.rustls_config().unwrap_err().to_string().contains("CA file"));
        assert!(Trust::default().rustls_config().is_ok());
        assert!(Trust { insecure: true, ca_pem: None }.rustls_config().is_ok());
    }
}
