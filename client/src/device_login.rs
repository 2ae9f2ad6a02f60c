//! Signing in with OIDC's device-authorization grant (RFC 8628): the
//! provider's endpoints from its discovery document, a device code and a
//! code for the user to enter, then the token endpoint polled at the pace
//! the provider sets until the user allows, denies, or the code expires.
//! The ID token it returns is the bearer token vmaas checks.

use std::time::{Duration, Instant};

use serde::Deserialize;

/// The grant type of a device-code token request.
const GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";

/// Why signing in did not end with a token.
#[derive(Debug, thiserror::Error)]
pub enum DeviceLoginError {
    /// The provider could not be reached, or answered what is not JSON.
    #[error("{url}: {source}")]
    Http {
        /// What was asked.
        url: String,
        /// Why it failed.
        source: reqwest::Error,
    },
    /// The provider's discovery document names no device endpoint.
    #[error("{0} offers no device authorization (its discovery document has no device_authorization_endpoint)")]
    NoDeviceEndpoint(String),
    /// The provider refused a request, as OAuth says (`error`, `error_description`).
    #[error("the identity provider refused: {error}{}", description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Refused {
        /// The OAuth error code.
        error: String,
        /// Its description, when given.
        description: Option<String>,
    },
    /// The user denied the request.
    #[error("the sign-in was denied")]
    Denied,
    /// The code expired before the user allowed it.
    #[error("the code expired before the sign-in was allowed")]
    Expired,
    /// The token answer has no ID token (the `openid` scope is needed).
    #[error("the identity provider returned no id_token (ask for the openid scope)")]
    NoIdToken,
}

/// An OIDC provider and the client signing in at it.
#[derive(Debug, Clone)]
pub struct DeviceLogin {
    /// The issuer's URL (its discovery document is under it).
    pub issuer: String,
    /// The client id registered at the provider.
    pub client_id: String,
    /// The client's secret, sent as HTTP Basic, for confidential clients.
    pub client_secret: Option<String>,
    /// The scopes asked for; `openid` at least.
    pub scope: String,
}

/// What the user is to do, and what the client polls with.
#[derive(Debug, Clone, Deserialize)]
pub struct DeviceCode {
    /// The code the client polls with (never shown).
    pub device_code: String,
    /// The code the user enters.
    pub user_code: String,
    /// Where the user enters it.
    pub verification_uri: String,
    /// The same page with the code filled in, when the provider gives one.
    pub verification_uri_complete: Option<String>,
    /// Seconds until the codes expire.
    pub expires_in: u64,
    /// Seconds between polls (5 when not given).
    #[serde(default = "five")]
    pub interval: u64,
}

fn five() -> u64 {
    5
}

#[derive(Deserialize)]
struct Discovery {
    device_authorization_endpoint: Option<String>,
    token_endpoint: String,
}

#[derive(Deserialize)]
struct OauthError {
    error: String,
    error_description: Option<String>,
}

#[derive(Deserialize)]
struct Tokens {
    id_token: Option<String>,
}

/// A started sign-in: the codes, and where to poll.
#[derive(Debug, Clone)]
pub struct Pending {
    /// What to show the user.
    pub code: DeviceCode,
    token_endpoint: String,
}

impl DeviceLogin {
    /// Asks the provider for a device code and a user code.
    pub async fn start(&self, http: &reqwest::Client) -> Result<Pending, DeviceLoginError> {
        let url = format!("{}/.well-known/openid-configuration", self.issuer.trim_end_matches('/'));
        let doc: Discovery = read(http.get(&url), &url).await?;
        let device = doc.device_authorization_endpoint.ok_or_else(|| DeviceLoginError::NoDeviceEndpoint(self.issuer.clone()))?;
        let form = [("client_id", self.client_id.as_str()), ("scope", self.scope.as_str())];
        let code: DeviceCode = read(self.post(http, &device, &form), &device).await?;
        Ok(Pending { code, token_endpoint: doc.token_endpoint })
    }

    /// Polls until the user allows (the ID token), denies, or the code expires.
    pub async fn finish(&self, http: &reqwest::Client, p: &Pending) -> Result<String, DeviceLoginError> {
        let deadline = Instant::now() + Duration::from_secs(p.code.expires_in);
        let mut every = Duration::from_secs(p.code.interval.max(1));
        let form = [("grant_type", GRANT), ("device_code", p.code.device_code.as_str()), ("client_id", self.client_id.as_str())];
        loop {
            tokio::time::sleep(every).await;
            let url = &p.token_endpoint;
            let rsp = self.post(http, url, &form).send().await.map_err(|source| DeviceLoginError::Http { url: url.clone(), source })?;
            if rsp.status().is_success() {
                let tokens: Tokens = rsp.json().await.map_err(|source| DeviceLoginError::Http { url: url.clone(), source })?;
                return tokens.id_token.ok_or(DeviceLoginError::NoIdToken);
            }
            let e: OauthError = rsp.json().await.map_err(|source| DeviceLoginError::Http { url: url.clone(), source })?;
            match e.error.as_str() {
                "authorization_pending" => {}
                // RFC 8628 3.5: slow down by 5 seconds from now on.
                "slow_down" => every += Duration::from_secs(5),
                "access_denied" => return Err(DeviceLoginError::Denied),
                "expired_token" => return Err(DeviceLoginError::Expired),
                _ => return Err(DeviceLoginError::Refused { error: e.error, description: e.error_description }),
            }
            if Instant::now() + every > deadline {
                return Err(DeviceLoginError::Expired);
            }
        }
    }

    /// A form POST to `url`, authenticated with the client's secret if it has one.
    fn post(&self, http: &reqwest::Client, url: &str, form: &[(&str, &str)]) -> reqwest::RequestBuilder {
        let body = serde_urlencoded::to_string(form).unwrap_or_default();
        let req = http.post(url).header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded").body(body);
        match &self.client_secret {
            Some(secret) => req.basic_auth(&self.client_id, Some(secret)),
            None => req,
        }
    }
}

/// Sends `req`; its JSON on success, else the OAuth error it carries.
async fn read<T: serde::de::DeserializeOwned>(req: reqwest::RequestBuilder, url: &str) -> Result<T, DeviceLoginError> {
    let http = |source| DeviceLoginError::Http { url: url.to_owned(), source };
    let rsp = req.send().await.map_err(http)?;
    if rsp.status().is_success() {
        return rsp.json().await.map_err(http);
    }
    let status = rsp.status();
    match rsp.json::<OauthError>().await {
        Ok(e) => Err(DeviceLoginError::Refused { error: e.error, description: e.error_description }),
        Err(_) => Err(DeviceLoginError::Refused { error: format!("HTTP {status}"), description: None }),
    }
}
