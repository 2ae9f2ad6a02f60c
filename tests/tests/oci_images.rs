//! The images of `vmaas-server` and `function-vmaas`, built by
//! `scripts/image.sh` with umoci (no container engine), pushed to a real
//! registry on loopback and pulled back with skopeo; the pulled image is
//! unpacked and its entrypoint run as its own non-root user, with nothing
//! but what the image holds (chroot).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use vmaas_tests::Killed;
use vmaas_tests::k8s::free_port;
use vmaas_tests::registry::{Registry, copy, files_under, inspect};

/// One line of scripts/image.sh: `(name, version, digest, same|changed|new)`.
fn build(layout: &Path) -> Vec<(String, String, String, String)> {
    let bins = vmaas_tests::bin("vmaas-server").parent().expect("bin dir").to_owned();
    let out = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/image.sh"))
        .arg("-o")
        .arg(layout)
        .arg("--bin-dir")
        .arg(&bins)
        .args(["vmaas-server", "function-vmaas"])
        .output()
        .expect("scripts/image.sh");
    assert!(out.status.success(), "scripts/image.sh: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<_> = text
        .lines()
        .map(|l| {
            let f: Vec<_> = l.split(' ').map(str::to_owned).collect();
            assert_eq!(f.len(), 4, "a line of scripts/image.sh: {l}");
            (f[0].clone(), f[1].clone(), f[2].clone(), f[3].clone())
        })
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    lines
}

/// `cmd` run inside `rootfs` as 65532:65532.
fn in_image(rootfs: &Path, program: &str) -> Command {
    let mut cmd = Command::new("/usr/sbin/chroot");
    cmd.arg("--userspec=65532:65532").arg(rootfs).arg(program).env_clear().env("PATH", "/usr/local/bin");
    cmd
}

async fn answers(url: &str) -> u16 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match reqwest::get(url).await {
            Ok(r) => return r.status().as_u16(),
            Err(e) => assert!(Instant::now() < deadline, "{url}: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The pulled image's rootfs holds the program, the libraries it links,
/// passwd and group, and (the server) the CA bundle: nothing else.
fn only_what_it_needs(rootfs: &Path, name: &str) {
    for f in files_under(rootfs) {
        let allowed = f == format!("usr/local/bin/{name}")
            || f == "etc/passwd"
            || f == "etc/group"
            || (name == "vmaas-server" && f == "etc/ssl/certs/ca-certificates.crt")
            || ((f.starts_with("lib") || f.starts_with("usr/lib")) && f.contains(".so"));
        assert!(allowed, "{name}'s image holds {f}, which it does not need");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_images_are_built_pushed_pulled_and_run_as_non_root() {
    let work = tempfile::tempdir().expect("tempdir");
    let layout = work.path().join("oci");
    let first = build(&layout);
    let again = build(&layout);
    for ((name, version, digest, state), (_, _, digest2, state2)) in first.iter().zip(&again) {
        assert_eq!(state, "new", "{name}: the first build of a fresh layout");
        assert_eq!((digest2, state2.as_str()), (digest, "same"), "{name}: rebuilt from the same binaries, the same digest");
        assert!(digest.starts_with("sha256:") && !version.is_empty());
    }

    let registry = Registry::start().await;
    for (name, version, digest, _) in &first {
        let local = format!("oci:{}:{name}-{version}", layout.display());
        let remote = format!("docker://{}/vmaas/{name}:{version}", registry.host);
        copy(&local, &remote);
        let pushed = inspect(&remote, false);
        assert_eq!(pushed["Digest"], digest.as_str(), "{name}: the registry's digest is the built one: {pushed:#}\n{}", registry.log());
        let config = inspect(&remote, true);
        assert_eq!(config["config"]["User"], "65532:65532", "{name} runs as non-root: {config:#}");
        assert_eq!(config["config"]["Entrypoint"][0], format!("/usr/local/bin/{name}"));
        let labels = &config["config"]["Labels"];
        for key in ["title", "description", "version", "revision", "created", "licenses"] {
            assert!(labels[format!("org.opencontainers.image.{key}")].is_string(), "{name} lacks label {key}: {labels:#}");
        }
        assert_eq!(labels["org.opencontainers.image.version"], version.as_str());

        // Pulled back into a layout of its own, unpacked, and run.
        let pulled = work.path().join(format!("pulled-{name}"));
        copy(&remote, &format!("oci:{}:{name}", pulled.display()));
        let bundle = work.path().join(format!("bundle-{name}"));
        let ok = Command::new("umoci")
            .args(["unpack", "--image"])
            .arg(format!("{}:{name}", pulled.display()))
            .arg(&bundle)
            .status()
            .expect("umoci");
        assert!(ok.success(), "umoci unpack of the pulled {name}");
        let rootfs = bundle.join("rootfs");
        only_what_it_needs(&rootfs, name);
        let v = in_image(&rootfs, &format!("/usr/local/bin/{name}")).arg("--version").output().expect("chroot");
        assert!(v.status.success(), "{name} --version inside its image: {}", String::from_utf8_lossy(&v.stderr));
        assert!(String::from_utf8_lossy(&v.stdout).contains(version.as_str()), "{}", String::from_utf8_lossy(&v.stdout));
    }

    // The server, from its pulled image, as its user: it serves and is ready.
    let rootfs = work.path().join("bundle-vmaas-server/rootfs");
    let port = free_port();
    let _server = Killed(
        in_image(&rootfs, "/usr/local/bin/vmaas-server")
            .args(["--backend", "none", "--data-dir", "/tmp/vmaas", "--listen", &format!("127.0.0.1:{port}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chroot"),
    );
    assert_eq!(answers(&format!("http://127.0.0.1:{port}/livez")).await, 200);
    assert_eq!(answers(&format!("http://127.0.0.1:{port}/readyz")).await, 200);
    // The function, from its pulled image: it serves its metrics.
    let rootfs = work.path().join("bundle-function-vmaas/rootfs");
    let (grpc, metrics) = (free_port(), free_port());
    let _function = Killed(
        in_image(&rootfs, "/usr/local/bin/function-vmaas")
            .args(["--insecure", "--address", &format!("127.0.0.1:{grpc}"), "--metrics-address", &format!("127.0.0.1:{metrics}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chroot"),
    );
    assert_eq!(answers(&format!("http://127.0.0.1:{metrics}/metrics")).await, 200);
}
