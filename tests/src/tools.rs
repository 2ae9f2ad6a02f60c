//! The Go tools the tests run, built from their Go modules by
//! `scripts/tools.sh` and cached under `~/.cache/vmaas/tools`: each path
//! comes from the variable the script prints, or its cached place.

use std::path::PathBuf;

/// The versions `scripts/tools.sh` builds.
pub const CROSSPLANE: &str = "v2.2.1";
/// MetalLB's version.
pub const METALLB: &str = "v0.16.1";

fn tool(var: &str, cached: &str) -> PathBuf {
    let p = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/vmaas/tools").join(cached));
    assert!(p.exists(), "{} is missing at {}: run scripts/tools.sh (scripts/test.sh does)", var, p.display());
    p
}

/// The `crossplane` CLI (`cmd/crank`): `render`, `beta validate`, `xpkg`.
pub fn crank() -> PathBuf {
    tool("VMAAS_CRANK", &format!("crossplane-{CROSSPLANE}/crank"))
}

/// Crossplane's core (`cmd/crossplane`): `core init`, `core start`.
pub fn crossplane_core() -> PathBuf {
    tool("VMAAS_CROSSPLANE_CORE", &format!("crossplane-{CROSSPLANE}/crossplane"))
}

/// Crossplane's own CRDs, from its module (`cluster/crds`).
pub fn crossplane_crds() -> PathBuf {
    tool("VMAAS_CROSSPLANE_CRDS", &format!("crossplane-{CROSSPLANE}/crds"))
}

/// `crossplane beta validate`'s cache, seeded with Crossplane's own schemas
/// so that it never downloads them.
pub fn validate_cache() -> PathBuf {
    tool("VMAAS_CROSSPLANE_VALIDATE_CACHE", &format!("crossplane-{CROSSPLANE}/validate-cache"))
}

/// MetalLB's controller.
pub fn metallb_controller() -> PathBuf {
    tool("VMAAS_METALLB_CONTROLLER", &format!("metallb-{METALLB}/controller"))
}

/// MetalLB's CRDs, from its module (`config/crd/bases`).
pub fn metallb_crds() -> PathBuf {
    tool("VMAAS_METALLB_CRDS", &format!("metallb-{METALLB}/crds"))
}

/// Helm (`cmd/helm`), for `helm template` of the chart.
pub fn helm() -> PathBuf {
    tool("VMAAS_HELM", "helm-v3.19.0/helm")
}

/// prometheus-operator's ServiceMonitor CRD (the chart's optional ServiceMonitor).
pub fn monitoring_crds() -> PathBuf {
    tool("VMAAS_MONITORING_CRDS", "prometheus-operator-v0.85.0/crds")
}

/// The documents of a YAML file, as JSON values.
pub fn yaml_documents(path: &std::path::Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    yaml_stream(&text)
}

/// The documents of a YAML stream (empty ones left out).
pub fn yaml_stream(text: &str) -> Vec<serde_json::Value> {
    serde_norway::Deserializer::from_str(text)
        .map(|d| <serde_json::Value as serde::Deserialize>::deserialize(d).expect("a YAML document"))
        .filter(|v| !v.is_null())
        .collect()
}
