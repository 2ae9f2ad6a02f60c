//! What Crossplane generates for an XRD and what its claim controller
//! writes, taken from the shared harness's port of Crossplane
//! (`../shared/k8s/xcrd.py`, crossplane-runtime's `pkg/xcrd` and the claim
//! controller), run as it is: the XR's CRD and the claim's CRD, the XR the
//! claim controller applies for a claim, and the claim's status copied
//! from its XR. A LegacyCluster XR (the scope with claims) keeps
//! Crossplane's machinery directly under `spec` (`compositionRef`,
//! `resourceRefs`, `claimRef`, …); Namespaced and Cluster XRs (v2) keep it
//! under `spec.crossplane`.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::k8s::k8s_dir;

/// Calls `xcrd.<function>(*args)` and returns what it returns.
fn call(function: &str, args: &[&Value]) -> Value {
    let script = "import json, sys\nsys.path.insert(0, sys.argv[1])\nimport xcrd\n\
                  args = json.load(sys.stdin)\nprint(json.dumps(getattr(xcrd, sys.argv[2])(*args)))\n";
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(k8s_dir())
        .arg(function)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs xcrd.py");
    let input = serde_json::to_vec(&json!(args)).unwrap();
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "xcrd.{function}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("xcrd.{function} printed no JSON: {e}"))
}

/// The CRD Crossplane generates for the XRs of `xrd` (as the API server
/// stored it, defaults applied).
pub fn xr_crd(xrd: &Value) -> Value {
    call("for_composite_resource", &[xrd])
}

/// The CRD Crossplane generates for the claims of `xrd` (which has `claimNames`).
pub fn claim_crd(xrd: &Value) -> Value {
    call("for_composite_resource_claim", &[xrd])
}

/// The XR named `name` that the claim controller applies for `claim`
/// (kind `X<claim kind>`): the claim's labels and annotations less the
/// reserved ones plus the claim labels, its spec less the claim-only
/// fields, and `spec.claimRef`.
pub fn xr_for_claim(claim: &Value, name: &str) -> Value {
    let kind = json!(format!("X{}", claim["kind"].as_str().unwrap_or_default()));
    call("xr_for_claim", &[claim, &kind, &json!(name)])
}

/// The claim's status once the claim controller copied its XR's: the XR's
/// own fields, the claim's conditions and connection time kept.
pub fn claim_status(claim: &Value, xr: &Value) -> Value {
    call("claim_status", &[claim, xr])
}

/// Whether an XR of this CRD keeps Crossplane's machinery directly under
/// `spec` (a LegacyCluster XR) rather than under `spec.crossplane`.
pub fn legacy(crd: &Value) -> bool {
    let versions = crd["spec"]["versions"].as_array().cloned().unwrap_or_default();
    versions.iter().any(|v| v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"].get("resourceRefs").is_some())
}
