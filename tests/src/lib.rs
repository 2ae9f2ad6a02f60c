//! Harness for end-to-end tests: starts the real `vmaas-server` binary on a
//! fresh data directory and a fresh database (SQLite, or a new database on
//! the PostgreSQL server named by `VMAAS_TEST_DATABASE_URL`), mints tokens
//! with `vmaas-server token`, and runs the real `vmaas` CLI.
//!
//! Build the binaries first: `cargo build --bins` (the test script does).

pub mod aggregated;
pub mod browser;
pub mod cdi_upload;
pub mod chart;
pub mod crossplane;
pub mod crossplane_core;
mod failure;
pub mod files;
pub mod guest;
pub mod images;
pub mod k8s;
pub mod kubevirt;
pub mod metallb;
pub mod netns;
pub mod objects;
pub mod oidc;
pub mod osac;
pub mod registry;
pub mod rfb;
pub mod scratch;
pub mod seed;
pub mod seed002;
pub mod ssh;
pub mod tf;
pub mod tools;
pub mod virt_api;
pub mod virt_export;
pub mod vms;
pub mod xcrd;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::Value;
use sqlx::Connection;

/// Where cargo put the binaries of this build.
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    // target/<profile>/deps/<test> -> target/<profile>/<name>
    let dir = exe.parent().and_then(Path::parent).expect("target dir");
    let p = dir.join(name);
    assert!(p.exists(), "{} is missing: run `cargo build --bins` before the end-to-end tests", p.display());
    p
}

/// The images directory: `VMAAS_IMAGES_DIR`, else ~/.local/share/vmaas/images.
pub fn images_dir() -> PathBuf {
    match std::env::var_os("VMAAS_IMAGES_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".local/share/vmaas/images"),
    }
}

/// What `qemu-img info` says of a disk image (read without its lock, so
/// while a VM has it open): its format, `virtual-size`, `backing-filename`.
pub fn disk_info(path: &Path) -> serde_json::Value {
    let out = std::process::Command::new("qemu-img").args(["info", "-U", "--output=json"]).arg(path).output().expect("qemu-img");
    assert!(out.status.success(), "qemu-img info {}: {}", path.display(), String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("qemu-img info's JSON")
}

fn rand_byte() -> u8 {
    uuid::Uuid::new_v4().as_bytes()[0]
}

/// What the qemu backend needs in tests: the base images in `images` (the
/// test guest among them), and an address pool and an external IP pool of
/// its own on loopback.
pub fn qemu_args(images: &Path) -> Vec<String> {
    let (a, b) = (50 + rand_byte() % 200, rand_byte());
    assert!(
        images.join("test-guest/image.json").exists(),
        "the test guest is missing in {}: run scripts/guest-image.sh (scripts/test.sh does)",
        images.display()
    );
    let pools = [format!("127.{a}.{b}.0/25"), format!("127.{a}.{b}.128/25")];
    let [pool, external] = pools;
    ["--images-dir", &images.display().to_string(), "--vm-address-pool", &pool, "--external-ip-pool", &external, "--stop-grace", "10s"]
        .map(str::to_owned)
        .to_vec()
}

/// Pids of the live QEMU processes whose command line contains `needle`.
pub fn qemu_pids(needle: &str) -> Vec<i32> {
    pids_of("qemu-system", needle)
}

/// Pids of the live (not zombie) processes whose command line starts with
/// `program` and contains `needle`.
pub fn pids_of(program: &str, needle: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd);
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let zombie = stat.rsplit_once(") ").is_some_and(|(_, r)| r.starts_with('Z'));
        if cmd.starts_with(program) && cmd.contains(needle) && !zombie {
            out.push(pid);
        }
    }
    out
}

/// Which database a test server uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Db {
    /// SQLite in the data directory.
    Sqlite,
    /// A new database on the test PostgreSQL server.
    Postgres,
}

/// The PostgreSQL server to test against, if any. With
/// `VMAAS_REQUIRE_POSTGRES=1` its absence fails the test instead of skipping it.
pub fn postgres_url() -> Option<String> {
    match std::env::var("VMAAS_TEST_DATABASE_URL") {
        Ok(u) if !u.is_empty() => Some(u),
        _ => {
            assert!(
                std::env::var("VMAAS_REQUIRE_POSTGRES").as_deref() != Ok("1"),
                "VMAAS_REQUIRE_POSTGRES=1 but VMAAS_TEST_DATABASE_URL is not set"
            );
            eprintln!("skipping: VMAAS_TEST_DATABASE_URL is not set");
            None
        }
    }
}

/// Creates a fresh database on the test server and returns its URL.
pub async fn fresh_postgres_db(base: &str) -> String {
    let name = format!("vmaas_test_{}", uuid::Uuid::new_v4().simple());
    let mut conn = sqlx::postgres::PgConnection::connect(base).await.expect("connect to the test PostgreSQL");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut conn).await.expect("create database");
    let (prefix, _) = base.rsplit_once('/').expect("database URL has a path");
    format!("{prefix}/{name}")
}

/// An HTTP client that lets idle connections go before the server's idle
/// limit (10 s) does, so a request never races the server's close.
fn pooled() -> reqwest::Client {
    reqwest::Client::builder().pool_idle_timeout(Duration::from_secs(5)).build().expect("HTTP client")
}

/// A running `vmaas-server`.
pub struct Server {
    child: Option<Child>,
    /// Its data directory.
    pub data_dir: PathBuf,
    _tmp: Option<tempfile::TempDir>,
    /// `http://127.0.0.1:PORT` (`https://` when it serves TLS).
    pub endpoint: String,
    /// The database URL, for PostgreSQL.
    pub database_url: Option<String>,
    extra: Vec<String>,
    http: reqwest::Client,
    /// The address it listens on: port 0 until it first starts, then the
    /// port it got, so a restart comes back where its clients look.
    listen: String,
}

impl Server {
    /// Starts an API-only server (`--backend none`) with a new data
    /// directory on `db`, or `None` when PostgreSQL is not available.
    pub async fn start(db: Db) -> Option<Self> {
        Self::start_with(db, &["--backend", "none"]).await
    }

    /// Starts a server with the qemu backend on SQLite, with the test guest
    /// image and an external IP pool of its own.
    pub async fn start_qemu() -> Self {
        Self::start_qemu_with(&[]).await
    }

    /// Same, with more command-line arguments.
    pub async fn start_qemu_with(more: &[&str]) -> Self {
        Self::start_qemu_images(&images_dir(), more).await
    }

    /// Same, with the base images in `images`.
    pub async fn start_qemu_images(images: &Path, more: &[&str]) -> Self {
        Self::start_qemu_at(images, more, tempfile::tempdir().expect("tempdir")).await
    }

    /// Same as [`Server::start_qemu_with`], in data directory `tmp` (one
    /// whose `vms/` is a file system the test mounted, say).
    pub async fn start_qemu_in(tmp: tempfile::TempDir, more: &[&str]) -> Self {
        Self::start_qemu_at(&images_dir(), more, tmp).await
    }

    async fn start_qemu_at(images: &Path, more: &[&str], tmp: tempfile::TempDir) -> Self {
        let host = qemu_args(images);
        let all: Vec<&str> = ["--backend", "qemu"].into_iter().chain(host.iter().map(String::as_str)).chain(more.iter().copied()).collect();
        Self::start_in(Db::Sqlite, &all, tmp).await.expect("sqlite")
    }

    /// Same, with extra command-line arguments.
    pub async fn start_with(db: Db, extra: &[&str]) -> Option<Self> {
        Self::start_in(db, extra, tempfile::tempdir().expect("tempdir")).await
    }

    /// Same, with its data directory in memory (`/dev/shm`), for a test
    /// that bounds a latency: a commit's sync then costs nothing, however
    /// busy the disk is with what other tests wrote.
    pub async fn start_in_memory(db: Db, extra: &[&str]) -> Option<Self> {
        Self::start_in(db, extra, scratch::in_memory_dir()).await
    }

    async fn start_in(db: Db, extra: &[&str], tmp: tempfile::TempDir) -> Option<Self> {
        let database_url = match db {
            Db::Sqlite => None,
            Db::Postgres => Some(fresh_postgres_db(&postgres_url()?).await),
        };
        let mut s = Self {
            child: None,
            data_dir: tmp.path().to_owned(),
            _tmp: Some(tmp),
            endpoint: String::new(),
            database_url,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            http: pooled(),
            listen: "127.0.0.1:0".into(),
        };
        s.launch().await;
        Some(s)
    }

    /// A second replica: same database, same signing key, same arguments,
    /// its own data directory.
    pub async fn replica_of(other: &Server) -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let key = other.data_dir.join("jwt-hs256.key");
        let mut extra = other.extra.clone();
        extra.extend(["--jwt-key-file".into(), key.display().to_string()]);
        let mut s = Self {
            child: None,
            data_dir: tmp.path().to_owned(),
            _tmp: Some(tmp),
            endpoint: String::new(),
            database_url: other.database_url.clone(),
            extra,
            http: pooled(),
            listen: "127.0.0.1:0".into(),
        };
        s.launch().await;
        s
    }

    fn log_path(&self) -> PathBuf {
        self.data_dir.join("server.log")
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// Prints the last `lines` of the server's log on stderr: a failed
    /// test shows what the server did (CI keeps only the test's output).
    fn print_log_tail(&self, lines: usize) {
        let log = self.log();
        let all: Vec<&str> = log.lines().collect();
        eprintln!("--- the server's last {lines} log lines ({}) ---", self.log_path().display());
        for l in &all[all.len().saturating_sub(lines)..] {
            eprintln!("{l}");
        }
    }

    async fn launch(&mut self) {
        failure::remember();
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.log_path()).expect("log file");
        let start_len = log.metadata().map(|m| m.len()).unwrap_or(0) as usize;
        let mut cmd = Command::new(bin("vmaas-server"));
        cmd.arg("--listen").arg(&self.listen).arg("--data-dir").arg(&self.data_dir).arg("--reconcile-interval").arg("200ms");
        if let Some(u) = &self.database_url {
            cmd.arg("--database-url").arg(u);
        }
        cmd.args(&self.extra);
        // The tests' loads are theirs to choose: a tenant's request rate is
        // checked on every request, but limited only where a test passes
        // --tenant-rate-limit (which wins over the environment).
        cmd.env("VMAAS_TENANT_RATE_LIMIT", "1000000");
        cmd.env("VMAAS_LOG", "info,tower_http=warn").stdout(Stdio::null()).stderr(log);
        self.child = Some(cmd.spawn().expect("spawn vmaas-server"));
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let text = self.log();
            if let Some(line) = text[start_len.min(text.len())..].lines().find(|l| l.contains("vmaas-server ready")) {
                let field = |f: &str| line.split(f).nth(1).and_then(|r| r.split_whitespace().next()).map(str::to_owned);
                let addr = field("listen=").expect("listen= in the ready line");
                let scheme = field("scheme=").unwrap_or_else(|| "http".into());
                self.endpoint = format!("{scheme}://{addr}");
                self.listen = addr;
                self.http = self.http_client();
                return;
            }
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                panic!("vmaas-server exited with {status} before it was ready:\n{text}");
            }
            assert!(Instant::now() < deadline, "vmaas-server not ready in 30s:\n{text}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops the server (SIGTERM, then SIGKILL after 10 s).
    pub async fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill").arg("-TERM").arg(c.id().to_string()).status();
            let deadline = Instant::now() + Duration::from_secs(10);
            while c.try_wait().ok().flatten().is_none() {
                if Instant::now() > deadline {
                    let _ = c.kill();
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let _ = c.wait();
        }
    }

    /// The server process's id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Kills the server with SIGKILL, as a crash would: nothing is released.
    pub async fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts the server again (after [`Server::stop`] or [`Server::kill9`]).
    pub async fn relaunch(&mut self) {
        self.launch().await;
    }

    /// The extra arguments the server runs with.
    pub fn extra(&self) -> &[String] {
        &self.extra
    }

    /// Replaces the extra arguments of the next launch.
    pub fn set_extra(&mut self, extra: &[impl AsRef<str>]) {
        self.extra = extra.iter().map(|s| s.as_ref().to_owned()).collect();
    }

    /// Runs `vmaas-server ARGS` on this server's data directory, database
    /// and extra arguments to its end (killed after 60 s): `gc`, or a start
    /// that must fail.
    pub fn server_command(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(bin("vmaas-server"));
        cmd.args(args).arg("--data-dir").arg(&self.data_dir);
        if let Some(u) = &self.database_url {
            cmd.arg("--database-url").arg(u);
        }
        let mut child = cmd
            .args(&self.extra)
            .env("VMAAS_LOG", "info,tower_http=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run vmaas-server");
        let deadline = Instant::now() + Duration::from_secs(60);
        while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        child.wait_with_output().expect("wait for vmaas-server")
    }

    /// Starts the server again after [`Server::stop`], on the same address,
    /// data directory and database.
    pub async fn launch_again(&mut self) {
        self.launch().await;
    }

    /// Stops and starts the server on the same data directory and database.
    pub async fn restart(&mut self) {
        self.stop().await;
        self.launch().await;
    }

    /// A token from `vmaas-server token`.
    pub fn token(&self, tenant: &str, admin: bool) -> String {
        self.token_as(tenant, tenant, admin)
    }

    /// A token of `subject` in `tenant` from `vmaas-server token`.
    pub fn token_as(&self, tenant: &str, subject: &str, admin: bool) -> String {
        let mut cmd = Command::new(bin("vmaas-server"));
        cmd.arg("token").arg("--tenant").arg(tenant).arg("--subject").arg(subject).arg("--data-dir").arg(&self.data_dir);
        if admin {
            cmd.arg("--admin");
        }
        let out = cmd.output().expect("run vmaas-server token");
        assert!(out.status.success(), "token: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).expect("utf8").trim().to_owned()
    }

    /// The certificate to trust when the server serves TLS: the file of
    /// `--tls-cert`, else the self-signed one in its data directory.
    pub fn ca_file(&self) -> Option<PathBuf> {
        if !self.endpoint.starts_with("https://") {
            return None;
        }
        let given = self.extra.iter().position(|a| a == "--tls-cert").and_then(|i| self.extra.get(i + 1));
        Some(given.map_or_else(|| self.data_dir.join("tls/self-signed.crt"), PathBuf::from))
    }

    /// An HTTP client trusting the server's certificate.
    fn http_client(&self) -> reqwest::Client {
        let mut b = reqwest::Client::builder().pool_idle_timeout(Duration::from_secs(5));
        if let Some(ca) = self.ca_file() {
            let pem = std::fs::read(&ca).expect("the server's certificate");
            b = b.tls_certs_merge([reqwest::Certificate::from_pem(&pem).expect("PEM certificate")]);
        }
        b.build().expect("HTTP client")
    }

    /// A typed client with `token`.
    pub fn client(&self, token: &str) -> vmaas_client::Client {
        let ca = self.ca_file().map(|f| std::fs::read(f).expect("the server's certificate"));
        vmaas_client::Client::with_tls(&self.endpoint, Some(token.to_owned()), false, ca.as_deref()).expect("client")
    }

    /// A raw request: `(status, JSON body or Null)`.
    pub async fn raw(&self, method: Method, path: &str, token: Option<&str>, body: Option<Value>) -> (u16, Value) {
        let mut req = self.http.request(method, format!("{}{path}", self.endpoint));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.expect("request");
        let status = resp.status().as_u16();
        let text = resp.text().await.expect("body");
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    /// Runs the `vmaas` CLI against this server with `token`.
    pub fn cli(&self, token: &str, args: &[&str]) -> Output {
        self.cli_with_stdin(token, args, b"")
    }

    /// `vmaas ARGS -o json` as `token`, which must succeed; its JSON (the
    /// server's log in the failure).
    pub fn cli_json(&self, token: &str, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        let out = self.cli(token, &all);
        assert!(out.status.success(), "vmaas {args:?}: {}\n{}", String::from_utf8_lossy(&out.stderr), self.log());
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
    }

    /// The `vmaas` CLI with `args`, as `token`, for this server (not started).
    pub fn cli_command(&self, token: &str, args: &[&str]) -> Command {
        let mut cmd = Command::new(bin("vmaas"));
        if let Some(ca) = self.ca_file() {
            cmd.env("VMAAS_CA_FILE", ca);
        }
        cmd.args(args)
            .env("VMAAS_ENDPOINT", &self.endpoint)
            .env("VMAAS_TOKEN", token)
            .env("VMAAS_CONFIG", self.data_dir.join("cli-config.yaml"));
        cmd
    }

    /// Runs the `vmaas` CLI with `stdin` as its standard input.
    pub fn cli_with_stdin(&self, token: &str, args: &[&str], stdin: &[u8]) -> Output {
        use std::io::Write;
        let mut child =
            self.cli_command(token, args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("run vmaas");
        if let Some(mut input) = child.stdin.take() {
            input.write_all(stdin).expect("write stdin");
        }
        child.wait_with_output().expect("wait for vmaas")
    }
}

/// A process the test started, killed (and reaped) when dropped.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if std::thread::panicking() {
            self.print_log_tail(80);
            failure::repeat();
        }
        // Guests run daemonized: stop any this server left behind.
        for pid in qemu_pids(&self.data_dir.display().to_string()) {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
        }
    }
}

/// Runs an async test body once on SQLite and once on PostgreSQL.
#[macro_export]
macro_rules! on_both_databases {
    ($(#[$m:meta])* async fn $name:ident($db:ident: Db) $body:block) => {
        mod $name {
            use super::*;
            async fn run($db: Db) $body
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() { run(Db::Sqlite).await }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() { if $crate::postgres_url().is_some() { run(Db::Postgres).await } }
        }
    };
}
