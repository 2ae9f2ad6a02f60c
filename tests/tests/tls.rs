//! TLS on the real `vmaas-server`: a self-signed certificate for
//! development (its fingerprint logged), HTTP/2 by ALPN, clients that do
//! not trust the certificate refused with a clear error and nothing done,
//! plain HTTP refused off loopback, certificates reloaded when their files
//! change; and, with real guests, Terraform (`ca_file`, both versions) and
//! the serial console over `wss://`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use reqwest::Method;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use serde_json::json;
use sha2::{Digest, Sha256};
use vmaas_tests::tf::{Tf, Workspace, python, repo};
use vmaas_tests::vms::{TINY, V1, publish};
use vmaas_tests::{Db, Server, bin};

/// A client trusting exactly the certificate in `pem` (and the platform's roots).
fn trusting(pem: &[u8]) -> reqwest::Client {
    let cert = reqwest::Certificate::from_pem(pem).unwrap();
    reqwest::Client::builder().tls_certs_merge([cert]).build().unwrap()
}

/// The error chain of a failed request, as one string.
fn chain(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}

/// SHA-256 of the first certificate of a PEM file, `AB:CD:…`.
fn fingerprint(pem: &[u8]) -> String {
    let der = CertificateDer::from_pem_slice(pem).unwrap();
    Sha256::digest(der).iter().map(|b| format!("{b:02X}")).collect::<Vec<_>>().join(":")
}

/// A self-signed certificate and key for `localhost` written to `dir`.
fn make_cert(dir: &Path, cn: &str) -> (PathBuf, PathBuf) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    params.distinguished_name.push(rcgen::DnType::CommonName, cn);
    let cert = params.self_signed(&key).unwrap();
    std::fs::create_dir_all(dir).unwrap();
    let (c, k) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&c, cert.pem()).unwrap();
    std::fs::write(&k, key.serialize_pem()).unwrap();
    (c, k)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_self_signed_server_speaks_http2_and_untrusting_clients_change_nothing() {
    let s = Server::start_with(Db::Sqlite, &["--backend", "none", "--tls-self-signed"]).await.unwrap();
    assert!(s.endpoint.starts_with("https://127.0.0.1:"), "{}", s.endpoint);
    let pem = std::fs::read(s.ca_file().unwrap()).unwrap();
    assert!(s.log().contains(&format!("fingerprint={}", fingerprint(&pem))), "the fingerprint is logged:\n{}", s.log());
    let admin = s.token("ops", true);
    let t = s.token("acme", false);
    publish(&s, TINY);

    // A client that trusts the certificate speaks HTTP/2 (ALPN) and HTTP/1.1.
    let rsp = trusting(&pem).get(format!("{}{V1}/virtual_machines", s.endpoint)).bearer_auth(&t).send().await.unwrap();
    assert_eq!((rsp.status().as_u16(), rsp.version()), (200, reqwest::Version::HTTP_2));
    let h1 = reqwest::Client::builder().http1_only().tls_certs_merge([reqwest::Certificate::from_pem(&pem).unwrap()]).build().unwrap();
    let rsp = h1.get(format!("{}{V1}/virtual_machines", s.endpoint)).bearer_auth(&t).send().await.unwrap();
    assert_eq!((rsp.status().as_u16(), rsp.version()), (200, reqwest::Version::HTTP_11));

    // One that does not is refused at the handshake: the create never happens.
    let body = json!({"object": {"metadata": {"name": "nope"}, "spec": {"template": "tiny"}}});
    let e =
        reqwest::Client::new().post(format!("{}{V1}/virtual_machines", s.endpoint)).bearer_auth(&t).json(&body).send().await.unwrap_err();
    assert!(chain(&e).contains("UnknownIssuer") || chain(&e).contains("certificate"), "{}", chain(&e));
    // Plain HTTP on the TLS port gets no API answer either.
    let plain = s.endpoint.replacen("https://", "http://", 1);
    let r = reqwest::Client::new().post(format!("{plain}{V1}/virtual_machines")).bearer_auth(&t).json(&body).send().await;
    assert!(r.is_err() || r.unwrap().status() == 400, "plain HTTP on the TLS port");
    let (st, list) = s.raw(Method::GET, &format!("{V1}/virtual_machines"), Some(&admin), None).await;
    assert_eq!((st, &list["total"]), (200, &json!(0)), "nothing was made: {list}");

    // The CLI: trusting the certificate (VMAAS_CA_FILE), not trusting it, --insecure.
    let made = s.cli_json(&t, &["vm", "create", "web", "-t", "tiny"]);
    assert_eq!(made["metadata"]["name"], "web", "{made}");
    let bare = |args: &[&str]| {
        Command::new(bin("vmaas"))
            .args(args)
            .env("VMAAS_ENDPOINT", &s.endpoint)
            .env("VMAAS_TOKEN", &t)
            .env("VMAAS_CONFIG", s.data_dir.join("none.yaml"))
            .env_remove("VMAAS_CA_FILE")
            .output()
            .unwrap()
    };
    let out = bare(&["vm", "list"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("certificate"), "an untrusted certificate is named: {err}");
    let out = bare(&["vm", "list", "--insecure", "-o", "json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"web\""));
    let out = bare(&["vm", "list", "--ca-file", "/nonexistent.pem"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent.pem"), "{}", String::from_utf8_lossy(&out.stderr));

    // `vmaas login` keeps the CA file; later commands need no flag.
    let ca = s.ca_file().unwrap();
    let cfg = s.data_dir.join("login.yaml");
    let login = Command::new(bin("vmaas"))
        .args(["login", "--server", &s.endpoint, "--ca-file", ca.to_str().unwrap(), "--token", &t])
        .env("VMAAS_CONFIG", &cfg)
        .env_remove("VMAAS_CA_FILE")
        .env_remove("VMAAS_ENDPOINT")
        .output()
        .unwrap();
    assert!(login.status.success(), "{}", String::from_utf8_lossy(&login.stderr));
    let out = Command::new(bin("vmaas"))
        .args(["vm", "get", "web", "-o", "json"])
        .env("VMAAS_CONFIG", &cfg)
        .env_remove("VMAAS_CA_FILE")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_speaks_http2_over_tls_to_an_independent_client() {
    let s = Server::start_with(Db::Sqlite, &["--backend", "none", "--tls-self-signed"]).await.unwrap();
    let out = tokio::process::Command::new(python())
        .arg(repo().join("tests/osac/grpc_tls.py"))
        .args(["--grpc", s.endpoint.trim_start_matches("https://")])
        .arg("--ca-file")
        .arg(s.ca_file().unwrap())
        .output()
        .await
        .expect("run grpcio");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}\n{}", s.log());
    for step in ["reflection over TLS lists the services", "health over TLS: SERVING", "does not trust the certificate does not connect"] {
        assert!(stdout.contains(step), "missing {step:?}:\n{stdout}");
    }
}

#[test]
fn plain_http_is_refused_off_loopback_unless_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(bin("vmaas-server"))
        .args(["--backend", "none", "--listen", "0.0.0.0:0", "--data-dir"])
        .arg(dir.path())
        .env("VMAAS_LOG", "warn")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("refusing to serve plain HTTP on 0.0.0.0:0"), "{err}");
    assert!(err.contains("--tls-cert") && err.contains("--insecure-listen"), "{err}");
    // A key without its certificate is a usage error.
    let out = Command::new(bin("vmaas-server")).args(["--backend", "none", "--tls-key", "k.pem"]).output().unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("--tls-cert"));
}

/// Waits until a fresh client trusting `pem` gets a 200 from `s`.
async fn until_served_with(s: &Server, pem: &[u8], token: &str) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let r = trusting(pem).get(format!("{}{V1}/virtual_machines", s.endpoint)).bearer_auth(token).send().await;
        if r.as_ref().is_ok_and(|r| r.status() == 200) {
            return;
        }
        assert!(Instant::now() < deadline, "the new certificate was not taken: {r:?}\n{}", s.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_certificate_is_served_without_a_restart_and_a_broken_one_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = make_cert(&dir.path().join("live"), "first");
    let first = std::fs::read(&cert).unwrap();
    let args = ["--backend", "none", "--tls-cert", cert.to_str().unwrap(), "--tls-key", key.to_str().unwrap()];
    let s = Server::start_with(Db::Sqlite, &args).await.unwrap();
    let t = s.token("acme", false);
    until_served_with(&s, &first, &t).await;

    // Rotation: both files replaced (renamed into place, as cert tools do).
    let (c2, k2) = make_cert(&dir.path().join("next"), "second");
    let second = std::fs::read(&c2).unwrap();
    std::fs::rename(&k2, &key).unwrap();
    std::fs::rename(&c2, &cert).unwrap();
    until_served_with(&s, &second, &t).await;
    let old = trusting(&first).get(format!("{}{V1}/virtual_machines", s.endpoint)).send().await;
    assert!(old.is_err(), "the old certificate is no longer served");
    assert!(
        s.log().contains(&format!("TLS certificate reloaded cert={} fingerprint={}", cert.display(), fingerprint(&second))),
        "{}",
        s.log()
    );

    // A broken key is logged and the certificate in use stays.
    let warned = |s: &Server| s.log().matches("cannot be used; keeping the one in use").count();
    let before = warned(&s);
    std::fs::write(&key, "not a key").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while warned(&s) == before {
        assert!(Instant::now() < deadline, "{}", s.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    until_served_with(&s, &second, &t).await;
}

/// The quickstart with `ca_file` in the provider block, over HTTPS; the
/// VM's console over `wss://`.
async fn terraform_and_console(tf: Tf) {
    let s = Server::start_qemu_with(&["--tls-self-signed"]).await;
    assert!(s.endpoint.starts_with("https://"));
    publish(&s, &std::fs::read_to_string(repo().join("examples/templates/tiny.yaml")).unwrap());
    let t = s.token("ci", false);
    let ca = s.ca_file().unwrap();
    let quickstart = std::fs::read_to_string(repo().join("examples/terraform/quickstart/main.tf")).unwrap();
    assert!(quickstart.contains("provider \"vmaas\" {}"));
    let untrusting = Workspace::new(tf, &s, &t, &quickstart);
    let (code, text) = untrusting.plan_code(&["-refresh=true"]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("certificate"), "the untrusted certificate is named:\n{text}");
    let with_ca =
        quickstart.replace("provider \"vmaas\" {}", &format!("provider \"vmaas\" {{\n  ca_file = {:?}\n}}", ca.display().to_string()));
    let w = Workspace::new(tf, &s, &t, &with_ca);
    w.apply(&[]);
    assert_eq!(w.output("status"), "READY");

    let out = s.cli_with_stdin(&t, &["vm", "console", "quickstart", "--batch", "--idle", "3s"], b"\nuname -s\n");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("Linux"), "{text}\n{}", String::from_utf8_lossy(&out.stderr));

    w.ok(&["destroy", "-auto-approve", "-no-color"]);
    let (_, list) = s.raw(Method::GET, &format!("{V1}/virtual_machines"), Some(&t), None).await;
    assert_eq!(list["total"], json!(0), "{list}");
}

vmaas_tests::on_every_terraform!(terraform_and_console: tofu_and_the_console_over_tls, terraform_1_0_3_and_the_console_over_tls, terraform_1_15_5_and_the_console_over_tls);
