//! function-vmaas as a Crossplane package: `scripts/xpkg.sh` builds its
//! runtime image and the real `crossplane xpkg build
//! --embed-runtime-image-tarball` packs it with `function/package`
//! (crossplane.yaml at `meta.pkg.crossplane.io/v1`, the Input CRD);
//! `crossplane xpkg push` pushes it to a real registry on loopback; and
//! Crossplane's real core installs it from there: it pulls, parses and
//! lints the package, makes the FunctionRevision with the package's
//! capabilities, and calls it healthy and the Function installed once the
//! External runtime (played: a cluster without nodes runs no pod) has set
//! the function's TLS Secret and endpoint. Crossplane installs no CRD of a
//! function package (the xpkg specification); the Input CRD is checked
//! against every Composition's input, applied Strict.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use vmaas_tests::crossplane_core::{Core, get};
use vmaas_tests::k8s::Cluster;
use vmaas_tests::registry::{Registry, inspect};
use vmaas_tests::tools::yaml_documents;

const FUNCTIONS: &str = "/apis/pkg.crossplane.io/v1/functions";

fn build_and_push(out: &Path, reference: &str) {
    let bins = vmaas_tests::bin("function-vmaas").parent().expect("bin dir").to_owned();
    let run = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/xpkg.sh"))
        .arg("-o")
        .arg(out)
        .arg("--bin-dir")
        .arg(&bins)
        .args(["--push", reference])
        .output()
        .expect("scripts/xpkg.sh");
    assert!(run.status.success(), "scripts/xpkg.sh: {}", String::from_utf8_lossy(&run.stderr));
}

/// Waits (60 s at most) for `what`; panics with the Function and Crossplane's log tail.
async fn until<T, F: std::future::Future<Output = Option<T>>>(core: &Core, k: &Cluster, what: &str, mut check: impl FnMut() -> F) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if Instant::now() > deadline {
            let log = core.log();
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            let function = get(k, &format!("{FUNCTIONS}/function-vmaas")).await.map(|f| f["status"].clone()).unwrap_or_default();
            let revisions = get(k, "/apis/pkg.crossplane.io/v1/functionrevisions").await.map(|l| l["items"].clone()).unwrap_or_default();
            let crd = get(k, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
                .await
                .map(|l| {
                    l["items"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|c| c["metadata"]["name"].as_str())
                        .filter(|n| n.contains("vmaas"))
                        .map(str::to_owned)
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default();
            panic!(
                "{what}: not within 60 s; the Function's status: {function:#}\nthe revisions: {revisions:#}\nthe CRDs named vmaas: {crd}\nCrossplane's log ends:\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A Secret's `data` of the files `tls.crt`, `tls.key` and `ca.crt` in `dir`.
fn tls_data(dir: &Path) -> Value {
    use base64::Engine as _;
    let mut data = serde_json::Map::new();
    for key in ["tls.crt", "tls.key", "ca.crt"] {
        let bytes = std::fs::read(dir.join(key)).unwrap_or_else(|e| panic!("{key}: {e}"));
        data.insert(key.into(), json!(base64::engine::general_purpose::STANDARD.encode(bytes)));
    }
    Value::Object(data)
}

fn condition<'a>(o: &'a Value, kind: &str) -> &'a Value {
    o["status"]["conditions"].as_array().and_then(|c| c.iter().find(|c| c["type"] == kind)).unwrap_or(&Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_function_package_is_built_pushed_and_installed_by_crossplane() {
    let version = env!("CARGO_PKG_VERSION");
    let registry = Registry::start().await;
    let reference = format!("{}/vmaas/function-vmaas:v{version}", registry.host);
    let work = tempfile::tempdir().expect("tempdir");
    build_and_push(work.path(), &reference);
    let pushed = inspect(&format!("docker://{reference}"), false);
    assert!(pushed["Layers"].as_array().is_some_and(|l| l.len() >= 2), "the package's layers and the runtime's: {pushed:#}");

    let k = Cluster::start().await;
    let core = Core::start_bare(&k).await;
    let function = json!({"apiVersion": "pkg.crossplane.io/v1", "kind": "Function", "metadata": {"name": "function-vmaas"},
                          "spec": {"package": reference}});
    let (st, body) = k.apply(&function, "functions", "operator").await;
    assert!(st == 200 || st == 201, "{st} {body}");

    // Crossplane pulls the package, parses it and makes its revision.
    let revision = until(&core, &k, "a FunctionRevision of the pulled package", || async {
        let (_, list) = k.request(reqwest::Method::GET, "/apis/pkg.crossplane.io/v1/functionrevisions", None, None).await;
        list["items"].as_array()?.iter().find(|r| r["metadata"]["labels"]["pkg.crossplane.io/package"] == "function-vmaas").cloned()
    })
    .await;
    assert_eq!(revision["spec"]["image"], reference.as_str(), "{revision:#}");
    // The External runtime's part (a cluster with nodes would run the
    // package's image in a pod): the function's TLS server Secret and its
    // endpoint on the revision; here the same binary, on loopback. Written
    // again until Crossplane calls the revision healthy (its own status
    // writes may race the first).
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "function-vmaas-tls-server", "namespace": "crossplane-system"},
        "data": tls_data(&core.function_certs())});
    let (st, body) = k.apply(&secret, "secrets", "external-runtime").await;
    assert!(st == 200 || st == 201, "{st} {body}");
    let path = format!("/apis/pkg.crossplane.io/v1/functionrevisions/{}", revision["metadata"]["name"].as_str().unwrap_or_default());
    let healthy = until(&core, &k, "the revision healthy", || async {
        let status = json!({"tlsServerSecretName": "function-vmaas-tls-server", "endpoint": core.function.addr});
        k.write_status(&revision, "functionrevisions", status).await;
        let r = get(&k, &path).await?;
        (condition(&r, "RevisionHealthy")["status"] == "True").then_some(r)
    })
    .await;
    assert_eq!(healthy["status"]["capabilities"], json!(["composition"]), "the package's capabilities: {healthy:#}");
    let installed = until(&core, &k, "the Function installed", || async {
        let f = get(&k, &format!("{FUNCTIONS}/function-vmaas")).await?;
        (f["status"]["currentRevision"] == healthy["metadata"]["name"] && condition(&f, "Installed")["status"] == "True").then_some(f)
    })
    .await;
    assert_eq!(installed["status"]["resolvedPackage"], reference.as_str(), "{installed:#}");
    // Crossplane installs no object of a function's package (the xpkg
    // specification: a function's CRDs describe its input, for tools).
    assert!(
        get(&k, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/inputs.vmaas.fn.io").await.is_none(),
        "Crossplane installed a function's CRD"
    );

    // The Input CRD describes every Composition's input: installed by hand,
    // each input applies Strict.
    let crd = yaml_documents(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../function/package/input/vmaas.fn.io_inputs.yaml")).remove(0);
    let name = k.install_crd(&crd).await;
    k.wait_established(&name).await;
    k.namespace("inputs").await;
    let compositions = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/compositions");
    let mut checked = 0;
    for e in std::fs::read_dir(&compositions).expect("examples/compositions").flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with("composition-") {
            continue;
        }
        for doc in yaml_documents(&e.path()) {
            for step in doc["spec"]["pipeline"].as_array().into_iter().flatten() {
                let mut input = step["input"].clone();
                if input["apiVersion"] != "vmaas.fn.io/v1alpha1" {
                    continue;
                }
                input["metadata"] = json!({"name": format!("{}-{}", name.trim_end_matches(".yaml"), step["step"].as_str().unwrap_or("step")), "namespace": "inputs"});
                let (st, body) = k.apply(&input, "inputs", "check").await;
                assert!(st == 200 || st == 201, "{name}'s input is refused by the Input CRD: {st} {body}");
                checked += 1;
            }
        }
    }
    assert!(checked >= 4, "only {checked} inputs checked");
}
