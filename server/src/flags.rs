//! Command-line flags of the server's operational features, shared by its
//! subcommands: TLS (and the plain-HTTP rule), OIDC, the audit log, and
//! what one tenant may hold open at once (event streams, exports).

use std::path::{Path, PathBuf};

use crate::audit::AuditConfig;
use crate::oidc::OidcConfig;
use crate::tls::TlsSource;

/// Why a flag's value is refused.
#[derive(Debug, thiserror::Error)]
pub enum FlagError {
    /// Not of the flag's form.
    #[error("{given:?}: expected {expected}")]
    Form {
        /// The value given.
        given: String,
        /// The form, with an example.
        expected: &'static str,
    },
    /// A cluster's name that is no DNS label.
    #[error(transparent)]
    ClusterName(#[from] vmaas_model::vm::placement::BadClusterName),
    /// A cluster label's key refused.
    #[error("{given:?}: the key {reason}")]
    LabelKey {
        /// The value given.
        given: String,
        /// Why.
        reason: vmaas_model::labels::LabelError,
    },
    /// A cluster label's value refused.
    #[error("{given:?}: the value {reason}")]
    LabelValue {
        /// The value given.
        given: String,
        /// Why.
        reason: vmaas_model::labels::LabelError,
    },
    /// A value of a cluster no `--cluster` names.
    #[error("{flag} {label}: no --cluster is named {cluster:?}")]
    UnknownCluster {
        /// The flag.
        flag: &'static str,
        /// The value, as given.
        label: String,
        /// The cluster it names.
        cluster: String,
    },
    /// An audit log rotated below 4 KiB.
    #[error("--audit-log-max-size: at least 4Ki")]
    AuditLogSize,
    /// Flags that do not go together, and why.
    #[error("{0}")]
    Conflict(&'static str),
}

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

/// Identity providers (OpenID Connect) whose tokens are accepted.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct OidcArgs {
    /// Accept RS256/ES256 tokens of this OIDC issuer (repeatable); its keys
    /// come from its discovery document's JWKS.
    #[arg(long = "oidc-issuer", env = "VMAAS_OIDC_ISSUERS", value_delimiter = ',', requires = "oidc_audience")]
    pub oidc_issuers: Vec<String>,
    /// The audience (`aud`) the identity provider's tokens must be for.
    #[arg(long, env = "VMAAS_OIDC_AUDIENCE")]
    pub oidc_audience: Option<String>,
    /// The claim naming the caller's tenant.
    #[arg(long, env = "VMAAS_OIDC_TENANT_CLAIM", default_value = "tenant")]
    pub oidc_tenant_claim: String,
    /// The claim listing the caller's groups.
    #[arg(long, env = "VMAAS_OIDC_GROUPS_CLAIM", default_value = "groups")]
    pub oidc_groups_claim: String,
    /// Members of this group are administrators.
    #[arg(long, env = "VMAAS_OIDC_ADMIN_GROUP", default_value = "vmaas-admins")]
    pub oidc_admin_group: String,
    /// PEM file of a CA to trust for the issuers' HTTPS (beside the system's).
    #[arg(long, env = "VMAAS_OIDC_CA_FILE")]
    pub oidc_ca_file: Option<PathBuf>,
}

impl OidcArgs {
    /// The OIDC configuration the flags ask for; `None` without an issuer.
    pub fn config(&self) -> std::io::Result<Option<OidcConfig>> {
        if self.oidc_issuers.is_empty() {
            return Ok(None);
        }
        let ca_pem = self.oidc_ca_file.as_ref().map(std::fs::read).transpose()?;
        Ok(Some(OidcConfig {
            issuers: self.oidc_issuers.clone(),
            audience: self.oidc_audience.clone().unwrap_or_default(),
            tenant_claim: self.oidc_tenant_claim.clone(),
            groups_claim: self.oidc_groups_claim.clone(),
            admin_group: self.oidc_admin_group.clone(),
            ca_pem,
        }))
    }
}

/// The audit log of mutating requests.
#[derive(clap::Args, Debug, Clone)]
pub struct AuditArgs {
    /// Where mutating requests are recorded as JSON lines [default:
    /// DATA_DIR/audit.log]; `-`: the standard output, unrotated (the
    /// server's own log goes to the standard error).
    #[arg(long, env = "VMAAS_AUDIT_LOG")]
    pub audit_log: Option<PathBuf>,
    /// Size at which the audit log is rotated, e.g. 64Mi.
    #[arg(long, env = "VMAAS_AUDIT_LOG_MAX_SIZE", default_value = "64Mi")]
    pub audit_log_max_size: vmaas_model::Quantity,
    /// Rotated audit logs kept (AUDIT_LOG.1 is the newest).
    #[arg(long, env = "VMAAS_AUDIT_LOG_KEEP", default_value_t = 5)]
    pub audit_log_keep: u32,
}

impl AuditArgs {
    /// The audit log the flags ask for, in `data_dir` unless a path is given.
    pub fn config(&self, data_dir: &Path) -> Result<AuditConfig, FlagError> {
        let max_bytes = self.audit_log_max_size.to_units_ceil().filter(|b| *b >= 4096).ok_or(FlagError::AuditLogSize)?;
        let path = self.audit_log.clone().unwrap_or_else(|| data_dir.join("audit.log"));
        Ok(AuditConfig { path, max_bytes, keep: self.audit_log_keep })
    }
}

/// What one tenant may hold open at once beyond its quota.
#[derive(clap::Args, Debug, Clone)]
pub struct TenantLimitArgs {
    /// Event streams (SSE and gRPC `Events.Watch`) one tenant may hold open.
    #[arg(long, env = "VMAAS_WATCHES_PER_TENANT", default_value_t = crate::watches::WatchLimits::default().per_tenant)]
    pub watches_per_tenant: usize,
    /// Event streams one token may hold open.
    #[arg(long, env = "VMAAS_WATCHES_PER_TOKEN", default_value_t = crate::watches::WatchLimits::default().per_token)]
    pub watches_per_token: usize,
    /// Event streams the server holds open in all; past it a new one ends
    /// the oldest of the tenant holding the most. Not counted in --max-connections.
    #[arg(long, env = "VMAAS_MAX_WATCHES", default_value_t = crate::watches::WatchLimits::default().total)]
    pub max_watches: usize,
    /// Disk exports one tenant may have under way (converting or being sent).
    #[arg(long, env = "VMAAS_EXPORTS_PER_TENANT", default_value_t = crate::startup::EXPORTS_PER_TENANT)]
    pub exports_per_tenant: usize,
    /// The longest a disk export waits for its client to take more of it;
    /// past it the export is cut short, and its place, any file made for
    /// it and a disk held for it are let go.
    #[arg(long, env = "VMAAS_EXPORT_STALL_TIMEOUT", default_value = "5m", value_parser = humantime::parse_duration)]
    pub export_stall_timeout: std::time::Duration,
    /// Requests per second one tenant may make (REST, gRPC, event streams
    /// opened); past it: 429 with Retry-After. 0: unlimited.
    #[arg(long, env = "VMAAS_TENANT_RATE_LIMIT", default_value_t = crate::rate::DEFAULT_PER_SECOND)]
    pub tenant_rate_limit: u32,
    /// Requests one tenant may make at once after a quiet while [default:
    /// twice --tenant-rate-limit].
    #[arg(long, env = "VMAAS_TENANT_RATE_BURST", default_value_t = 0, hide_default_value = true)]
    pub tenant_rate_burst: u32,
}

impl TenantLimitArgs {
    /// Each tenant's request rate; none: unlimited.
    pub fn rate(&self) -> Option<crate::rate::RateConfig> {
        crate::rate::RateConfig::new(self.tenant_rate_limit, self.tenant_rate_burst)
    }

    /// The limits of event streams.
    pub fn watches(&self) -> crate::watches::WatchLimits {
        crate::watches::WatchLimits { per_tenant: self.watches_per_tenant, per_token: self.watches_per_token, total: self.max_watches }
    }
}

/// Where the metrics that name tenants are served.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct MetricsArgs {
    /// Serve `/metrics` with every figure (quotas by tenant, each VM's
    /// memory) and no token on this address of its own, e.g.
    /// `0.0.0.0:9090` for a scraper inside the cluster; on the API's port
    /// those need an administrator's token.
    #[arg(long, env = "VMAAS_METRICS_LISTEN")]
    pub metrics_listen: Option<std::net::SocketAddr>,
}
