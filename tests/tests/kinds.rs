//! Every kind has all its parts, as its descriptor in the model declares
//! them (`vmaas_model::kind::DESCRIPTORS`; docs/architecture.md, "Adding a
//! kind"): its REST collection in the real server's OpenAPI document, its
//! gRPC service in the project's `.proto` files, its CLI noun in the real
//! `vmaas` binary, its section in docs/api.md, and, when a backend runs it,
//! a driver in the qemu backend (`/healthz`'s capabilities). The provider
//! checks its Terraform types in its own tests. A kind that misses a part
//! fails here, naming the kind and the part.

use std::path::{Path, PathBuf};

use reqwest::Method;
use vmaas_model::ObjectKind;
use vmaas_tests::Server;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace").to_path_buf()
}

/// Every `package.Service` the project's `.proto` files declare.
fn proto_services() -> Vec<String> {
    let mut found = Vec::new();
    let mut dirs = vec![root().join("proto")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).expect("proto/").flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            let package = text.lines().find_map(|l| l.trim().strip_prefix("package ")).map(|p| p.trim_end_matches(';').trim().to_owned());
            for l in text.lines().filter_map(|l| l.trim().strip_prefix("service ")) {
                let name = l.split_whitespace().next().unwrap_or_default();
                found.push(format!("{}.{name}", package.clone().unwrap_or_default()));
            }
        }
    }
    found
}

#[tokio::test]
async fn every_kind_has_all_its_parts() {
    let s = Server::start_qemu().await;
    let (_, doc) = s.raw(Method::GET, "/api/openapi.json", None, None).await;
    let (_, health) = s.raw(Method::GET, "/healthz", None, None).await;
    let runs: Vec<String> = health["backend"]["capabilities"]["kinds"]
        .as_array()
        .expect("capabilities")
        .iter()
        .map(|k| k.as_str().unwrap_or("").to_owned())
        .collect();
    let services = proto_services();
    let api_doc = std::fs::read_to_string(root().join("docs/api.md")).expect("docs/api.md");
    let mut missing = Vec::new();
    for kind in ObjectKind::ALL {
        let d = kind.descriptor();
        let collection = format!("/api/fulfillment/v1/{}", d.plural);
        let path = &doc["paths"][&collection];
        if path.get("get").is_none() || path.get("post").is_none() {
            missing.push(format!("{kind}: no list and create at {collection} in the OpenAPI document"));
        }
        if doc["paths"].get(format!("{collection}/{{id}}")).and_then(|p| p.get("get")).is_none() {
            missing.push(format!("{kind}: no get at {collection}/{{id}} in the OpenAPI document"));
        }
        if let Some(service) = d.grpc_service.filter(|svc| !services.iter().any(|x| x == svc)) {
            missing.push(format!("{kind}: gRPC service {service} is in no .proto file"));
        }
        let cli = std::process::Command::new(vmaas_tests::bin("vmaas")).args([d.cli, "--help"]).output().expect("vmaas");
        if !cli.status.success() {
            missing.push(format!("{kind}: the CLI has no `vmaas {}`", d.cli));
        }
        if !api_doc.contains(&format!("/{}", d.plural)) {
            missing.push(format!("{kind}: docs/api.md does not describe /{}", d.plural));
        }
        if d.backend_runs && !runs.iter().any(|k| k == kind.as_str()) {
            missing.push(format!("{kind}: the qemu backend has no driver for it (capabilities: {runs:?})"));
        }
    }
    assert!(missing.is_empty(), "kinds miss parts their descriptors declare:\n{}", missing.join("\n"));
}
