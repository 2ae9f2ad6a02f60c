//! Bearer tokens: JWTs (HS256) signed by a key kept in the data directory,
//! carrying `tenant` and `role` claims; and, when configured, RS256/ES256
//! tokens of an OIDC identity provider (`crate::oidc`).

use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use rand::RngCore;
use serde::{Deserialize, Serialize};

use crate::error::ApiError;

pub use crate::caller::{Caller, Role};

/// Issuer written into and required of every token.
pub const ISSUER: &str = "vmaas";

/// Name of the signing key file in the data directory.
pub const KEY_FILE: &str = "jwt-hs256.key";

/// The claims of a vmaas token.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Claims {
    /// Who: shown as the VM's creator.
    pub sub: String,
    /// The tenant the caller acts in.
    pub tenant: String,
    /// `admin` or `tenant`.
    pub role: Role,
    /// Issuer, always `vmaas`.
    pub iss: String,
    /// Issued at (seconds since the epoch).
    pub iat: u64,
    /// Expires at (seconds since the epoch).
    pub exp: u64,
}

/// Why a key could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// Reading or writing the key file failed.
    #[error("signing key {path}: {source}")]
    Io {
        /// The key file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The key file is too short to be a key.
    #[error("signing key {0} holds fewer than 32 bytes")]
    TooShort(PathBuf),
}

/// Signs and checks tokens with one symmetric key.
#[derive(Clone)]
pub struct Keys {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
    /// Tokens already verified, with their caller and expiry, so a client
    /// that sends the same token again is not verified again.
    verified: Arc<RwLock<HashMap<String, (Caller, u64)>>>,
    /// The identity providers trusted beside the server's own key.
    oidc: Option<Arc<crate::oidc::Verifier>>,
    /// Seals the secrets tenants give, with a key derived from the same secret.
    sealer: Arc<crate::seal::Sealer>,
}

/// Most tokens remembered as verified; the memory is cleared when full.
const VERIFIED_CACHE: usize = 4096;

impl Keys {
    /// Loads the key at `path`, creating it (32 random bytes, mode 0600) if absent.
    pub fn load_or_create(path: &Path) -> Result<Self, KeyError> {
        let io = |source| KeyError::Io { path: path.to_owned(), source };
        let secret = match fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if let Some(dir) = path.parent() {
                    fs::create_dir_all(dir).map_err(io)?;
                }
                let mut bytes = vec![0u8; 32];
                rand::rng().fill_bytes(&mut bytes);
                let mut opts = fs::OpenOptions::new();
                opts.write(true).create_new(true);
                #[cfg(unix)]
                std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
                match opts.open(path) {
                    Ok(mut f) => {
                        f.write_all(&bytes).map_err(io)?;
                        f.sync_all().map_err(io)?;
                        bytes
                    }
                    // Another process created it first: use theirs.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => fs::read(path).map_err(io)?,
                    Err(e) => return Err(io(e)),
                }
            }
            Err(e) => return Err(io(e)),
        };
        if secret.len() < 32 {
            return Err(KeyError::TooShort(path.to_owned()));
        }
        Ok(Self::from_secret(&secret))
    }

    /// Keys from raw secret bytes.
    pub fn from_secret(secret: &[u8]) -> Self {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_issuer(&[ISSUER]);
        validation.set_required_spec_claims(&["exp", "iss", "sub"]);
        validation.leeway = 30;
        validation.validate_nbf = true;
        Self {
            encoding: EncodingKey::from_secret(secret),
            decoding: DecodingKey::from_secret(secret),
            validation,
            verified: Default::default(),
            oidc: None,
            sealer: Arc::new(crate::seal::Sealer::from_secret(secret)),
        }
    }

    /// Also accepts the tokens `oidc` checks.
    pub fn with_oidc(mut self, oidc: Arc<crate::oidc::Verifier>) -> Self {
        self.oidc = Some(oidc);
        self
    }

    /// Seals and opens the secrets tenants give (shared by every replica
    /// that shares the key file).
    pub fn sealer(&self) -> &Arc<crate::seal::Sealer> {
        &self.sealer
    }

    /// The identity providers trusted, if any.
    pub fn oidc(&self) -> Option<&Arc<crate::oidc::Verifier>> {
        self.oidc.as_ref()
    }

    /// Issues a token for `tenant` with `role`, valid for `ttl`.
    pub fn issue(&self, subject: &str, tenant: &str, role: Role, ttl: Duration) -> Result<String, jsonwebtoken::errors::Error> {
        let now = jsonwebtoken::get_current_timestamp();
        let claims = Claims {
            sub: subject.into(),
            tenant: tenant.into(),
            role,
            iss: ISSUER.into(),
            iat: now,
            exp: now.saturating_add(ttl.as_secs()),
        };
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
    }

    /// Checks a token (the server's own, or an identity provider's) and
    /// returns its caller.
    pub async fn verify(&self, token: &str) -> Result<Caller, ApiError> {
        let now = jsonwebtoken::get_current_timestamp();
        if let Some((caller, exp)) = self.verified.read().unwrap_or_else(|p| p.into_inner()).get(token)
            && now < exp.saturating_add(self.validation.leeway)
        {
            return Ok(caller.clone());
        }
        let own = jsonwebtoken::decode_header(token).is_ok_and(|h| h.alg == Algorithm::HS256);
        let (caller, exp) = match &self.oidc {
            // Not remembered: a key the provider withdraws stops its tokens
            // at the next fetch of its keys.
            Some(oidc) if !own => return Ok(oidc.verify(token).await?.0),
            _ => self.verify_signed(token)?,
        };
        let mut cache = self.verified.write().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= VERIFIED_CACHE {
            cache.clear();
        }
        cache.insert(token.to_owned(), (caller.clone(), exp));
        Ok(caller)
    }

    fn verify_signed(&self, token: &str) -> Result<(Caller, u64), ApiError> {
        let data = jsonwebtoken::decode::<Claims>(token, &self.decoding, &self.validation).map_err(|e| {
            use jsonwebtoken::errors::ErrorKind as K;
            let why = match e.kind() {
                K::ExpiredSignature => "the token has expired",
                K::ImmatureSignature => "the token is not valid yet (its nbf is in the future)",
                K::InvalidSignature => "the token's signature does not match this server's key",
                K::InvalidIssuer => "the token was not issued by vmaas",
                K::MissingRequiredClaim(_) => "the token lacks a required claim",
                _ => "the token is malformed",
            };
            ApiError::unauthenticated(format!("invalid bearer token: {why}"))
        })?;
        let c = data.claims;
        if let Err(why) = vmaas_model::validation::check_tenant_name(&c.tenant) {
            return Err(ApiError::unauthenticated(format!("invalid bearer token: the tenant claim {why}")));
        }
        Ok((Caller { subject: c.sub, tenant: c.tenant, role: c.role }, c.exp))
    }
}

/// A state that holds the token keys: what the [`Caller`] extractor needs
/// of the application's state.
pub trait HasKeys {
    /// The keys tokens are checked with.
    fn keys(&self) -> &Keys;

    /// The request rate each tenant may use; none: unlimited.
    fn rate(&self) -> Option<&crate::rate::TenantRate> {
        None
    }
}

/// The caller a request's handler authenticated, left here by the
/// [`Caller`] extractor for the audit middleware to read.
#[derive(Clone, Default)]
pub struct CallerSlot(std::sync::Arc<std::sync::Mutex<Option<Caller>>>);

impl CallerSlot {
    /// Records the authenticated caller.
    pub fn set(&self, caller: &Caller) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(caller.clone());
    }

    /// The caller recorded, if any.
    pub fn take(&self) -> Option<Caller> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

impl<S: HasKeys + Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let header = parts.headers.get(AUTHORIZATION).map(|h| h.as_bytes());
        authenticate(state, header, parts.extensions.get::<CallerSlot>()).await
    }
}

/// The caller an `Authorization` header (or gRPC's `authorization`
/// metadata) names, within its tenant's request rate; recorded in `slot`
/// for the audit log when there is one.
pub async fn authenticate<S: HasKeys>(state: &S, header: Option<&[u8]>, slot: Option<&CallerSlot>) -> Result<Caller, ApiError> {
    let caller = state.keys().bearer(header).await?;
    if let Some(rate) = state.rate() {
        rate.check(&caller.tenant)?;
    }
    if let Some(slot) = slot {
        slot.set(&caller);
    }
    Ok(caller)
}

impl Keys {
    /// The caller an `Authorization` header (or gRPC metadata) names.
    pub async fn bearer(&self, header: Option<&[u8]>) -> Result<Caller, ApiError> {
        let header =
            header.ok_or_else(|| ApiError::unauthenticated("missing Authorization header: send \"Authorization: Bearer <token>\""))?;
        let value = std::str::from_utf8(header).map_err(|_| ApiError::unauthenticated("the Authorization header is not text"))?;
        let token = value
            .strip_prefix("Bearer ")
            .or_else(|| value.strip_prefix("bearer "))
            .ok_or_else(|| ApiError::unauthenticated("the Authorization header must be \"Bearer <token>\""))?;
        self.verify(token.trim()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verify(k: &Keys, t: &str) -> Result<Caller, ApiError> {
        tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(k.verify(t))
    }

    #[test]
    fn issue_and_verify() {
        let k = Keys::from_secret(&[7u8; 32]);
        let t = k.issue("alice", "acme", Role::Tenant, Duration::from_secs(60)).unwrap();
        let c = verify(&k, &t).unwrap();
        assert_eq!(c, Caller { subject: "alice".into(), tenant: "acme".into(), role: Role::Tenant });
        let other = Keys::from_secret(&[8u8; 32]);
        let e = verify(&other, &t).unwrap_err();
        assert!(e.message.contains("signature"), "{}", e.message);
        assert!(verify(&k, "garbage").is_err());
    }

    #[test]
    fn a_token_not_valid_yet_is_refused() {
        let secret = [7u8; 32];
        let k = Keys::from_secret(&secret);
        let now = jsonwebtoken::get_current_timestamp();
        let claims = serde_json::json!({"sub": "a", "tenant": "acme", "role": "tenant", "iss": ISSUER, "iat": now, "exp": now + 7200, "nbf": now + 3600});
        let early = jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &EncodingKey::from_secret(&secret)).unwrap();
        let e = verify(&k, &early).unwrap_err();
        assert!(e.message.contains("not valid yet"), "{}", e.message);
        let mut ok = claims.clone();
        ok["nbf"] = serde_json::json!(now - 10);
        let ready = jsonwebtoken::encode(&Header::new(Algorithm::HS256), &ok, &EncodingKey::from_secret(&secret)).unwrap();
        assert!(verify(&k, &ready).is_ok());
    }

    #[test]
    fn key_file_is_created_once_and_private() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(KEY_FILE);
        let a = Keys::load_or_create(&p).unwrap();
        let t = a.issue("x", "y", Role::Admin, Duration::from_secs(60)).unwrap();
        let b = Keys::load_or_create(&p).unwrap();
        assert!(verify(&b, &t).is_ok());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
        }
    }
}
