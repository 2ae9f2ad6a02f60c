//! Crossplane's real engine (`crossplane core start`, v2.2.1, webhooks off)
//! against a real kube-apiserver, with the examples as a platform team
//! installs them (`vmaas_tests::crossplane_core`):
//! - it turns each example XRD into its CRDs (the XR's and the claim's),
//!   and they agree with the port of its code the other tests use
//!   (`../shared/k8s/xcrd.py`, through `vmaas_tests::xcrd`);
//! - it binds each example claim to an XR of its own;
//! - it calls the real `function-vmaas` over mTLS for them, and the tenant
//!   reads the function's conditions on the claim: `VirtualMachineReady`
//!   with its reason, and a load balancer waiting for hosts that do not
//!   exist, `PENDING`, naming them.

use serde_json::Value;
use vmaas_tests::crossplane::compositions_dir;
use vmaas_tests::crossplane_core::{Core, get};
use vmaas_tests::k8s::Cluster;
use vmaas_tests::tools::yaml_documents;
use vmaas_tests::xcrd::{claim_crd, xr_crd};

const KINDS: [&str; 5] = ["physicalnetwork", "virtualprivatesubnet", "virtualmachine", "volume", "loadbalancer"];

fn example(file: &str) -> Value {
    yaml_documents(&compositions_dir().join(file)).remove(0)
}

async fn applied(k: &Cluster, obj: &Value, plural: &str) -> Value {
    let (st, body) = k.apply(obj, plural, "platform-team").await;
    assert!(st == 200 || st == 201, "{plural} refused: {st} {body:#}");
    body
}

/// The condition `kind` of `obj`'s status.
fn condition<'a>(obj: &'a Value, kind: &str) -> Option<&'a Value> {
    obj["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == kind)
}

/// What of a CRD the XRD decides and the port reproduces: names, scope,
/// versions and their schemas. (The port leaves out Crossplane's printer
/// columns, and `listKind` and `singular`, which the API server defaults.)
fn shape(crd: &Value) -> Value {
    let s = &crd["spec"];
    let versions: Vec<Value> = s["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            serde_json::json!({"name": v["name"], "served": v["served"], "storage": v["storage"], "schema": v["schema"],
            "subresources": v["subresources"]})
        })
        .collect();
    let n = &s["names"];
    let names = serde_json::json!({"kind": n["kind"], "plural": n["plural"], "categories": n["categories"]});
    serde_json::json!({"group": s["group"], "names": names, "scope": s["scope"], "versions": versions})
}

/// The CRD `name` once Crossplane has made it and it is established.
async fn made_crd(core: &Core, k: &Cluster, name: &str) -> Value {
    let path = format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}");
    core.until(k, &format!("Crossplane makes CRD {name}"), 60, || async {
        get(k, &path).await.filter(|c| condition(c, "Established").is_some_and(|e| e["status"] == "True"))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crossplane_core_makes_the_crds_binds_the_claims_and_calls_the_function() {
    let k = Cluster::start().await;
    let core = Core::start(&k).await;

    // The platform team installs the package's XRDs and Compositions.
    for kind in KINDS {
        let xrd = applied(&k, &example(&format!("xrd-{kind}.yaml")), "compositeresourcedefinitions").await;
        applied(&k, &example(&format!("composition-{kind}.yaml")), "compositions").await;
        // Crossplane makes the XR's CRD (and the claim's), as the port does.
        let group = xrd["spec"]["group"].as_str().unwrap();
        let xr = made_crd(&core, &k, &format!("{}.{group}", xrd["spec"]["names"]["plural"].as_str().unwrap())).await;
        assert_eq!(shape(&xr), shape(&xr_crd(&xrd)), "{kind}: Crossplane's XR CRD and the port's differ");
        if let Some(claim) = xrd["spec"]["claimNames"]["plural"].as_str() {
            let made = made_crd(&core, &k, &format!("{claim}.{group}")).await;
            assert_eq!(shape(&made), shape(&claim_crd(&xrd)), "{kind}: Crossplane's claim CRD and the port's differ");
        }
    }
    let template_crd = example("crd-virtualmachinetemplate.yaml");
    let name = k.install_crd(&template_crd).await;
    k.wait_established(&name).await;
    for t in yaml_documents(&compositions_dir().join("templates.yaml")) {
        applied(&k, &t, "virtualmachinetemplates").await;
    }
    k.namespace("team-a").await;

    // Team-a's claims, and the platform team's physical network.
    applied(&k, &example("xr-physicalnetwork.yaml"), "physicalnetworks").await;
    let claims = [
        ("claim-virtualprivatesubnet.yaml", "virtualprivatesubnets", "xvirtualprivatesubnets"),
        ("claim-virtualmachine.yaml", "virtualmachines", "xvirtualmachines"),
        ("claim-volume.yaml", "volumes", "xvolumes"),
        ("claim-loadbalancer.yaml", "loadbalancers", "xloadbalancers"),
    ];
    let mut bound = Vec::new();
    for (file, plural, xr_plural) in claims {
        let claim = applied(&k, &example(file), plural).await;
        let path = Cluster::path_of(&claim, plural);
        // Crossplane binds it: the claim names an XR, which names the claim back.
        let (xr_name, xr) = core
            .until(&k, &format!("Crossplane binds {file}"), 60, || async {
                let name = get(&k, &path).await?["spec"]["resourceRef"]["name"].as_str()?.to_owned();
                let xr = get(&k, &format!("/apis/vmaas.io/v1alpha1/{xr_plural}/{name}")).await?;
                Some((name, xr))
            })
            .await;
        let back = &xr["spec"]["claimRef"];
        assert!(back["name"] == claim["metadata"]["name"] && back["namespace"] == "team-a", "{file}: {xr:#}");
        assert_eq!(xr["metadata"]["labels"]["crossplane.io/claim-namespace"], "team-a");
        bound.push((file, path, xr_plural, xr_name));
    }

    // The VM: Crossplane ran the function (the KubeVirt VM is composed), and
    // the tenant reads the function's condition, with its reason, on the claim.
    let (_, vm_path, _, vm_xr) = &bound[1];
    // (First `Creating`; once Crossplane observes the composed KubeVirt VM,
    // which nothing runs here, `Provisioning`.)
    let xr_path = format!("/apis/vmaas.io/v1alpha1/xvirtualmachines/{vm_xr}");
    let vm = core
        .until_showing(&k, "the claim shows VirtualMachineReady, Provisioning", 90, &[vm_path, &xr_path], || async {
            get(&k, vm_path).await.filter(|c| condition(c, "VirtualMachineReady").is_some_and(|c| c["reason"] == "Provisioning"))
        })
        .await;
    let c = condition(&vm, "VirtualMachineReady").unwrap();
    assert!(c["status"] == "False" && c["message"] == "the KubeVirt VM has no status yet", "{c:#}");
    assert_eq!(condition(&vm, "Ready").unwrap()["reason"], "Waiting", "{vm:#}");
    let xr = get(&k, &xr_path).await.unwrap();
    let ns = xr["status"]["namespace"].as_str().expect("the VM's namespace on its XR");
    assert!(get(&k, &format!("/apis/kubevirt.io/v1/namespaces/{ns}/virtualmachines/myvm")).await.is_some(), "the KubeVirt VM");

    // The load balancer names hosts that do not exist: PENDING, naming them.
    let (_, lb_path, _, _) = &bound[3];
    let lb = core
        .until(&k, "the load balancer's claim says it waits for its hosts", 90, || async {
            get(&k, lb_path).await.filter(|c| condition(c, "LoadBalancerReady").is_some() && c["status"]["state"].is_string())
        })
        .await;
    let c = condition(&lb, "LoadBalancerReady").unwrap();
    let message = c["message"].as_str().unwrap_or_default();
    assert!(c["status"] == "False" && c["reason"] == "WaitingForHosts" && message.contains("web-1, web-2"), "{c:#}");
    assert_eq!(lb["status"]["state"], "PENDING", "{lb:#}");
    assert!(lb["status"]["message"].as_str().unwrap_or_default().contains("web-1, web-2"), "{lb:#}");
}
