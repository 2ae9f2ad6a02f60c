//! Crossplane's own renderer, `crossplane render` (v2.2.1, built from its Go
//! module by scripts/tools.sh), over every example composition, with the
//! real `function-vmaas` on loopback (the Development runtime: no Docker):
//! - each composition has an XR (`examples/compositions/render/`, or the
//!   platform team's own `xr-*.yaml`) and renders without a fatal result;
//! - the output passes `crossplane beta validate` against the real CRDs
//!   (KubeVirt, CDI, OVN-K, Crossplane's own) and the XRDs, with no
//!   download (its cache is seeded from Crossplane's module);
//! - it applies Strict (`fieldValidation=Strict`) to a real kube-apiserver;
//! - the test's stand-in for Crossplane (`vmaas_tests::crossplane`) composes
//!   the same objects and status for the same XR: where they differ,
//!   Crossplane is right, and the stand-in is what gets fixed.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use vmaas_tests::crossplane::{Crossplane, FunctionProcess, RESOURCE_NAME, compositions_dir};
use vmaas_tests::k8s::Cluster;
use vmaas_tests::tools::{crank, crossplane_crds, validate_cache, yaml_documents, yaml_stream};
use vmaas_tests::xcrd::xr_crd;

/// One composition, an XR it renders, and what the function asks for.
struct Example {
    /// The composition's kind (`virtualmachine`).
    kind: String,
    /// The kind, and the XR's variant when it is not the first
    /// (`virtualmachine-subnets`, from `render/xr-virtualmachine-subnets.yaml`).
    name: String,
    composition: PathBuf,
    xr: PathBuf,
    required: Vec<PathBuf>,
}

fn examples() -> Vec<Example> {
    let dir = compositions_dir();
    let mut out = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        let Some(kind) = name.strip_prefix("composition-").and_then(|n| n.strip_suffix(".yaml")) else { continue };
        let xr = [dir.join(format!("render/xr-{kind}.yaml")), dir.join(format!("xr-{kind}.yaml"))]
            .into_iter()
            .find(|p| p.exists())
            .unwrap_or_else(|| panic!("composition-{kind}.yaml has no XR to render (render/xr-{kind}.yaml)"));
        let composition = dir.join(&name);
        let from_cluster = yaml_documents(&composition)[0]["spec"]["pipeline"][0]["input"]["templatesFromCluster"] == true;
        let templates = from_cluster.then(|| dir.join("templates.yaml"));
        let required = |name: &str| {
            let own = Some(dir.join(format!("render/required-{name}.yaml"))).filter(|p| p.exists());
            own.into_iter().chain(templates.clone()).collect::<Vec<_>>()
        };
        out.push(Example { kind: kind.to_owned(), name: kind.to_owned(), composition: composition.clone(), xr, required: required(kind) });
        // Variants: render/xr-KIND-VARIANT.yaml, with render/required-KIND-VARIANT.yaml.
        for v in std::fs::read_dir(dir.join("render")).unwrap() {
            let file = v.unwrap().file_name().to_string_lossy().into_owned();
            let Some(variant) = file.strip_prefix(&format!("xr-{kind}-")).and_then(|n| n.strip_suffix(".yaml")) else { continue };
            let name = format!("{kind}-{variant}");
            let (xr, required) = (dir.join("render").join(&file), required(&name));
            out.push(Example { kind: kind.to_owned(), name, composition: composition.clone(), xr, required });
        }
    }
    // Networks first, as a team would: the others live in their namespaces.
    let rank = |k: &str| ["physicalnetwork", "virtualprivatesubnet", "virtualmachine", "volume"].iter().position(|x| *x == k);
    out.sort_by_key(|e| (rank(&e.kind).unwrap_or(usize::MAX), e.name.clone()));
    let kinds: std::collections::BTreeSet<&str> = out.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds.len(), 5, "five example compositions");
    for variant in ["virtualprivatesubnet-secondary", "virtualmachine-subnets"] {
        assert!(out.iter().any(|e| e.name == variant), "render/xr-{variant}.yaml is rendered");
    }
    out
}

/// `crossplane render` of `e` against the function at `addr`: the documents.
fn render(e: &Example, addr: &str) -> Vec<Value> {
    let mut c = Command::new(crank());
    c.arg("render")
        .args([&e.xr, &e.composition, &compositions_dir().join("render/functions.yaml")])
        .args(["--include-function-results", "--include-full-xr"])
        .args(["-a", &format!("render.crossplane.io/runtime-development-target={addr}")]);
    // Several files of what it asks for go in one directory.
    let required = tempfile::tempdir().unwrap();
    for (i, r) in e.required.iter().enumerate() {
        std::fs::copy(r, required.path().join(format!("{i}.yaml"))).unwrap();
    }
    if !e.required.is_empty() {
        c.arg("--required-resources").arg(required.path());
    }
    let out = c.output().expect("run crossplane render");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "crossplane render of {}: {}\n{text}", e.name, String::from_utf8_lossy(&out.stderr));
    yaml_stream(&text)
}

/// The CRDs and XRDs the output is validated against.
fn extensions() -> String {
    let shared = vmaas_tests::tf::shared().join("k8s/crds");
    let mut files: Vec<String> = std::fs::read_dir(&shared)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            // Crossplane's own CRDs come from its module, not from here.
            n.ends_with(".json") || n.starts_with("k8s.") || n.starts_with("metallb.")
        })
        .map(|p| p.display().to_string())
        .collect();
    files.push(crossplane_crds().display().to_string());
    for e in std::fs::read_dir(compositions_dir()).unwrap() {
        let p = e.unwrap().path();
        if p.file_name().unwrap().to_string_lossy().starts_with("xrd-") {
            files.push(p.display().to_string());
        }
    }
    files.join(",")
}

/// `crossplane beta validate` of `resources` (written to `file`): every
/// resource of a CRD or XRD validates; only core kinds lack a schema.
fn validate(kind: &str, resources: &[Value], file: &Path) {
    let text: String = resources.iter().map(|r| format!("---\n{}", serde_norway::to_string(r).unwrap())).collect();
    std::fs::write(file, text).unwrap();
    let out = Command::new(crank())
        .args(["beta", "validate", "--cache-dir"])
        .arg(validate_cache())
        .arg(extensions())
        .arg(file)
        .output()
        .expect("run crossplane beta validate");
    let report = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && report.contains(" 0 failure cases"), "{kind}: crossplane beta validate:\n{report}");
    assert!(!report.contains("downloading"), "{kind}: validate went out for schemas:\n{report}");
    for line in report.lines().filter(|l| l.contains("could not find CRD/XRD")) {
        assert!(line.ends_with("/v1, Kind=Namespace") || line.contains("for: /v1, Kind="), "{kind}: {line}");
    }
    let core = resources.iter().filter(|r| !r["apiVersion"].as_str().unwrap_or("").contains('/')).count();
    let total =
        format!("Total {} resources: {core} missing schemas, {} success cases, 0 failure cases", resources.len(), resources.len() - core);
    assert!(report.contains(&total), "{kind}: every resource but core kinds validated ({total}):\n{report}");
}

/// A cluster with what the renders need in it: Crossplane's ClusterUsage
/// CRD (from its module), the XR CRDs Crossplane derives from the XRDs,
/// the template catalog, and team-a's namespace.
async fn cluster() -> Cluster {
    let k = Cluster::start().await;
    let usage = yaml_documents(&crossplane_crds().join("protection.crossplane.io_clusterusages.yaml")).remove(0);
    let name = k.install_crd(&usage).await;
    k.wait_established(&name).await;
    for e in std::fs::read_dir(compositions_dir()).unwrap() {
        let p = e.unwrap().path();
        if p.file_name().unwrap().to_string_lossy().starts_with("xrd-") {
            let name = k.install_crd(&xr_crd(&yaml_documents(&p)[0])).await;
            k.wait_established(&name).await;
        }
    }
    let name = k.install_crd(&yaml_documents(&compositions_dir().join("crd-virtualmachinetemplate.yaml"))[0]).await;
    k.wait_established(&name).await;
    for t in yaml_documents(&compositions_dir().join("templates.yaml")) {
        applied(&k, &t, "virtualmachinetemplates").await;
    }
    k.namespace("team-a").await;
    k
}

async fn applied(k: &Cluster, obj: &Value, plural: &str) -> Value {
    let (st, body) = k.apply(obj, plural, "examples").await;
    assert!(st == 200 || st == 201, "{plural} refused (Strict): {st} {body:#}");
    body
}

/// Applies `obj` (with its status, if any) Strict, its plural found by discovery.
async fn apply_with_status(k: &Cluster, xp: &Crossplane<'_>, obj: &Value) -> Value {
    let plural = xp.discover(obj["apiVersion"].as_str().unwrap(), obj["kind"].as_str().unwrap()).await.plural;
    if let Some(ns) = obj["metadata"]["namespace"].as_str() {
        k.namespace(ns).await;
    }
    let mut spec = obj.clone();
    spec.as_object_mut().unwrap().remove("status");
    let stored = applied(k, &spec, &plural).await;
    match obj.get("status") {
        Some(status) if !status.is_null() => {
            let (st, body) = k.write_status(&stored, &plural, status.clone()).await;
            assert_eq!(st, 200, "the status of {} is refused (Strict): {body:#}", obj["kind"]);
            body
        }
        _ => stored,
    }
}

/// Where `want` (what Crossplane rendered) is not in `got` (what the
/// stand-in composed and the API server stored, with its defaults):
/// `want`'s fields must all be in `got`, equal. Owner references' uid is
/// left out (render leaves it empty; a cluster fills it).
fn differences(want: &Value, got: &Value, path: &str, out: &mut Vec<String>) {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, v) in w {
                if k == "uid" && path.contains("ownerReferences") {
                    continue;
                }
                differences(v, g.get(k).unwrap_or(&Value::Null), &format!("{path}.{k}"), out);
            }
        }
        (Value::Array(w), Value::Array(g)) if w.len() == g.len() => {
            for (i, (a, b)) in w.iter().zip(g).enumerate() {
                differences(a, b, &format!("{path}[{i}]"), out);
            }
        }
        _ if want == got => {}
        _ => out.push(format!("{path}: Crossplane {want}, stand-in {got}")),
    }
}

/// The XR's conditions as (type, status, reason, message).
fn conditions(xr: &Value) -> Vec<(String, String, String, String)> {
    let mut cs: Vec<_> = xr["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["type"] != "Synced")
        .map(|c| {
            let t = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
            (t("type"), t("status"), t("reason"), t("message"))
        })
        .collect();
    cs.sort();
    cs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_example_renders_in_crossplane_validates_applies_strict_and_matches_the_stand_in() {
    let f = FunctionProcess::start(&["--insecure"]);
    let k = cluster().await;
    let tmp = tempfile::tempdir().unwrap();
    for e in examples() {
        let composition = yaml_documents(&e.composition).remove(0);
        let xp = Crossplane::new(&k, &f, composition["spec"]["pipeline"][0]["input"].clone());
        let xr_in = yaml_documents(&e.xr).remove(0);
        let plural = xp.discover(xr_in["apiVersion"].as_str().unwrap(), xr_in["kind"].as_str().unwrap()).await.plural;

        // What the function asks for is in the cluster too, for the stand-in.
        for r in e.required.iter().flat_map(|p| yaml_documents(p)) {
            apply_with_status(&k, &xp, &r).await;
        }

        // Crossplane renders it.
        let docs = render(&e, &f.addr);
        let results: Vec<&Value> = docs.iter().filter(|d| d["kind"] == "Result").collect();
        assert!(results.iter().all(|r| r["severity"] != "SEVERITY_FATAL"), "{}: {results:#?}", e.name);
        let xr = docs.iter().find(|d| d["kind"] == xr_in["kind"]).expect("the XR in the output").clone();
        let composed: Vec<Value> = docs.iter().filter(|d| d["metadata"]["annotations"][RESOURCE_NAME].is_string()).cloned().collect();
        assert!(!composed.is_empty(), "{}: nothing composed:\n{docs:#?}", e.name);

        // Validated against the real CRDs and the XRDs.
        let mut resources = vec![xr.clone()];
        resources.extend(composed.iter().cloned());
        validate(&e.name, &resources, &tmp.path().join(format!("{}.yaml", e.name)));

        // The stand-in, for the same XR, composes the same.
        let stored = applied(&k, &xr_in, &plural).await;
        let o = xp.reconcile(&plural, &stored).await;
        assert!(o.fatal.is_empty(), "{}: {:?}", e.name, o.fatal);
        let keys = |c: &[Value]| {
            let mut k: Vec<String> = c.iter().map(|d| d["metadata"]["annotations"][RESOURCE_NAME].as_str().unwrap().to_owned()).collect();
            k.sort();
            k
        };
        assert_eq!(keys(&composed), o.composed.keys().cloned().collect::<Vec<_>>(), "{}: the composed resources", e.name);
        let mut diff = Vec::new();
        for c in &composed {
            let key = c["metadata"]["annotations"][RESOURCE_NAME].as_str().unwrap();
            differences(c, &o.composed[key], key, &mut diff);
        }
        let mut status = xr["status"].clone();
        status.as_object_mut().map(|s| s.remove("conditions"));
        differences(&status, &o.xr["status"], "XR status", &mut diff);
        assert!(diff.is_empty(), "{}: the stand-in differs from Crossplane:\n{}", e.name, diff.join("\n"));
        assert_eq!(conditions(&xr), conditions(&o.xr), "{}: the XR's conditions", e.name);

        // Crossplane's output applies Strict (its owner references filled
        // in with the XR's uid, as Crossplane does when it applies).
        for mut c in composed {
            if let Some(refs) = c["metadata"]["ownerReferences"].as_array_mut() {
                for r in refs {
                    r["uid"] = json!(stored["metadata"]["uid"]);
                }
            }
            apply_with_status(&k, &xp, &c).await;
        }
        let mut xr_out = xr.clone();
        xr_out["status"].as_object_mut().map(|s| s.remove("conditions"));
        apply_with_status(&k, &xp, &xr_out).await;
    }
}
