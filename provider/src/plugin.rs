//! The go-plugin side of a Terraform provider: the magic cookie, AutoMTLS,
//! the handshake line on stdout, and the health and controller services.
//!
//! AutoMTLS: Terraform passes its client certificate in `PLUGIN_CLIENT_CERT`
//! and trusts exactly the server certificate printed in the handshake. That
//! client certificate is self-signed and flagged as a CA, which a standard
//! WebPKI verifier refuses as an end entity (`CaUsedAsEndEntity`), so the
//! verifier here accepts exactly the certificate Terraform announced, and
//! checks the handshake signatures with it.

use std::sync::Arc;

use base64::Engine;
use rustls::DigitallySignedStruct;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::CryptoProvider;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, UnixTime};

/// The cookie Terraform sets so that a plugin run by hand says so.
pub const MAGIC_COOKIE_KEY: &str = "TF_PLUGIN_MAGIC_COOKIE";
/// Its value.
pub const MAGIC_COOKIE_VALUE: &str = "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2";

/// Why the plugin could not set up its transport.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// `PLUGIN_CLIENT_CERT` is not a PEM certificate.
    #[error("PLUGIN_CLIENT_CERT is not a PEM certificate: {0}")]
    ClientCert(String),
    /// The server certificate could not be made.
    #[error("generating the server certificate: {0}")]
    Cert(#[from] rcgen::Error),
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
}

/// Accepts exactly one client certificate.
#[derive(Debug)]
struct ExactClientCert {
    expected: CertificateDer<'static>,
    provider: Arc<CryptoProvider>,
}

impl ClientCertVerifier for ExactClientCert {
    fn root_hint_subjects(&self) -> &[rustls::DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        if end_entity.as_ref() == self.expected.as_ref() {
            Ok(ClientCertVerified::assertion())
        } else {
            Err(rustls::Error::General("the client certificate is not the one Terraform announced in PLUGIN_CLIENT_CERT".into()))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

/// A TLS server configuration for AutoMTLS, and the server certificate to
/// announce (base64 DER, no padding, as go-plugin expects).
pub fn auto_mtls(client_cert_pem: &str) -> Result<(rustls::ServerConfig, String), PluginError> {
    let expected = CertificateDer::from_pem_slice(client_cert_pem.as_bytes()).map_err(|e| PluginError::ClientCert(e.to_string()))?;
    let key = rcgen::KeyPair::generate()?;
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()])?;
    params.distinguished_name.push(rcgen::DnType::CommonName, "localhost");
    params.distinguished_name.push(rcgen::DnType::OrganizationName, "vmaas");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.key_usages =
        vec![rcgen::KeyUsagePurpose::DigitalSignature, rcgen::KeyUsagePurpose::KeyEncipherment, rcgen::KeyUsagePurpose::KeyCertSign];
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth, rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let cert = params.self_signed(&key)?;
    let der = cert.der().clone();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let verifier = Arc::new(ExactClientCert { expected, provider: provider.clone() });
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(vec![der.clone()], PrivateKeyDer::Pkcs8(key.serialize_der().into()))?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    let announced = base64::engine::general_purpose::STANDARD_NO_PAD.encode(der.as_ref());
    Ok((config, announced))
}
