//! The Helm chart (`deploy/helm/vmaas`): rendered by the real `helm
//! template` with its default and production values, applied Strict to a
//! real kube-apiserver, and its Deployment run as written (its arguments
//! and environment, paths moved under a temporary directory) against
//! PostgreSQL, as the chart's ServiceAccount, until its probes pass. And
//! its ClusterRole against the kubevirt backend's calls, both ways, from
//! the API server's audit logs of the whole suite.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use vmaas_tests::Killed;
use vmaas_tests::chart::{self, NAMESPACE, USER, apply_strict, render};
use vmaas_tests::k8s::{Cluster, audit_events, free_port};
use vmaas_tests::tools::{monitoring_crds, yaml_documents};

fn the(objects: &[Value], kind: &str) -> Value {
    objects.iter().find(|o| o["kind"] == kind).cloned().unwrap_or_else(|| panic!("no {kind} rendered"))
}

/// What a production chart must hold, whatever the values.
fn check_deployment(d: &Value) {
    assert_eq!(d["spec"]["strategy"]["type"], "Recreate", "replicas run one release at a time");
    let pod = &d["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
    let c = &pod["containers"][0];
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(c["securityContext"]["capabilities"]["drop"][0], "ALL");
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/livez");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    let db = c["env"].as_array().and_then(|e| e.iter().find(|e| e["name"] == "VMAAS_DATABASE_URL")).expect("VMAAS_DATABASE_URL");
    assert!(db["valueFrom"]["secretKeyRef"]["name"].is_string(), "the database URL comes from a Secret: {db}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chart_renders_and_applies_strict_with_default_and_production_values() {
    let k = Cluster::start().await;
    for e in std::fs::read_dir(monitoring_crds()).expect("the ServiceMonitor CRD") {
        let crd = yaml_documents(&e.expect("entry").path()).remove(0);
        let name = k.install_crd(&crd).await;
        k.wait_established(&name).await;
    }
    k.namespace(NAMESPACE).await;
    let default = render(&[]);
    let production = render(&["-f", "values-production.yaml"]);
    for (what, objects) in [("default", &default), ("production", &production)] {
        let kinds: BTreeSet<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
        for kind in ["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Service", "Deployment", "PodDisruptionBudget", "NetworkPolicy"]
        {
            assert!(kinds.contains(kind), "{what} values render no {kind}: {kinds:?}");
        }
        check_deployment(&the(objects, "Deployment"));
        apply_strict(&k, objects).await;
    }
    assert!(!default.iter().any(|o| o["kind"] == "ServiceMonitor"), "a ServiceMonitor only when asked");
    let monitor = the(&production, "ServiceMonitor");
    let service = the(&production, "Service");
    for (key, value) in monitor["spec"]["selector"]["matchLabels"].as_object().expect("a selector") {
        assert_eq!(&service["metadata"]["labels"][key], value, "the ServiceMonitor selects the Service");
    }
    let d = the(&production, "Deployment");
    let args: Vec<&str> =
        d["spec"]["template"]["spec"]["containers"][0]["args"].as_array().expect("args").iter().filter_map(Value::as_str).collect();
    for want in
        ["--tls-cert=/etc/vmaas/tls/tls.crt", "--cluster=east=/etc/vmaas/clusters/east/kubeconfig", "--cluster-label=east:region=eu-2"]
    {
        assert!(args.contains(&want), "production args lack {want}: {args:?}");
    }
    assert!(!args.contains(&"--insecure-listen"), "production serves TLS: {args:?}");
    // Physical networks become one flag each, the VLAN when given.
    let networks = r#"kubevirt.physicalNetworks=[{"class":"lab","bridgeMapping":"physnet-lab","vlan":120},{"class":"dmz","bridgeMapping":"physnet-dmz"}]"#;
    let physical = render(&["--set", "kubevirt.subnetNetworks=secondary", "--set-json", networks]);
    let pd = the(&physical, "Deployment");
    let args: Vec<&str> =
        pd["spec"]["template"]["spec"]["containers"][0]["args"].as_array().expect("args").iter().filter_map(Value::as_str).collect();
    for want in ["--physical-network=lab=physnet-lab/120", "--physical-network=dmz=physnet-dmz"] {
        assert!(args.contains(&want), "args lack {want}: {args:?}");
    }
    assert_eq!(d["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["scheme"], "HTTPS");
    run_as_rendered(&k, &the(&default, "Deployment")).await;
}

/// Runs the Deployment's container as the chart wrote it: its arguments and
/// environment, with the in-pod paths and ports moved to this host, the
/// database a fresh PostgreSQL one, the Kubernetes identity the chart's
/// ServiceAccount. Its probes must pass, as the kubelet would ask them.
async fn run_as_rendered(k: &Cluster, d: &Value) {
    let Some(base) = vmaas_tests::postgres_url() else { return };
    let database = vmaas_tests::fresh_postgres_db(&base).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    std::fs::create_dir_all(root.join("etc/jwt")).expect("dir");
    std::fs::write(root.join("etc/jwt/key"), "0123456789abcdef0123456789abcdef0123456789abcdef").expect("key");
    let (api, metrics) = (free_port(), free_port());
    let moved = |s: &str| {
        s.replace("0.0.0.0:8443", &format!("127.0.0.1:{api}"))
            .replace("0.0.0.0:9090", &format!("127.0.0.1:{metrics}"))
            .replace("/etc/vmaas", &root.join("etc").display().to_string())
            .replace("/var/lib/vmaas", &root.join("data").display().to_string())
    };
    let c = &d["spec"]["template"]["spec"]["containers"][0];
    let mut cmd = Command::new(vmaas_tests::bin("vmaas-server"));
    cmd.env_clear().env("VMAAS_KUBECONFIG", chart::server_kubeconfig(k).await);
    for a in c["args"].as_array().expect("args") {
        cmd.arg(moved(a.as_str().expect("an argument")));
    }
    for e in c["env"].as_array().expect("env") {
        let name = e["name"].as_str().expect("a name");
        let value =
            if e["valueFrom"]["secretKeyRef"].is_object() { database.clone() } else { moved(e["value"].as_str().unwrap_or_default()) };
        cmd.env(name, value);
    }
    let log = root.join("server.log");
    let out = std::fs::File::create(&log).expect("log");
    let _server = Killed(cmd.stdout(out.try_clone().expect("log")).stderr(out).stdin(Stdio::null()).spawn().expect("vmaas-server"));
    let probe = |p: &str| format!("http://127.0.0.1:{api}{}", c[p]["httpGet"]["path"].as_str().expect("a probe path"));
    let deadline = Instant::now() + Duration::from_secs(60);
    for url in [probe("startupProbe"), probe("livenessProbe"), probe("readinessProbe"), format!("http://127.0.0.1:{metrics}/metrics")] {
        loop {
            let status = reqwest::get(&url).await.map(|r| r.status().as_u16()).unwrap_or(0);
            if status == 200 {
                break;
            }
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            assert!(Instant::now() < deadline, "{url} answers {status}, not 200, 60 s after start:\n{text}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    assert_eq!(chart::refusals(k), Vec::<String>::new(), "the server, as the chart runs it, was refused");
}

/// `(group, resource, verb)` rules of the rendered ClusterRole.
fn granted() -> BTreeSet<(String, String, String)> {
    let role = the(&render(&["--show-only", "templates/clusterrole.yaml"]), "ClusterRole");
    let mut out = BTreeSet::new();
    for rule in role["rules"].as_array().expect("rules") {
        let list =
            |k: &str| -> Vec<String> { rule[k].as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_owned).collect() };
        for g in list("apiGroups") {
            for r in list("resources") {
                for v in list("verbs") {
                    out.insert((g.clone(), r.clone(), v));
                }
            }
        }
    }
    out
}

/// `(group, resource[/subresource], verb)` of a request; a server-side
/// apply that made its object (201) is a create as well as a patch (the API
/// server authorizes it as both).
fn used_by(e: &Value) -> Vec<(String, String, String)> {
    let o = &e["objectRef"];
    let Some(resource) = o["resource"].as_str() else { return Vec::new() };
    let resource = match o["subresource"].as_str() {
        Some(sub) => format!("{resource}/{sub}"),
        None => resource.to_owned(),
    };
    let group = o["apiGroup"].as_str().unwrap_or_default().to_owned();
    let verb = e["verb"].as_str().unwrap_or_default().to_owned();
    let mut out = vec![(group.clone(), resource.clone(), verb.clone())];
    if verb == "patch" && e["responseStatus"]["code"] == 201 {
        out.push((group, resource, "create".into()));
    }
    out
}

/// Whether the API server answered `e` while it was starting (its
/// `apiserver.k8s.io/startup` annotation says `early=true`).
fn starting(e: &Value) -> bool {
    e["annotations"]["apiserver.k8s.io/startup"].as_str().is_some_and(|s| s.split(' ').any(|w| w == "early=true"))
}

/// Every request the kubevirt backend made in the suite, as the chart's
/// account, is granted (none refused), and every rule of the ClusterRole
/// was used. `scripts/test.sh` runs the suite with `VMAAS_KEEP_AUDIT_LOGS`
/// and this test last, on those logs (`VMAAS_RBAC_AUDIT_DIR`).
#[test]
fn the_cluster_role_matches_the_backends_calls() {
    let Some(dir) = std::env::var_os("VMAAS_RBAC_AUDIT_DIR") else {
        assert!(
            std::env::var("VMAAS_REQUIRE_RBAC_AUDIT").as_deref() != Ok("1"),
            "VMAAS_REQUIRE_RBAC_AUDIT=1 but VMAAS_RBAC_AUDIT_DIR is not set"
        );
        eprintln!("skipping: VMAAS_RBAC_AUDIT_DIR is not set (scripts/test.sh sets it after the suite)");
        return;
    };
    let (mut used, mut refused, mut logs, mut early) = (BTreeSet::new(), Vec::new(), 0, 0);
    for entry in std::fs::read_dir(Path::new(&dir)).expect("the audit logs' directory") {
        let text = std::fs::read_to_string(entry.expect("entry").path()).expect("an audit log");
        logs += 1;
        for e in audit_events(&text, USER) {
            if e["responseStatus"]["code"] == 403 {
                // An API server restarted by a test (an outage) answers
                // before its authorizer has loaded the roles, and says so:
                // those refusals are its start, not the role.
                if starting(&e) {
                    early += 1;
                    continue;
                }
                refused.push(chart::describe(&e));
            }
            used.extend(used_by(&e));
        }
    }
    eprintln!("{logs} audit logs; {early} requests refused while an API server was starting (not counted)");
    assert!(logs >= 10, "only {logs} audit logs in {}: did the kubevirt tests run?", Path::new(&dir).display());
    assert_eq!(refused, Vec::<String>::new(), "requests of the chart's account that the API server refused");
    let granted = granted();
    let unused: Vec<_> = granted.difference(&used).collect();
    assert!(unused.is_empty(), "rules of the ClusterRole no request of the suite used: {unused:?}");
    let ungranted: Vec<_> = used.difference(&granted).collect();
    assert!(ungranted.is_empty(), "requests the ClusterRole does not grant (yet none refused?): {ungranted:?}");
}
