//! Crossplane's real core (`crossplane core init`, then `crossplane core
//! start`, v2.2.1 from its Go module) against a test's kube-apiserver, with
//! webhooks off and the `External` package runtime: Crossplane runs no
//! function pods (there are no nodes), and the test plays the external
//! runtime, as a FunctionRevision whose `status.endpoint` is
//! `function-vmaas` on loopback, serving mTLS with a certificate signed by
//! the CA `core init` made (Crossplane calls functions with its client
//! certificate, signed by the same CA).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use crate::crossplane::FunctionProcess;
use crate::k8s::{Cluster, free_port};
use crate::tools::{crossplane_core, crossplane_crds};

/// Crossplane's namespace, and the Secrets `core init` fills (the names its
/// Helm chart gives them).
const NAMESPACE: &str = "crossplane-system";
const CA_SECRET: &str = "crossplane-root-ca";
const CLIENT_SECRET: &str = "crossplane-tls-client";

/// The running core, killed on drop, with the function it calls.
pub struct Core {
    child: Child,
    dir: tempfile::TempDir,
    /// `function-vmaas`, serving mTLS on loopback.
    pub function: FunctionProcess,
}

impl Drop for Core {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes the keys of Secret `name` in Crossplane's namespace into `dir`.
async fn secret_files(k: &Cluster, name: &str, dir: &Path) {
    use base64::Engine as _;
    std::fs::create_dir_all(dir).unwrap();
    let (st, s) = k.request(Method::GET, &format!("/api/v1/namespaces/{NAMESPACE}/secrets/{name}"), None, None).await;
    assert_eq!(st, 200, "Secret {name}: {s}");
    for (key, v) in s["data"].as_object().expect("the Secret's data") {
        let bytes = base64::engine::general_purpose::STANDARD.decode(v.as_str().unwrap()).unwrap();
        std::fs::write(dir.join(key), bytes).unwrap();
    }
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl").args(args).current_dir(dir).output().expect("openssl");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A server certificate for 127.0.0.1 in `dir` (tls.crt, tls.key, and the
/// CA as ca.crt), signed by Crossplane's CA (in `ca`).
fn function_certs(ca: &Path, dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::copy(ca.join("tls.crt"), dir.join("ca.crt")).unwrap();
    std::fs::write(dir.join("san.ext"), "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n").unwrap();
    openssl(dir, &["genrsa", "-out", "tls.key", "2048"]);
    openssl(dir, &["req", "-new", "-key", "tls.key", "-subj", "/CN=function-vmaas", "-out", "tls.csr"]);
    let (ca_crt, ca_key) = (ca.join("tls.crt"), ca.join("tls.key"));
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "tls.csr",
            "-CA",
            ca_crt.to_str().unwrap(),
            "-CAkey",
            ca_key.to_str().unwrap(),
            "-CAcreateserial",
            "-days",
            "1",
            "-extfile",
            "san.ext",
            "-out",
            "tls.crt",
        ],
    );
}

/// `crossplane core init`: Crossplane's CRDs, its CA and certificates.
/// Run again while the API server's discovery has not caught up with the
/// CRDs it just made (it says `no matches for kind`), as a pod restarting
/// would.
fn init(k: &Cluster, dir: &Path) {
    let webhooks = dir.join("webhooks");
    std::fs::create_dir_all(&webhooks).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = Command::new(crossplane_core())
            .args(["core", "init", "--namespace", NAMESPACE])
            .arg("--cr-ds-path")
            .arg(crossplane_crds())
            .arg("--webhook-configurations-path")
            .arg(&webhooks)
            .args(["--tlsca-secret-name", CA_SECRET, "--tls-server-secret-name", "crossplane-tls-server"])
            .args(["--tls-client-secret-name", CLIENT_SECRET])
            .env("KUBECONFIG", k.kubeconfig())
            .output()
            .expect("run crossplane core init");
        if out.status.success() {
            return;
        }
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(Instant::now() < deadline, "crossplane core init:\n{err}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

impl Core {
    /// Initialises and starts Crossplane's core against `k`, and the
    /// function it calls.
    pub async fn start(k: &Cluster) -> Self {
        let core = Self::start_bare(k).await;
        core.install_function(k).await;
        core
    }

    /// [`Core::start`] without the played FunctionRevision: Crossplane's
    /// package manager installs functions itself (from a registry).
    pub async fn start_bare(k: &Cluster) -> Self {
        let dir = tempfile::tempdir().unwrap();
        k.namespace(NAMESPACE).await;
        init(k, dir.path());
        let (ca, client) = (dir.path().join("ca"), dir.path().join("client"));
        secret_files(k, CA_SECRET, &ca).await;
        secret_files(k, CLIENT_SECRET, &client).await;
        // The package cache must exist: Crossplane stores each pulled
        // package's contents there while it parses them.
        std::fs::create_dir_all(dir.path().join("xpkg")).unwrap();
        let log = std::fs::File::create(dir.path().join("core.log")).unwrap();
        let child = Command::new(crossplane_core())
            .args(["core", "start", "--namespace", NAMESPACE, "--package-runtime", "External"])
            // Checked every few seconds, not each minute: a watch event
            // missed on a loaded machine costs seconds, not the test.
            .args(["--poll-interval", "5s"])
            .arg("--tls-client-certs-dir")
            .arg(&client)
            .arg("--xpkg-cache-dir")
            .arg(dir.path().join("xpkg"))
            .args(["--metrics-port", &free_port().to_string(), "--health-probe-port", &free_port().to_string()])
            .env("KUBECONFIG", k.kubeconfig())
            // No webhook server (nothing could call it: there is no Service).
            .env("ENABLE_WEBHOOKS", "false")
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .expect("start crossplane core");
        let certs = dir.path().join("function");
        function_certs(&ca, &certs);
        let function = FunctionProcess::start(&["--tls-certs-dir", certs.to_str().unwrap()]);
        Self { child, dir, function }
    }

    /// The function's server certificate (`tls.crt`, `tls.key`, `ca.crt`),
    /// signed by Crossplane's CA.
    pub fn function_certs(&self) -> std::path::PathBuf {
        self.dir.path().join("function")
    }

    /// Crossplane's log so far (for a failing test's message).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("core.log")).unwrap_or_default()
    }

    /// Plays the external package runtime: an active FunctionRevision of
    /// `function-vmaas` whose endpoint is the function on loopback, with
    /// the capability its package declares. Its image is on a loopback
    /// port nothing listens on: Crossplane's package manager cannot fetch
    /// it (and says so in `RevisionHealthy`), which does not stop the
    /// composition engine from calling the endpoint.
    async fn install_function(&self, k: &Cluster) {
        let revision = json!({
            "apiVersion": "pkg.crossplane.io/v1", "kind": "FunctionRevision",
            "metadata": {"name": "function-vmaas-local", "labels": {"pkg.crossplane.io/package": "function-vmaas"}},
            "spec": {"desiredState": "Active", "image": "127.0.0.1:1/vmaas/function-vmaas:v0.1.0", "revision": 1,
                     "ignoreCrossplaneConstraints": true, "skipDependencyResolution": true},
        });
        let (st, body) = k.apply(&revision, "functionrevisions", "external-runtime").await;
        assert!(st == 200 || st == 201, "the FunctionRevision: {st} {body:#}");
        self.publish_endpoint(k).await;
    }

    /// (Re)writes the revision's endpoint and capabilities, as the external
    /// runtime keeps them.
    pub async fn publish_endpoint(&self, k: &Cluster) {
        let revision =
            json!({"apiVersion": "pkg.crossplane.io/v1", "kind": "FunctionRevision", "metadata": {"name": "function-vmaas-local"}});
        let status = json!({"endpoint": self.function.addr, "capabilities": ["composition"]});
        let (st, body) = k.write_status(&revision, "functionrevisions", status).await;
        assert_eq!(st, 200, "the FunctionRevision's endpoint: {body:#}");
    }

    /// Waits (up to `secs`) until `get` returns `Some`, republishing the
    /// endpoint meanwhile; panics with Crossplane's log tail otherwise.
    pub async fn until<T, F, Fut>(&self, k: &Cluster, what: &str, secs: u64, get: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Option<T>>,
    {
        self.until_showing(k, what, secs, &[], get).await
    }

    /// [`Core::until`], and on failure also the status of each object at
    /// `show` (what Crossplane made of them).
    pub async fn until_showing<T, F, Fut>(&self, k: &Cluster, what: &str, secs: u64, show: &[&str], mut get: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Option<T>>,
    {
        let deadline = Instant::now() + Duration::from_secs(secs);
        let mut last_publish = Instant::now();
        loop {
            if let Some(v) = get().await {
                return v;
            }
            if Instant::now() > deadline {
                let mut seen = String::new();
                for path in show {
                    let status = get_any(k, path).await;
                    seen.push_str(&format!("{path}: {status:#}\n"));
                }
                let log = self.log();
                let tail: Vec<&str> = log.lines().rev().take(30).collect();
                let tail = tail.into_iter().rev().collect::<Vec<_>>().join("\n");
                panic!("{what}: not within {secs} s;\n{seen}Crossplane's log ends:\n{tail}");
            }
            if last_publish.elapsed() > Duration::from_secs(5) {
                self.publish_endpoint(k).await;
                last_publish = Instant::now();
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// The status at `path` (or what the API server answered).
async fn get_any(k: &Cluster, path: &str) -> Value {
    let (st, body) = k.request(Method::GET, path, None, None).await;
    if st == 200 {
        json!({"status": body["status"], "resourceRefs": body["spec"]["resourceRefs"]})
    } else {
        json!({"answer": st, "body": body})
    }
}

/// The object at `path`, if it exists.
pub async fn get(k: &Cluster, path: &str) -> Option<Value> {
    let (st, body) = k.request(Method::GET, path, None, None).await;
    (st == 200).then_some(body)
}
