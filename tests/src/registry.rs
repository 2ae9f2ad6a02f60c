//! A real OCI registry on loopback (Debian's `docker-registry`, the CNCF
//! distribution), and `skopeo` to copy images to and from it.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A registry serving plain HTTP on `127.0.0.1:PORT`, its storage in a
/// directory of its own; stopped on drop.
pub struct Registry {
    child: Child,
    /// `127.0.0.1:PORT`, as image references name it.
    pub host: String,
    _dir: tempfile::TempDir,
}

impl Registry {
    /// Starts the registry on 127.0.0.1 and waits until it answers `/v2/`.
    pub async fn start() -> Self {
        Self::start_on("127.0.0.1").await
    }

    /// Starts the registry on loopback address `ip` and waits until it answers `/v2/`.
    pub async fn start_on(ip: &str) -> Self {
        Self::start_with(ip, None).await
    }

    /// Starts a registry on 127.0.0.1 that lets in `user` with `password`
    /// only (htpasswd, bcrypt), for pulls and pushes alike.
    pub async fn start_with_auth(user: &str, password: &str) -> Self {
        Self::start_with("127.0.0.1", Some((user, password))).await
    }

    async fn start_with(ip: &str, auth: Option<(&str, &str)>) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = crate::k8s::free_port();
        let mut config = format!(
            "version: 0.1\nlog: {{level: warn}}\nstorage:\n  filesystem: {{rootdirectory: {}}}\n  delete: {{enabled: true}}\nhttp:\n  addr: {ip}:{port}\n",
            dir.path().join("data").display()
        );
        if let Some((user, password)) = auth {
            let htpasswd = dir.path().join("htpasswd");
            std::fs::write(&htpasswd, format!("{user}:{}\n", bcrypt(password))).expect("htpasswd");
            config.push_str(&format!("auth:\n  htpasswd: {{realm: vmaas-tests, path: {}}}\n", htpasswd.display()));
        }
        std::fs::write(dir.path().join("config.yml"), config).expect("registry config");
        let log = std::fs::File::create(dir.path().join("registry.log")).expect("log");
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(dir.path().join("config.yml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("docker-registry (Debian's docker-registry; scripts/test.sh installs it)");
        let r = Self { child, host: format!("{ip}:{port}"), _dir: dir };
        let deadline = Instant::now() + Duration::from_secs(30);
        let up = if auth.is_some() { 401 } else { 200 };
        while reqwest::get(format!("http://{}/v2/", r.host)).await.map(|a| a.status().as_u16()).ok() != Some(up) {
            assert!(Instant::now() < deadline, "the registry did not answer in 30 s: {}", r.log());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        r
    }

    /// The registry's own log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("registry.log")).unwrap_or_default()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The bcrypt hash of `password`, as htpasswd files hold them (glibc's
/// crypt, through Python's standard library).
fn bcrypt(password: &str) -> String {
    let script = "import crypt, sys; print(crypt.crypt(sys.argv[1], crypt.mksalt(crypt.METHOD_BLOWFISH)))";
    let out = Command::new("python3").args(["-W", "ignore", "-c", script, password]).output().expect("python3");
    assert!(out.status.success(), "bcrypt: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// `skopeo ARGS` (plain HTTP to the loopback registry); its standard output.
pub fn skopeo(args: &[&str]) -> String {
    let out = Command::new("skopeo").args(args).output().expect("skopeo (Debian's skopeo; scripts/test.sh installs it)");
    assert!(out.status.success(), "skopeo {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Copies `from` to `to` (`oci:DIR:TAG`, `docker://HOST/NAME:TAG`), never
/// asking TLS of the loopback registry.
pub fn copy(from: &str, to: &str) {
    skopeo(&["copy", "--quiet", "--src-tls-verify=false", "--dest-tls-verify=false", from, to]);
}

/// [`copy`] to a registry that asks for `creds` (`USER:PASSWORD`).
pub fn copy_as(from: &str, to: &str, creds: &str) {
    skopeo(&["copy", "--quiet", "--src-tls-verify=false", "--dest-tls-verify=false", "--dest-creds", creds, from, to]);
}

/// `skopeo inspect` of `reference` (`--config` for the image's config).
pub fn inspect(reference: &str, config: bool) -> serde_json::Value {
    let mut args = vec!["inspect", "--tls-verify=false"];
    if config {
        args.push("--config");
    }
    args.push(reference);
    serde_json::from_str(&skopeo(&args)).expect("skopeo inspect's JSON")
}

/// The files (not directories) under `root`, relative, sorted.
pub fn files_under(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() && !p.is_symlink() {
                stack.push(p);
            } else if let Ok(rel) = p.strip_prefix(root) {
                out.push(rel.display().to_string());
            }
        }
    }
    out.sort();
    out
}

/// Pushes `disk` to `to` (`docker://HOST/NAME:TAG`) as a KubeVirt
/// containerDisk, built with umoci: one layer holding `disk/disk.qcow2`
/// (or, with `None`, a layer with no disk). The manifest's digest.
pub fn push_container_disk(disk: Option<&Path>, to: &str) -> String {
    push_container_disk_as(disk, to, None)
}

/// [`push_container_disk`] to a registry that asks for `creds` (`USER:PASSWORD`).
pub fn push_container_disk_as(disk: Option<&Path>, to: &str, creds: Option<&str>) -> String {
    let work = tempfile::tempdir().expect("tempdir");
    let (layout, root) = (work.path().join("layout"), work.path().join("root"));
    match disk {
        Some(d) => {
            std::fs::create_dir_all(root.join("disk")).expect("disk/");
            std::fs::copy(d, root.join("disk/disk.qcow2")).expect("the disk");
        }
        None => {
            std::fs::create_dir_all(root.join("etc")).expect("etc/");
            // 512 bytes: Debian's umoci 0.4.7 writes no tar trailer, nor the
            // padding of a last file shorter than a block.
            std::fs::write(root.join("etc/hostname"), format!("{:<511}\n", "no-disk")).expect("etc/hostname");
        }
    }
    let image = format!("{}:1", layout.display());
    let umoci = |args: &[&str]| {
        let out = Command::new("umoci").args(args).output().expect("umoci (Debian's umoci; scripts/test.sh installs it)");
        assert!(out.status.success(), "umoci {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    umoci(&["init", "--layout", &layout.to_string_lossy()]);
    umoci(&["new", "--image", &image]);
    umoci(&["insert", "--image", &image, &root.to_string_lossy(), "/"]);
    let Some(creds) = creds else {
        copy(&format!("oci:{image}"), to);
        return inspect(to, false)["Digest"].as_str().expect("the pushed image's digest").to_owned();
    };
    copy_as(&format!("oci:{image}"), to, creds);
    let out = skopeo(&["inspect", "--tls-verify=false", "--creds", creds, to]);
    let got: serde_json::Value = serde_json::from_str(&out).expect("skopeo inspect's JSON");
    got["Digest"].as_str().expect("the pushed image's digest").to_owned()
}

/// A registry asking for credentials, holding the test guest's disk, and a
/// qemu server allowed to pull from it ([`private_disk`]).
pub struct PrivateDisk {
    /// The registry; it lets in `puller` with the password given.
    pub registry: Registry,
    /// The disk's reference, `docker://127.0.0.1:PORT/disks/guest:1`.
    pub source: String,
    /// The server, with the registry allowed as a plain-HTTP source.
    pub server: crate::Server,
}

/// Starts a registry that lets in `puller` with `password` only, pushes the
/// test guest's BIOS disk to it as a containerDisk, and starts a qemu
/// server allowed to pull from it.
pub async fn private_disk(password: &str) -> PrivateDisk {
    let registry = Registry::start_with_auth("puller", password).await;
    let disk = crate::images_dir().join("test-guest/bios.qcow2");
    let source = format!("docker://{}/disks/guest:1", registry.host);
    push_container_disk_as(Some(&disk), &source, Some(&format!("puller:{password}")));
    let server =
        crate::Server::start_qemu_with(&["--image-source-allow", "127.0.0.1", "--image-registry-plain-http", &registry.host]).await;
    PrivateDisk { registry, source, server }
}
