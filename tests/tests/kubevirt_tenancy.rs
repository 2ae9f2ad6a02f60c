//! A KubeVirt namespace belongs to one tenant (issue 52), against a real
//! kube-apiserver with KubeVirt played (`vmaas_tests::kubevirt`): a token
//! whose tenant is `acme>#{?&>+` (whose namespace, under the 32-bit hash
//! of older releases, was `acme`'s own) is refused with 401 naming the
//! claim; a namespace recorded for another tenant (a forged label) is
//! never used: the VM is DEGRADED saying so, and nothing is made in it
//! until an administrator relabels it; a namespace an older release made
//! for the same tenant (its old name, its label) is adopted, so a cluster
//! it ran on keeps its tenants' objects where they are.

use std::time::{SystemTime, UNIX_EPOCH};

use reqwest::Method;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use vmaas_tests::kubevirt::{VMS, env, objects_of, the_vm};
use vmaas_tests::vms::{self, V1};

/// The namespace this release gives `tenant`: the prefix and name, then
/// 64 bits of SHA-256 of the name (`docs/backends.md`).
fn namespace_of(tenant: &str) -> String {
    let hex: String = Sha256::digest(tenant.as_bytes())[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("vmaas-{tenant}-{hex}")
}

/// The name older releases gave it: 32 bits of FNV-1a.
fn legacy_namespace_of(tenant: &str) -> String {
    let h = tenant.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    format!("vmaas-{tenant}-{:08x}", h & 0xffff_ffff)
}

/// A token signed with the server's own key, for `tenant` as given.
fn forged_token(data_dir: &std::path::Path, tenant: &str) -> String {
    let key = std::fs::read(data_dir.join("jwt-hs256.key")).expect("the server's key");
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let claims = json!({"sub": "mallory", "tenant": tenant, "role": "tenant", "iss": "vmaas", "iat": now, "exp": now + 600});
    jsonwebtoken::encode(&jsonwebtoken::Header::default(), &claims, &jsonwebtoken::EncodingKey::from_secret(&key)).unwrap()
}

fn degraded(vm: &Value) -> Option<&str> {
    let all = vm["status"]["conditions"].as_array()?;
    let c = all.iter().find(|c| c["type"] == "VIRTUAL_MACHINE_CONDITION_TYPE_DEGRADED" && c["status"] == "CONDITION_STATUS_TRUE")?;
    c["message"].as_str()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_is_one_tenant_s() {
    let (k, _kubevirt, s) = env().await;
    assert_eq!(legacy_namespace_of("acme"), "vmaas-acme-f4f6de0f", "acme's namespace under older releases");

    // The tenant name found to share acme's old namespace never gets in.
    let mallory = forged_token(&s.data_dir, "acme>#{?&>+");
    let (st, e) = s.raw(Method::GET, &format!("{V1}/virtual_machines"), Some(&mallory), None).await;
    assert_eq!(st, 401, "{e}");
    assert!(e["message"].as_str().unwrap_or_default().contains("tenant claim"), "the claim is named: {e}");

    // acme's namespace made beforehand and recorded for globex.
    let acme_ns = namespace_of("acme");
    let forged = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": acme_ns, "labels": {"vmaas.io/tenant": "globex"}}});
    let (st, body) = k.apply(&forged, "namespaces", "someone-else").await;
    assert!(st < 300, "{st} {body}");
    let acme = s.token("acme", false);
    let id = vms::create(&s, &acme, "web", "tiny").await;
    let vm = vms::wait_until(&s, &acme, &id, "DEGRADED", 60, |v| degraded(v).is_some()).await;
    let why = degraded(&vm).unwrap_or_default();
    assert!(why.contains(&acme_ns) && why.contains("recorded for tenant \"globex\""), "{why}");
    assert!(objects_of(&k, VMS, &id).await.is_empty(), "nothing made in another tenant's namespace");
    let (_, inside) = k.request(Method::GET, &format!("/apis/kubevirt.io/v1/namespaces/{acme_ns}/virtualmachines"), None, None).await;
    assert_eq!(inside["items"], json!([]), "{inside}");

    // Relabelled by an administrator: the VM goes there and runs.
    let fixed = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": acme_ns, "labels": {"vmaas.io/tenant": "acme"}}});
    let (st, body) = k.apply(&fixed, "namespaces", "someone-else").await;
    assert!(st < 300, "{st} {body}");
    vms::wait_ready(&s, &acme, &id).await;
    assert_eq!(the_vm(&k, &id).await["metadata"]["namespace"], acme_ns.as_str());
    let (_, ns) = k.request(Method::GET, &format!("/api/v1/namespaces/{acme_ns}"), None, None).await;
    assert_eq!(ns["metadata"]["annotations"]["vmaas.io/tenant"], "acme", "the namespace records its tenant exactly: {ns}");

    // A namespace an older release made for globex is adopted, not a new one made.
    let legacy = legacy_namespace_of("globex");
    let old = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": legacy,
        "labels": {"vmaas.io/tenant": "globex", "app.kubernetes.io/managed-by": "vmaas"}}});
    let (st, body) = k.apply(&old, "namespaces", "vmaas").await;
    assert!(st < 300, "{st} {body}");
    let globex = s.token("globex", false);
    let theirs = vms::create(&s, &globex, "web", "tiny").await;
    vms::wait_ready(&s, &globex, &theirs).await;
    assert_eq!(the_vm(&k, &theirs).await["metadata"]["namespace"], legacy.as_str(), "the older release's namespace is kept");
    let (st, _) = k.request(Method::GET, &format!("/api/v1/namespaces/{}", namespace_of("globex")), None, None).await;
    assert_eq!(st, 404, "no second namespace for globex");
}
