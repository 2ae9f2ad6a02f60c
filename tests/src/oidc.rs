//! A small OpenID Connect issuer on loopback for the tests: discovery,
//! a JWKS whose keys the test can rotate, and tokens signed with RS256 or
//! ES256 keys made here (rcgen), some of them never published.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use jsonwebtoken::jwk::{Jwk, JwkSet, KeyAlgorithm};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

/// A signing key of the issuer.
struct Key {
    encoding: EncodingKey,
    alg: Algorithm,
    jwk: Jwk,
}

/// The issuer: its URL, keys, and which of them the JWKS publishes.
pub struct Issuer {
    /// `http://127.0.0.1:PORT`: the `iss` of its tokens.
    pub url: String,
    keys: HashMap<String, Key>,
    published: Arc<RwLock<Vec<Jwk>>>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for Issuer {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// A key pair made here; `alg` RS256 or ES256.
fn make_key(kid: &str, alg: Algorithm) -> Key {
    let (rc, ka) = match alg {
        Algorithm::RS256 => (&rcgen::PKCS_RSA_SHA256, KeyAlgorithm::RS256),
        _ => (&rcgen::PKCS_ECDSA_P256_SHA256, KeyAlgorithm::ES256),
    };
    let pair = rcgen::KeyPair::generate_for(rc).expect("key pair");
    let pem = pair.serialize_pem();
    let encoding = match alg {
        Algorithm::RS256 => EncodingKey::from_rsa_pem(pem.as_bytes()),
        _ => EncodingKey::from_ec_pem(pem.as_bytes()),
    }
    .expect("encoding key");
    let mut jwk = Jwk::from_encoding_key(&encoding, alg).expect("jwk");
    jwk.common.key_id = Some(kid.to_owned());
    jwk.common.key_algorithm = Some(ka);
    Key { encoding, alg, jwk }
}

impl Issuer {
    /// Starts an issuer with keys `rsa-1` (RS256) and `ec-1` (ES256)
    /// published, and `rsa-2` and `rogue` (RS256) not.
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let keys: HashMap<String, Key> =
            [("rsa-1", Algorithm::RS256), ("ec-1", Algorithm::ES256), ("rsa-2", Algorithm::RS256), ("rogue", Algorithm::RS256)]
                .into_iter()
                .map(|(kid, alg)| (kid.to_owned(), make_key(kid, alg)))
                .collect();
        let published = Arc::new(RwLock::new(vec![keys["rsa-1"].jwk.clone(), keys["ec-1"].jwk.clone()]));
        let discovery =
            json!({"issuer": url, "jwks_uri": format!("{url}/jwks"), "id_token_signing_alg_values_supported": ["RS256", "ES256"]});
        let app = Router::new()
            .route("/.well-known/openid-configuration", get(move || async move { Json(discovery) }))
            .route("/jwks", get(|State(p): State<Arc<RwLock<Vec<Jwk>>>>| async move { Json(JwkSet { keys: p.read().unwrap().clone() }) }))
            .with_state(published.clone());
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { url, keys, published, server }
    }

    /// Publishes exactly the keys `kids` from now on.
    pub fn publish(&self, kids: &[&str]) {
        *self.published.write().unwrap() = kids.iter().map(|k| self.keys[*k].jwk.clone()).collect();
    }

    /// Claims for `sub` in `tenant`, for `aud`, from this issuer, valid
    /// for an hour; `groups` as given.
    pub fn claims(&self, sub: &str, tenant: &str, aud: &str, groups: &[&str]) -> Value {
        let now = jsonwebtoken::get_current_timestamp();
        json!({"iss": self.url, "sub": sub, "aud": aud, "tenant": tenant, "groups": groups, "iat": now, "exp": now + 3600})
    }

    /// `claims` signed with key `kid` (its header naming `header_kid`).
    pub fn sign_as(&self, kid: &str, header_kid: &str, claims: &Value) -> String {
        let key = &self.keys[kid];
        let mut header = Header::new(key.alg);
        header.kid = Some(header_kid.to_owned());
        jsonwebtoken::encode(&header, claims, &key.encoding).expect("sign")
    }

    /// `claims` signed with key `kid`.
    pub fn sign(&self, kid: &str, claims: &Value) -> String {
        self.sign_as(kid, kid, claims)
    }
}
