//! function-vmaas called by an independent client: the RunFunction stubs of
//! the PyPI package crossplane-function-sdk-python, over gRPC, insecure and
//! with mTLS.

use std::path::{Path, PathBuf};
use std::process::Command;

use vmaas_tests::crossplane::FunctionProcess;
use vmaas_tests::xcrd::xr_for_claim;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn python() -> PathBuf {
    let p = std::env::var_os("VMAAS_TF115_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/vmaas/tf-venv/bin/python"));
    assert!(p.exists(), "the Python test clients are missing at {}: run scripts/terraform.sh", p.display());
    p
}

/// Converts the YAML examples into the JSON files the client reads: the
/// claims as the XRs Crossplane makes for them.
fn case_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (yaml, json, claim) in [
        ("claim-virtualmachine.yaml", "xr.json", true),
        ("observed-virtualmachine.yaml", "observed.json", false),
        ("input.yaml", "input.json", false),
        ("claim-virtualprivatesubnet.yaml", "network.json", true),
        ("xr-physicalnetwork.yaml", "physical.json", false),
        ("claim-loadbalancer.yaml", "loadbalancer.json", true),
    ] {
        let text = std::fs::read_to_string(repo().join("examples/compositions").join(yaml)).unwrap();
        let mut v: serde_json::Value = yaml_to_json(&text);
        if claim {
            v = xr_for_claim(&v, &format!("{}-x7k2p", v["metadata"]["name"].as_str().unwrap()));
        }
        std::fs::write(dir.path().join(json), serde_json::to_vec(&v).unwrap()).unwrap();
    }
    dir
}

fn yaml_to_json(text: &str) -> serde_json::Value {
    serde_norway::from_str(text).unwrap()
}

fn client(addr: &str, case: &Path, tls: Option<&Path>) -> String {
    let mut c = Command::new(python());
    c.arg(repo().join("tests/function_e2e.py")).arg(addr).arg(case);
    if let Some(t) = tls {
        c.arg(t);
    }
    let out = c.output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the Python client failed:\n{text}");
    text
}

#[test]
fn python_client_insecure() {
    let case = case_dir();
    let f = FunctionProcess::start(&["--insecure"]);
    let addr = f.addr.clone();
    assert!(client(&addr, case.path(), None).contains("ok"));
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl").args(args).current_dir(dir).output().expect("openssl");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn python_client_mtls() {
    let case = case_dir();
    let tls = tempfile::tempdir().unwrap();
    let d = tls.path();
    openssl(
        d,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "1",
            "-subj",
            "/CN=test-ca",
        ],
    );
    std::fs::write(d.join("san.ext"), "subjectAltName=DNS:localhost,IP:127.0.0.1\n").unwrap();
    for who in ["tls", "client"] {
        openssl(
            d,
            &[
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                &format!("{who}.key"),
                "-out",
                &format!("{who}.csr"),
                "-subj",
                &format!("/CN={who}"),
            ],
        );
        openssl(
            d,
            &[
                "x509",
                "-req",
                "-in",
                &format!("{who}.csr"),
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &format!("{who}.crt"),
                "-days",
                "1",
                "-extfile",
                "san.ext",
            ],
        );
    }
    let f = FunctionProcess::start(&["--tls-certs-dir", d.to_str().unwrap()]);
    let addr = f.addr.clone();
    assert!(client(&addr, case.path(), Some(d)).contains("ok"));
    // Without a client certificate the function refuses the call.
    let mut c = Command::new(python());
    c.arg(repo().join("tests/function_e2e.py")).arg(&addr).arg(case.path());
    let out = c.output().unwrap();
    assert!(!out.status.success(), "a plaintext client must be refused");
}
