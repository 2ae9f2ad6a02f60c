//! Tokens of an organisation's identity provider (OpenID Connect): RS256
//! and ES256 JWTs from configured issuers, checked against the keys their
//! JWKS publishes (found through discovery, cached, fetched again when a
//! token names a key not seen yet, so the provider can rotate its keys).
//! The tenant comes from a configurable claim; administrators are the
//! members of a configured group.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, JwkSet, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::Mutex;
use tracing::{info, warn};

use crate::caller::{Caller, Role};
use crate::error::ApiError;

/// Least time between two fetches of one issuer's keys (a token naming an
/// unknown key cannot make the server hammer the provider).
pub const MIN_REFETCH: Duration = Duration::from_secs(1);
/// Keys older than this are fetched again on the next token.
pub const MAX_KEY_AGE: Duration = Duration::from_secs(600);
/// Time a fetch from the provider may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// Clock skew allowed on `exp` and `nbf`.
const LEEWAY: u64 = 30;

/// Which identity providers are trusted and how their tokens map to callers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OidcConfig {
    /// Issuer URLs (`iss`), each serving `/.well-known/openid-configuration`.
    pub issuers: Vec<String>,
    /// The audience (`aud`) tokens must be for.
    pub audience: String,
    /// The claim holding the caller's tenant.
    pub tenant_claim: String,
    /// The claim holding the caller's groups (a list or one string).
    pub groups_claim: String,
    /// The group whose members are administrators.
    pub admin_group: String,
    /// A CA (PEM) to trust for the providers' HTTPS, beside the platform's.
    pub ca_pem: Option<Vec<u8>>,
}

/// Why OIDC could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum OidcError {
    /// The configuration is unusable.
    #[error("OIDC: {0}")]
    Config(String),
}

/// Why an issuer's discovery document or keys could not be read.
#[derive(Debug, thiserror::Error)]
enum FetchError {
    /// No answer, or an answer that is not the JSON expected.
    #[error("{0}")]
    Http(#[from] reqwest::Error),
    /// An answer other than success.
    #[error("answered {0}")]
    Status(reqwest::StatusCode),
}

/// The keys of one issuer, as last fetched.
#[derive(Default)]
struct IssuerKeys {
    jwks_uri: Option<String>,
    keys: HashMap<String, (DecodingKey, Algorithm)>,
    fetched: Option<Instant>,
}

/// Checks tokens of the configured issuers.
pub struct Verifier {
    config: OidcConfig,
    http: reqwest::Client,
    issuers: HashMap<String, Mutex<IssuerKeys>>,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier").field("issuers", &self.config.issuers).field("audience", &self.config.audience).finish()
    }
}

/// The claims read from every OIDC token; the rest is looked up by name.
#[derive(Debug, Deserialize)]
struct Claims {
    sub: String,
    exp: u64,
    #[serde(flatten)]
    rest: HashMap<String, Value>,
}

/// Only what picks the issuer, read before the signature is checked.
#[derive(Debug, Deserialize)]
struct Unverified {
    iss: Option<String>,
}

fn unauthenticated(why: impl std::fmt::Display) -> ApiError {
    ApiError::unauthenticated(format!("invalid bearer token: {why}"))
}

impl Verifier {
    /// A verifier of `config`'s issuers; keys are fetched on first use.
    pub fn new(config: OidcConfig) -> Result<Self, OidcError> {
        if config.issuers.is_empty() || config.audience.is_empty() {
            return Err(OidcError::Config("an issuer and an audience are needed".into()));
        }
        let mut b = reqwest::Client::builder().timeout(FETCH_TIMEOUT).connect_timeout(FETCH_TIMEOUT);
        if let Some(pem) = &config.ca_pem {
            let ca = reqwest::Certificate::from_pem(pem).map_err(|e| OidcError::Config(format!("the OIDC CA file: {e}")))?;
            b = b.tls_certs_merge([ca]);
        }
        let http = b.build().map_err(|e| OidcError::Config(e.to_string()))?;
        let issuers = config.issuers.iter().map(|i| (i.trim_end_matches('/').to_owned(), Mutex::default())).collect();
        Ok(Self { config, http, issuers })
    }

    /// Fetches every issuer's keys now, logging the ones that fail (they
    /// are fetched again on the next token).
    pub async fn warm(&self) {
        for (issuer, keys) in &self.issuers {
            let mut keys = keys.lock().await;
            match self.fetch(issuer, &mut keys).await {
                Ok(()) => info!(%issuer, keys = keys.keys.len(), "OIDC keys fetched"),
                Err(e) => warn!(%issuer, error = %e.message, "OIDC keys not fetched yet"),
            }
        }
    }

    /// Checks `token` (an RS256 or ES256 JWT of a configured issuer): its
    /// caller and expiry.
    pub async fn verify(&self, token: &str) -> Result<(Caller, u64), ApiError> {
        let header =
            jsonwebtoken::decode_header(token).map_err(|e| unauthenticated(format!("malformed or of an unsupported algorithm ({e})")))?;
        if !matches!(header.alg, Algorithm::RS256 | Algorithm::ES256) {
            return Err(unauthenticated(format!("the algorithm {:?} is not accepted (RS256 or ES256)", header.alg)));
        }
        let iss = jsonwebtoken::dangerous::insecure_decode_claims::<Unverified>(token)
            .ok()
            .and_then(|u| u.iss)
            .ok_or_else(|| unauthenticated("the token has no issuer (iss)"))?;
        let Some(keys) = self.issuers.get(iss.trim_end_matches('/')) else {
            return Err(unauthenticated(format!("the issuer {iss:?} is not trusted by this server")));
        };
        let kid = header.kid.ok_or_else(|| unauthenticated("the token names no key (kid)"))?;
        let (key, alg) = self.key(iss.trim_end_matches('/'), keys, &kid).await?;
        if alg != header.alg {
            return Err(unauthenticated(format!("key {kid:?} is an {alg:?} key, the token says {:?}", header.alg)));
        }
        let data = jsonwebtoken::decode::<Claims>(token, &key, &self.validation(alg, &iss)).map_err(|e| unauthenticated(reason(&e)))?;
        let exp = data.claims.exp;
        Ok((self.caller(data.claims)?, exp))
    }

    fn validation(&self, alg: Algorithm, iss: &str) -> Validation {
        let mut v = Validation::new(alg);
        v.set_issuer(&[iss]);
        v.set_audience(&[&self.config.audience]);
        v.set_required_spec_claims(&["exp", "iss", "sub", "aud"]);
        v.leeway = LEEWAY;
        v.validate_nbf = true;
        v
    }

    /// The caller the claims name.
    fn caller(&self, c: Claims) -> Result<Caller, ApiError> {
        // `sub` is read into its own field; any other claim is looked up by name.
        let tenant = match self.config.tenant_claim.as_str() {
            "sub" => Some(c.sub.as_str()),
            name => c.rest.get(name).and_then(Value::as_str),
        }
        .filter(|t| !t.is_empty());
        let tenant =
            tenant.ok_or_else(|| unauthenticated(format!("the token has no {:?} claim (the tenant)", self.config.tenant_claim)))?;
        vmaas_model::validation::check_tenant_name(tenant)
            .map_err(|why| unauthenticated(format!("the token's {:?} claim (the tenant) {why}", self.config.tenant_claim)))?;
        let admin = match c.rest.get(&self.config.groups_claim) {
            Some(Value::Array(groups)) => groups.iter().any(|g| g.as_str() == Some(self.config.admin_group.as_str())),
            Some(Value::String(g)) => *g == self.config.admin_group,
            _ => false,
        };
        Ok(Caller { subject: c.sub.clone(), tenant: tenant.to_owned(), role: if admin { Role::Admin } else { Role::Tenant } })
    }

    /// The key `kid` of `issuer`, fetching the issuer's keys when they are
    /// old or lack it (at most once per [`MIN_REFETCH`]).
    async fn key(&self, issuer: &str, keys: &Mutex<IssuerKeys>, kid: &str) -> Result<(DecodingKey, Algorithm), ApiError> {
        let mut keys = keys.lock().await;
        let age = keys.fetched.map(|t| t.elapsed());
        let known = keys.keys.contains_key(kid);
        let stale = age.is_none_or(|a| a > MAX_KEY_AGE);
        let may_refetch = age.is_none_or(|a| a >= MIN_REFETCH);
        if (stale || (!known && may_refetch))
            && let Err(e) = self.fetch(issuer, &mut keys).await
        {
            if !known {
                return Err(e);
            }
            warn!(%issuer, error = %e.message, "OIDC keys not refreshed; using the cached ones");
        }
        keys.keys.get(kid).cloned().ok_or_else(|| unauthenticated(format!("the issuer publishes no key {kid:?}")))
    }

    /// Fetches `issuer`'s discovery document (once) and its JWKS.
    async fn fetch(&self, issuer: &str, keys: &mut IssuerKeys) -> Result<(), ApiError> {
        keys.fetched = Some(Instant::now());
        let unavailable = |what: &str, e: &dyn std::fmt::Display| ApiError::unavailable(format!("cannot check the token: {what}: {e}"));
        if keys.jwks_uri.is_none() {
            let url = format!("{issuer}/.well-known/openid-configuration");
            let doc: Value = self.get_json(&url).await.map_err(|e| unavailable(&url, &e))?;
            if doc["issuer"].as_str().map(|i| i.trim_end_matches('/')) != Some(issuer) {
                return Err(unavailable(&url, &format!("it names the issuer {}, not {issuer}", doc["issuer"])));
            }
            let jwks = doc["jwks_uri"].as_str().ok_or_else(|| unavailable(&url, &"no jwks_uri"))?;
            keys.jwks_uri = Some(jwks.to_owned());
        }
        let url = keys.jwks_uri.clone().unwrap_or_default();
        let set: JwkSet = self.get_json(&url).await.map_err(|e| unavailable(&url, &e))?;
        keys.keys = signing_keys(&set);
        Ok(())
    }

    async fn get_json<T: serde::de::DeserializeOwned>(&self, url: &str) -> Result<T, FetchError> {
        let rsp = self.http.get(url).send().await?;
        if !rsp.status().is_success() {
            return Err(FetchError::Status(rsp.status()));
        }
        Ok(rsp.json().await?)
    }
}

/// The RS256 and ES256 (P-256) signing keys of a JWKS, by `kid`.
fn signing_keys(set: &JwkSet) -> HashMap<String, (DecodingKey, Algorithm)> {
    let mut out = HashMap::new();
    for jwk in &set.keys {
        let Some(kid) = jwk.common.key_id.clone() else { continue };
        if matches!(jwk.common.public_key_use, Some(ref u) if *u != PublicKeyUse::Signature) {
            continue;
        }
        let alg = match &jwk.algorithm {
            AlgorithmParameters::RSA(_) => Algorithm::RS256,
            AlgorithmParameters::EllipticCurve(ec) if ec.curve == EllipticCurve::P256 => Algorithm::ES256,
            _ => continue,
        };
        let expected = if alg == Algorithm::RS256 { KeyAlgorithm::RS256 } else { KeyAlgorithm::ES256 };
        if jwk.common.key_algorithm.is_some_and(|named| named != expected) {
            continue;
        }
        if let Ok(key) = DecodingKey::from_jwk(jwk) {
            out.insert(kid, (key, alg));
        }
    }
    out
}

/// Why a token signed by a known key was refused.
fn reason(e: &jsonwebtoken::errors::Error) -> &'static str {
    use jsonwebtoken::errors::ErrorKind as K;
    match e.kind() {
        K::ExpiredSignature => "the token has expired",
        K::ImmatureSignature => "the token is not valid yet (its nbf is in the future)",
        K::InvalidSignature => "the token's signature does not match the issuer's key",
        K::InvalidIssuer => "the token's issuer is not trusted",
        K::InvalidAudience => "the token is for another audience (aud)",
        K::MissingRequiredClaim(_) => "the token lacks a required claim (exp, iss, sub or aud)",
        _ => "the token is malformed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verifier() -> Verifier {
        Verifier::new(OidcConfig {
            issuers: vec!["https://idp.test/".into()],
            audience: "vmaas".into(),
            tenant_claim: "org".into(),
            groups_claim: "roles".into(),
            admin_group: "ops".into(),
            ca_pem: None,
        })
        .unwrap()
    }

    fn claims(rest: serde_json::Value) -> Claims {
        let mut v = serde_json::json!({"sub": "alice", "exp": 1});
        v.as_object_mut().unwrap().extend(rest.as_object().unwrap().clone());
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn the_tenant_and_the_role_come_from_the_configured_claims() {
        let v = verifier();
        assert!(v.issuers.contains_key("https://idp.test"), "a trailing slash does not matter");
        let c = v.caller(claims(serde_json::json!({"org": "acme", "roles": ["dev", "ops"]}))).unwrap();
        assert_eq!((c.tenant.as_str(), c.role), ("acme", Role::Admin));
        let c = v.caller(claims(serde_json::json!({"org": "acme", "roles": "dev"}))).unwrap();
        assert_eq!(c.role, Role::Tenant);
        let e = v.caller(claims(serde_json::json!({"tenant": "acme"}))).unwrap_err();
        assert!(e.message.contains("\"org\" claim"), "{}", e.message);
        assert!(v.caller(claims(serde_json::json!({"org": ""}))).is_err(), "an empty tenant");
    }

    #[test]
    fn only_signing_keys_of_the_accepted_algorithms_are_kept() {
        let rsa = serde_json::json!({"kty": "RSA", "kid": "r", "use": "sig", "n": "sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw", "e": "AQAB"});
        let enc = serde_json::json!({"kty": "RSA", "kid": "e", "use": "enc", "n": rsa["n"], "e": "AQAB"});
        let nameless = serde_json::json!({"kty": "RSA", "use": "sig", "n": rsa["n"], "e": "AQAB"});
        let wrong = serde_json::json!({"kty": "RSA", "kid": "w", "alg": "RS512", "n": rsa["n"], "e": "AQAB"});
        let set: JwkSet = serde_json::from_value(serde_json::json!({"keys": [rsa, enc, nameless, wrong]})).unwrap();
        let keys = signing_keys(&set);
        assert_eq!(keys.keys().collect::<Vec<_>>(), vec!["r"]);
        assert_eq!(keys["r"].1, Algorithm::RS256);
    }

    #[test]
    fn configurations_without_an_issuer_or_an_audience_are_refused() {
        let base = OidcConfig {
            issuers: vec![],
            audience: "a".into(),
            tenant_claim: "t".into(),
            groups_claim: "g".into(),
            admin_group: "x".into(),
            ca_pem: None,
        };
        assert!(Verifier::new(base.clone()).is_err());
        assert!(Verifier::new(OidcConfig { issuers: vec!["https://i".into()], audience: String::new(), ..base }).is_err());
    }
}
