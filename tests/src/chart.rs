//! The Helm chart (`deploy/helm/vmaas`), rendered by the real `helm
//! template` and applied to the test's real kube-apiserver; and the
//! identity it gives the server: its ServiceAccount, bound to its
//! ClusterRole, with a token from the TokenRequest API. Every kubevirt
//! test's server runs as that account, with RBAC enforced.

use std::path::{Path, PathBuf};
use std::process::Command;

use reqwest::Method;
use serde_json::{Value, json};

use crate::k8s::{Cluster, KubeApi};

/// The namespace and release name the tests install the chart as.
pub const NAMESPACE: &str = "vmaas-system";
/// The release's name (and so the ServiceAccount's and ClusterRole's).
pub const RELEASE: &str = "vmaas";
/// The user the server's requests are made as.
pub const USER: &str = "system:serviceaccount:vmaas-system:vmaas";

/// The chart's directory in the repository.
pub fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/helm/vmaas")
}

/// `helm template` of the chart with `args` (e.g. `-f values-production.yaml`),
/// as its objects.
pub fn render(args: &[&str]) -> Vec<Value> {
    let out = Command::new(crate::tools::helm())
        .args(["template", RELEASE])
        .arg(dir())
        .args(["--namespace", NAMESPACE])
        .args(args)
        .current_dir(dir())
        .output()
        .expect("helm template");
    assert!(out.status.success(), "helm template {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    crate::tools::yaml_stream(&String::from_utf8_lossy(&out.stdout))
}

/// The plural (the path segment) of a kind the chart renders.
pub fn plural(kind: &str) -> String {
    match kind {
        "NetworkPolicy" => "networkpolicies".into(),
        "PodDisruptionBudget" => "poddisruptionbudgets".into(),
        k => format!("{}s", k.to_lowercase()),
    }
}

/// Server-side applies `objects` to `k`, refusing unknown fields; panics
/// naming the object the API server refused.
pub async fn apply_strict(k: &KubeApi, objects: &[Value]) {
    for o in objects {
        let kind = o["kind"].as_str().unwrap_or_default();
        let (st, body) = k.apply(o, &plural(kind), "helm").await;
        assert!(st == 200 || st == 201, "{kind} {}: {st} {body}", o["metadata"]["name"]);
    }
}

/// The chart's RBAC (its ServiceAccount, ClusterRole and binding) installed
/// on `k`, and a kubeconfig of that account's token (TokenRequest API),
/// written in `dir`.
pub async fn service_account_kubeconfig(k: &KubeApi, dir: &Path) -> PathBuf {
    k.namespace(NAMESPACE).await;
    let rbac: Vec<Value> = render(&["--show-only", "templates/serviceaccount.yaml"])
        .into_iter()
        .chain(render(&["--show-only", "templates/clusterrole.yaml"]))
        .chain(render(&["--show-only", "templates/clusterrolebinding.yaml"]))
        .collect();
    apply_strict(k, &rbac).await;
    authorized(k).await;
    let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 86400}});
    let path = format!("/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{RELEASE}/token");
    let (st, answer) = k.request(Method::POST, &path, Some(&request), None).await;
    assert_eq!(st, 201, "TokenRequest: {answer}");
    let token = answer["status"]["token"].as_str().expect("a token");
    let config = json!({
        "apiVersion": "v1", "kind": "Config", "current-context": "vmaas",
        "clusters": [{"name": "test", "cluster": {"server": k.url, "insecure-skip-tls-verify": true}}],
        "users": [{"name": "vmaas", "user": {"token": token}}],
        "contexts": [{"name": "vmaas", "context": {"cluster": "test", "user": "vmaas"}}],
    });
    let file = dir.join("kubeconfig-vmaas");
    std::fs::write(&file, config.to_string()).expect("write the kubeconfig");
    file
}

/// Waits until the API server's authorizer has the chart's role and its
/// binding (its caches follow what was applied a moment later): a server
/// started sooner would see its first requests refused.
async fn authorized(k: &KubeApi) {
    let review = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": USER, "groups": ["system:serviceaccounts", format!("system:serviceaccounts:{NAMESPACE}"), "system:authenticated"],
                 "resourceAttributes": {"verb": "watch", "resource": "nodes"}}});
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (st, answer) = k.request(Method::POST, "/apis/authorization.k8s.io/v1/subjectaccessreviews", Some(&review), None).await;
        if st == 201 && answer["status"]["allowed"] == true {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the chart's account is not authorized 30 s after its RBAC was applied: {st} {answer}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The kubeconfig a test's server uses on `k`: the chart's account
/// ([`service_account_kubeconfig`]), never the administrator's. Made once
/// per cluster (ask for it before stopping the API server).
pub async fn server_kubeconfig(k: &Cluster) -> PathBuf {
    let made = k.dir().join("kubeconfig-vmaas");
    if made.exists() {
        return made;
    }
    service_account_kubeconfig(k, k.dir()).await
}

/// The requests the server made as the chart's account that the API
/// server refused (403), as `verb resource: reason` lines.
pub fn refusals(k: &Cluster) -> Vec<String> {
    k.audit_of(USER).iter().filter(|e| e["responseStatus"]["code"] == 403).map(describe).collect()
}

/// `verb group/resource[/subresource] ns/name (code)` of an audit event.
pub fn describe(e: &Value) -> String {
    let o = &e["objectRef"];
    format!(
        "{} {}/{}{} {}/{} ({})",
        e["verb"].as_str().unwrap_or_default(),
        o["apiGroup"].as_str().unwrap_or_default(),
        o["resource"].as_str().unwrap_or(e["requestURI"].as_str().unwrap_or_default()),
        o["subresource"].as_str().map(|s| format!("/{s}")).unwrap_or_default(),
        o["namespace"].as_str().unwrap_or_default(),
        o["name"].as_str().unwrap_or_default(),
        e["responseStatus"]["code"],
    )
}
