//! OIDC tokens on the real `vmaas-server`, from a small issuer on loopback
//! (`vmaas_tests::oidc`): RS256 and ES256 tokens map to tenants and, by
//! group, to administrators, beside the server's own HS256 tokens; expired,
//! wrong-audience, wrong-issuer, `alg: none`, unknown-key and forged
//! tokens are 401 and change nothing; a rotated key is picked up.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::oidc::Issuer;
use vmaas_tests::vms::{TINY, V1};
use vmaas_tests::{Db, Server};

const AUD: &str = "vmaas";

fn vm(name: &str) -> Value {
    json!({"object": {"metadata": {"name": name}, "spec": {"template": "tiny"}}})
}

/// base64url without padding.
fn b64url(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    bytes
        .chunks(3)
        .flat_map(|c| {
            let n = c.iter().enumerate().fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
            (0..=c.len()).map(move |i| A[((n >> (18 - 6 * i)) & 63) as usize] as char)
        })
        .collect()
}

/// A 401 whose message contains `why`, for a create with `token`.
async fn refused(s: &Server, token: &str, why: &str) {
    let (st, e) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(token), Some(vm("nope"))).await;
    assert_eq!(st, 401, "{e}");
    assert_eq!(e["code"], 16, "UNAUTHENTICATED: {e}");
    assert!(e["message"].as_str().unwrap().contains(why), "expected {why:?}: {e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_provider_tokens_are_checked_mapped_and_rotated() {
    let idp = Issuer::start().await;
    let args = ["--backend", "none", "--oidc-issuer", &idp.url, "--oidc-audience", AUD];
    let s = Server::start_with(Db::Sqlite, &args).await.unwrap();

    // ES256, in the administrators' group: may publish templates.
    let admin = idp.sign("ec-1", &idp.claims("ops@corp", "ops", AUD, &["staff", "vmaas-admins"]));
    let sync = |token: &str, id: &str| {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("t.yaml"), TINY.replacen("id: tiny", &format!("id: {id}"), 1)).unwrap();
        s.cli(token, &["template", "sync", dir.path().to_str().unwrap()])
    };
    let out = sync(&admin, "tiny");
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stderr), s.log());
    // RS256, a tenant: creates a VM, credited to its subject, in its tenant.
    let alice = idp.sign("rsa-1", &idp.claims("alice@corp", "acme", AUD, &["staff"]));
    let (st, made) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&alice), Some(vm("web"))).await;
    assert_eq!(st, 201, "{made}");
    assert_eq!((&made["object"]["metadata"]["creator"], &made["object"]["metadata"]["tenant"]), (&json!("alice@corp"), &json!("acme")));
    let out = sync(&alice, "tiny-2");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("administrators"), "not an administrator: {err}");
    // Another tenant of the same provider sees none of it; HS256 tokens still work.
    let bob = idp.sign("rsa-1", &idp.claims("bob@corp", "globex", AUD, &[]));
    assert_eq!(s.raw(Method::GET, &format!("{V1}/virtual_machines"), Some(&bob), None).await.1["total"], 0);
    let own = s.token("acme", false);
    assert_eq!(s.raw(Method::GET, &format!("{V1}/virtual_machines"), Some(&own), None).await.1["total"], 1);

    // Refused tokens, each with its reason.
    let mut expired = idp.claims("alice@corp", "acme", AUD, &[]);
    expired["exp"] = json!(jsonwebtoken::get_current_timestamp() - 600);
    refused(&s, &idp.sign("rsa-1", &expired), "expired").await;
    refused(&s, &idp.sign("rsa-1", &idp.claims("alice@corp", "acme", "another-app", &[])), "audience").await;
    let mut foreign = idp.claims("alice@corp", "acme", AUD, &[]);
    foreign["iss"] = json!("http://127.0.0.1:9/other");
    refused(&s, &idp.sign("rsa-1", &foreign), "not trusted").await;
    let unsigned = format!("{}.{}.", b64url(br#"{"alg":"none","typ":"JWT"}"#), b64url(alice.split('.').nth(1).unwrap().as_bytes()));
    refused(&s, &unsigned, "invalid bearer token").await;
    let payload = b64url(idp.claims("mallory", "acme", AUD, &["vmaas-admins"]).to_string().as_bytes());
    refused(&s, &format!("{}.{payload}.", b64url(br#"{"alg":"none","typ":"JWT","kid":"rsa-1"}"#)), "invalid bearer token").await;
    refused(&s, &idp.sign("rogue", &idp.claims("mallory", "acme", AUD, &[])), "publishes no key \"rogue\"").await;
    refused(&s, &idp.sign_as("rogue", "rsa-1", &idp.claims("mallory", "acme", AUD, &["vmaas-admins"])), "signature").await;
    let mut no_tenant = idp.claims("carol@corp", "x", AUD, &[]);
    no_tenant.as_object_mut().unwrap().remove("tenant");
    refused(&s, &idp.sign("rsa-1", &no_tenant), "\"tenant\" claim").await;
    // Nothing refused made anything.
    assert_eq!(s.raw(Method::GET, &format!("{V1}/virtual_machines"), Some(&admin), None).await.1["total"], 1);

    // Rotation: the provider publishes rsa-2 and withdraws rsa-1.
    idp.publish(&["rsa-2", "ec-1"]);
    let fresh = idp.sign("rsa-2", &idp.claims("alice@corp", "acme", AUD, &[]));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (st, body) = s.raw(Method::GET, &format!("{V1}/virtual_machines"), Some(&fresh), None).await;
        if st == 200 {
            assert_eq!(body["total"], 1);
            break;
        }
        assert!(Instant::now() < deadline, "the new key was not picked up: {body}\n{}", s.log());
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    refused(&s, &idp.sign("rsa-1", &idp.claims("alice@corp", "acme", AUD, &[])), "publishes no key \"rsa-1\"").await;
}
