//! A real Kubernetes API server for tests, in the style of envtest: a real
//! `kube-apiserver` and a real etcd on loopback (from `scripts/k8s.sh`), with
//! the CRDs of KubeVirt, CDI, OVN-Kubernetes, MetalLB and Crossplane
//! installed. No controller runs: a test plays KubeVirt's part by writing
//! status itself.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

const TOKEN: &str = "vmaas-test-token";

/// A running API server and its etcd, stopped on drop; its requests are
/// those of [`KubeApi`].
pub struct Cluster {
    children: Vec<Child>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// The namespace the processes run in, if they have one of their own.
    pub netns: Option<crate::netns::Netns>,
    apiserver: PathBuf,
    ports: [u16; 4],
    _dir: tempfile::TempDir,
    /// etcd's data, in memory: etcd syncs every write, and on a disk
    /// busy with other tests' GiBs a sync has taken past its 5 s limit.
    _etcd_data: tempfile::TempDir,
    api: KubeApi,
}

/// The address an aggregated API server is played at inside an aggregated
/// cluster's namespace ([`Cluster::start_aggregated`]).
pub const AGGREGATED_ADDRESS: &str = "10.255.0.1";

/// Requests to the API server as its administrator: cheap to clone, for
/// tasks that play a controller's part.
#[derive(Clone)]
pub struct KubeApi {
    /// `https://127.0.0.1:PORT`.
    pub url: String,
    http: reqwest::Client,
}

impl std::ops::Deref for Cluster {
    type Target = KubeApi;

    fn deref(&self) -> &KubeApi {
        &self.api
    }
}

fn env_path(var: &str, default: PathBuf) -> PathBuf {
    std::env::var_os(var).map(PathBuf::from).unwrap_or(default)
}

/// A TCP port free on 127.0.0.1 now (for a process the test starts).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

/// etcd's arguments: data in `d`, client, peer and metrics ports from `ports`.
fn etcd_args<'a>(cmd: &'a mut Command, d: &std::path::Path, [ep, pp, mp, _]: [u16; 4]) -> &'a mut Command {
    cmd.arg("--data-dir")
        .arg(d)
        .args(["--listen-client-urls", &format!("http://127.0.0.1:{ep}"), "--advertise-client-urls", &format!("http://127.0.0.1:{ep}")])
        .args(["--listen-peer-urls", &format!("http://127.0.0.1:{pp}"), "--initial-advertise-peer-urls", &format!("http://127.0.0.1:{pp}")])
        .args(["--initial-cluster", &format!("default=http://127.0.0.1:{pp}"), "--listen-metrics-urls", &format!("http://127.0.0.1:{mp}")])
}

/// The service-account key pair and the token file, in `d`.
fn keys(d: &std::path::Path) {
    let key = d.join("sa.key");
    let ok = Command::new("openssl").arg("genrsa").arg("-out").arg(&key).arg("2048").stderr(Stdio::null()).status().expect("openssl");
    assert!(ok.success());
    let ok = Command::new("openssl")
        .arg("rsa")
        .arg("-in")
        .arg(&key)
        .arg("-pubout")
        .arg("-out")
        .arg(d.join("sa.pub"))
        .stderr(Stdio::null())
        .status()
        .expect("openssl");
    assert!(ok.success());
    std::fs::write(d.join("tokens.csv"), format!("{TOKEN},admin,1,\"system:masters\"\n")).expect("tokens");
    std::fs::write(d.join("audit-policy.yaml"), AUDIT_POLICY).expect("audit policy");
}

/// The API server's audit policy: every request of a service account (the
/// identity the chart gives the server), none of the administrator's.
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    userGroups: [\"system:serviceaccounts\"]
  - level: None
";

/// kube-apiserver (`bin`), inside `netns` if given (with the aggregation
/// layer routing to endpoints), on `ports`, its files in `d`.
fn apiserver_command(netns: Option<&crate::netns::Netns>, bin: &PathBuf, d: &std::path::Path, ports: [u16; 4]) -> Command {
    let mut cmd = match netns {
        Some(n) => n.command(bin),
        None => Command::new(bin),
    };
    apiserver_args(&mut cmd, d, ports);
    if netns.is_some() {
        cmd.arg("--enable-aggregator-routing=true");
    }
    cmd
}

/// kube-apiserver's arguments: etcd and its own port from `ports`, its files in `d`.
fn apiserver_args(cmd: &mut Command, d: &std::path::Path, [ep, _, _, ap]: [u16; 4]) {
    cmd.args(["--etcd-servers", &format!("http://127.0.0.1:{ep}"), "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1"])
        .args(["--secure-port", &ap.to_string(), "--authorization-mode=RBAC", "--enable-priority-and-fairness=false"])
        .arg("--cert-dir")
        .arg(d.join("certs"))
        .arg("--token-auth-file")
        .arg(d.join("tokens.csv"))
        .args(["--service-account-issuer=https://kubernetes.default.svc", "--service-cluster-ip-range=10.96.0.0/16"])
        .arg("--service-account-key-file")
        .arg(d.join("sa.pub"))
        .arg("--service-account-signing-key-file")
        .arg(d.join("sa.key"))
        .arg("--audit-policy-file")
        .arg(d.join("audit-policy.yaml"))
        .arg("--audit-log-path")
        .arg(d.join("audit.log"));
}

fn spawn(cmd: &mut Command, log: &std::path::Path) -> Child {
    let out = std::fs::File::create(log).expect("log file");
    cmd.stdin(Stdio::null()).stdout(out.try_clone().expect("log")).stderr(out).spawn().expect("start a cluster process")
}

/// Where the k8s material is: `VMAAS_K8S_DIR`, else the shared directory beside the repository.
pub fn k8s_dir() -> PathBuf {
    env_path("VMAAS_K8S_DIR", PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/k8s"))
}

/// Whether `child` has exited (a zombie, or gone); it is not reaped here.
fn exited(child: &Child) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id())).unwrap_or_default();
    stat.rsplit_once(") ").is_none_or(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X'))
}

impl Cluster {
    /// Starts etcd and kube-apiserver on free loopback ports and installs
    /// every CRD in the shared `k8s/crds`. Panics with what to run when the
    /// binaries are missing.
    pub async fn start() -> Self {
        // A free port found here may be taken by another test before the
        // cluster binds it: then the cluster is started again on new ones.
        for _ in 0..3 {
            if let Some(c) = Self::try_start(None).await {
                return c;
            }
        }
        panic!("etcd or kube-apiserver did not come up three times in a row (a port taken, or an exit: see above)")
    }

    /// Starts etcd and kube-apiserver, with the API server's aggregation
    /// layer routing to endpoints, inside a network namespace of their own
    /// (the aggregator refuses loopback endpoints: an aggregated API server
    /// is played at [`AGGREGATED_ADDRESS`], which only exists in there).
    /// The API server is reached through a unix socket, from a loopback
    /// port of the test process.
    pub async fn start_aggregated() -> Self {
        let netns = crate::netns::Netns::make("vmaas-k8s", &format!("{AGGREGATED_ADDRESS}/32"));
        Self::try_start(Some(netns)).await.expect("a fresh namespace has its ports free")
    }

    /// One attempt of [`Cluster::start`]; `None` if a port was taken.
    async fn try_start(netns: Option<crate::netns::Netns>) -> Option<Self> {
        let apiserver = env_path("VMAAS_KUBE_APISERVER", PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.cache/k8s/kube-apiserver"));
        let etcd = env_path("VMAAS_ETCD", PathBuf::from("/usr/bin/etcd"));
        for p in [&apiserver, &etcd] {
            assert!(p.exists(), "{} is missing: run `eval \"$(scripts/k8s.sh ../shared)\"` (scripts/test.sh does)", p.display());
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        // A namespace of its own has every port free.
        let ports = if netns.is_some() { [2379, 2380, 2381, 6443] } else { [free_port(), free_port(), free_port(), free_port()] };
        let command = |program: &PathBuf| match &netns {
            Some(n) => n.command(program),
            None => Command::new(program),
        };
        let etcd_data = crate::scratch::in_memory_dir();
        let mut children = vec![spawn(etcd_args(&mut command(&etcd), etcd_data.path(), ports), &d.join("etcd.log"))];
        keys(d);
        children.push(spawn(&mut apiserver_command(netns.as_ref(), &apiserver, d, ports), &d.join("apiserver.log")));
        let mut tasks = Vec::new();
        let url = match &netns {
            Some(n) => {
                let sock = d.join("api.sock");
                children.push(spawn(&mut n.unix_to_tcp(&sock, &format!("127.0.0.1:{}", ports[3])), &d.join("socat-api.log")));
                let (addr, task) = crate::netns::loopback_to_unix(sock).await;
                tasks.push(task);
                format!("https://{addr}")
            }
            None => format!("https://127.0.0.1:{}", ports[3]),
        };
        let http = reqwest::Client::builder().danger_accept_invalid_certs(true).timeout(Duration::from_secs(30)).build().expect("client");
        let c = Self { children, tasks, netns, apiserver, ports, api: KubeApi { url, http }, _dir: dir, _etcd_data: etcd_data };
        if !c.wait_ready().await {
            return None;
        }
        c.install_crds().await;
        Some(c)
    }

    /// Waits for the API server to be ready; false if it or etcd could not
    /// bind its port, or exited (the API server exits when etcd is too slow
    /// for one of its start hooks).
    async fn wait_ready(&self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let r = self.http.get(format!("{}/readyz", self.url)).bearer_auth(TOKEN).send().await;
            if let Ok(r) = r
                && r.status().is_success()
            {
                return true;
            }
            let log = std::fs::read_to_string(self._dir.path().join("apiserver.log")).unwrap_or_default();
            let etcd = std::fs::read_to_string(self._dir.path().join("etcd.log")).unwrap_or_default();
            if log.contains("address already in use") || etcd.contains("address already in use") {
                return false;
            }
            if self.children.iter().take(2).any(exited) {
                eprintln!(
                    "etcd or kube-apiserver exited while starting; starting both again. The API server's log ends:\n{}",
                    crate::scratch::tail(&log, 3000)
                );
                return false;
            }
            assert!(Instant::now() < deadline, "kube-apiserver not ready in 120 s:\n{}", crate::scratch::tail(&log, 3000));
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    async fn install_crds(&self) {
        let mut names = Vec::new();
        let mut files: Vec<PathBuf> = std::fs::read_dir(k8s_dir().join("crds")).expect("k8s/crds").flatten().map(|e| e.path()).collect();
        files.sort();
        for f in files {
            let text = std::fs::read_to_string(&f).expect("crd file");
            let crd: Value = serde_norway::from_str(&text).expect("crd yaml/json");
            if crd["kind"] != "CustomResourceDefinition" {
                continue;
            }
            names.push(self.install_crd(&crd).await);
        }
        for n in names {
            self.wait_established(&n).await;
        }
    }

    /// The path of an object (see [`KubeApi::path_of`]).
    pub fn path_of(obj: &Value, plural: &str) -> String {
        KubeApi::path_of(obj, plural)
    }

    /// A kubeconfig for this cluster (the administrator's token, the
    /// self-signed certificate not checked), written beside its data.
    pub fn kubeconfig(&self) -> PathBuf {
        let path = self._dir.path().join("kubeconfig");
        let config = json!({
            "apiVersion": "v1", "kind": "Config", "current-context": "test",
            "clusters": [{"name": "test", "cluster": {"server": self.url, "insecure-skip-tls-verify": true}}],
            "users": [{"name": "admin", "user": {"token": TOKEN}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "admin"}}],
        });
        std::fs::write(&path, config.to_string()).expect("write the kubeconfig");
        path
    }

    /// The directory of the cluster's data (and of its unix sockets).
    pub fn dir(&self) -> &std::path::Path {
        self._dir.path()
    }

    /// Starts `cmd` (a helper of the cluster: a bridge, a played server),
    /// logging to `log` in the cluster's directory; stopped with the cluster.
    pub fn keep(&mut self, cmd: &mut Command, log: &str) {
        let child = spawn(cmd, &self._dir.path().join(log));
        self.children.push(child);
    }

    /// The process id of the API server (for its CPU time, in benches).
    pub fn apiserver_pid(&self) -> u32 {
        self.children[1].id()
    }

    /// Stops the API server (etcd keeps the data): the cluster is gone for its clients.
    pub fn stop_apiserver(&mut self) {
        let _ = self.children[1].kill();
        let _ = self.children[1].wait();
    }

    /// Starts the API server again on the same port and data, and waits until it is ready.
    pub async fn start_apiserver(&mut self) {
        let d = self._dir.path().to_owned();
        let mut cmd = apiserver_command(self.netns.as_ref(), &self.apiserver, &d, self.ports);
        self.children[1] = spawn(&mut cmd, &d.join("apiserver-again.log"));
        assert!(self.wait_ready().await, "the API server did not come back on its port");
    }

    /// The API server's audit events so far (see [`AUDIT_POLICY`]) of `user`
    /// (`system:serviceaccount:NS:NAME`): see [`audit_events`].
    pub fn audit_of(&self, user: &str) -> Vec<Value> {
        audit_events(&std::fs::read_to_string(self._dir.path().join("audit.log")).unwrap_or_default(), user)
    }

    /// Keeps `task` running until the cluster stops.
    pub fn keep_task(&mut self, task: tokio::task::JoinHandle<()>) {
        self.tasks.push(task);
    }

    /// A handle for requests that outlives no test: see [`KubeApi`].
    pub fn api(&self) -> KubeApi {
        self.api.clone()
    }
}

impl KubeApi {
    /// Creates a CRD; returns its name (wait for it with [`Cluster::wait_established`]).
    pub async fn install_crd(&self, crd: &Value) -> String {
        let (st, body) = self.request(Method::POST, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", Some(crd), None).await;
        assert!(st == 201 || st == 409, "installing {}: {st} {body}", crd["metadata"]["name"]);
        crd["metadata"]["name"].as_str().unwrap_or_default().to_owned()
    }

    /// Waits until CRD `name` is established.
    pub async fn wait_established(&self, name: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (_, crd) =
                self.request(Method::GET, &format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"), None, None).await;
            let established = crd["status"]["conditions"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["type"] == "Established" && c["status"] == "True"));
            if established {
                return;
            }
            assert!(Instant::now() < deadline, "CRD {name} not established: {crd}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A request with the admin token: `(status, JSON body or Null)`.
    pub async fn request(&self, method: Method, path: &str, body: Option<&Value>, content_type: Option<&str>) -> (u16, Value) {
        let mut req = self.http.request(method, format!("{}{path}", self.url)).bearer_auth(TOKEN);
        if let Some(b) = body {
            req = req.header("content-type", content_type.unwrap_or("application/json")).body(b.to_string());
        }
        let resp = req.send().await.expect("request to kube-apiserver");
        let st = resp.status().as_u16();
        (st, resp.json().await.unwrap_or(Value::Null))
    }

    /// A GET with the admin token whose answer is text (`/metrics`): `(status, body)`.
    pub async fn text(&self, path: &str) -> (u16, String) {
        let resp = self.http.get(format!("{}{path}", self.url)).bearer_auth(TOKEN).send().await.expect("request to kube-apiserver");
        (resp.status().as_u16(), resp.text().await.unwrap_or_default())
    }

    /// A watch of `path` (`…?watch=1`): the streaming response, one JSON event per line.
    pub async fn watch(&self, path: &str) -> reqwest::Response {
        self.get_streaming(path).await.expect("a watch of kube-apiserver")
    }

    /// A GET with the admin token on a connection of its own, its body
    /// read as it comes (a watch streams); an error when the API server
    /// does not answer (it may be gone).
    pub async fn get_streaming(&self, path: &str) -> reqwest::Result<reqwest::Response> {
        let http = reqwest::Client::builder().danger_accept_invalid_certs(true).build()?;
        http.get(format!("{}{path}", self.url)).bearer_auth(TOKEN).send().await
    }

    /// The path of an object: `/api/v1/namespaces/NS/services/NAME` or `/apis/GROUP/VERSION/…`.
    pub fn path_of(obj: &Value, plural: &str) -> String {
        let api = obj["apiVersion"].as_str().unwrap_or_default();
        let base = if api.contains('/') { format!("/apis/{api}") } else { format!("/api/{api}") };
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        match obj["metadata"]["namespace"].as_str() {
            Some(ns) => format!("{base}/namespaces/{ns}/{plural}/{name}"),
            None => format!("{base}/{plural}/{name}"),
        }
    }

    /// Server-side apply of `obj` (as `manager`), refusing unknown fields.
    pub async fn apply(&self, obj: &Value, plural: &str, manager: &str) -> (u16, Value) {
        let path = format!("{}?fieldManager={manager}&fieldValidation=Strict&force=true", Self::path_of(obj, plural));
        self.request(Method::PATCH, &path, Some(obj), Some("application/apply-patch+yaml")).await
    }

    /// Writes `status` through the status subresource, as a controller would.
    pub async fn write_status(&self, obj: &Value, plural: &str, status: Value) -> (u16, Value) {
        let path = format!("{}/status?fieldValidation=Strict", Self::path_of(obj, plural));
        self.request(Method::PATCH, &path, Some(&json!({ "status": status })), Some("application/merge-patch+json")).await
    }

    /// Creates namespace `name`.
    pub async fn namespace(&self, name: &str) {
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        let (st, body) = self.apply(&ns, "namespaces", "vmaas-tests").await;
        assert!(st == 200 || st == 201, "namespace {name}: {st} {body}");
    }
}

/// The requests of `user` in an audit log's text, each once: its last
/// stage (a long-running request, a watch or a console, may have only
/// `ResponseStarted` when the server stopped).
pub fn audit_events(text: &str, user: &str) -> Vec<Value> {
    let mut by_id: std::collections::BTreeMap<String, Value> = std::collections::BTreeMap::new();
    for e in text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()) {
        if e["user"]["username"] == user {
            by_id.insert(e["auditID"].as_str().unwrap_or_default().to_owned(), e);
        }
    }
    by_id.into_values().collect()
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // For whoever reviews the chart's ClusterRole: every cluster's audit
        // log kept, when asked, after its test.
        if let Some(keep) = std::env::var_os("VMAAS_KEEP_AUDIT_LOGS") {
            let unique = self._dir.path().file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let to = PathBuf::from(keep).join(format!("audit-{}-{unique}.log", std::process::id()));
            let _ = std::fs::copy(self._dir.path().join("audit.log"), to);
        }
        for c in self.children.iter_mut().rev() {
            let _ = c.kill();
            let _ = c.wait();
        }
        for t in &self.tasks {
            t.abort();
        }
    }
}
