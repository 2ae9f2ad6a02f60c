//! What the model renders for Kubernetes, against a real kube-apiserver with
//! the real CRDs (`vmaas_tests::k8s`): accepted with strict field
//! validation by server-side apply, and read back through KubeVirt's and
//! the Service's status the way the model observes it. The whole package,
//! composed through the function, is tested in `composition.rs`.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use vmaas_model::k8s::observe::observe_vm;
use vmaas_model::k8s::render::{FloatingIp, PodNetwork, VmOptions, render_vm};
use vmaas_model::{MachineSpec, Phase, PowerState, Template, VirtualMachineTemplate};
use vmaas_tests::k8s::Cluster;
use vmaas_tests::vms::TINY;

fn tiny_machine() -> MachineSpec {
    let wire: VirtualMachineTemplate = serde_norway::from_str(TINY).unwrap();
    Template::compile(wire).unwrap().resolve(&BTreeMap::new(), "spec.templateParameters").unwrap().spec
}

fn options(power: PowerState) -> VmOptions {
    VmOptions {
        name: "web".into(),
        namespace: "team-a".into(),
        power,
        network: PodNetwork::Masquerade,
        address: None,
        attachments: vec![],
        pod_mac: None,
        data_source_namespace: "os-images".into(),
        storage_class: None,
        floating_ip: FloatingIp::default(),
        shapes: Default::default(),
        claims: Default::default(),
        arrived: Default::default(),
        tenant_labels: Default::default(),
        tenant_annotations: Default::default(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rendered_vm_is_accepted_and_observed_through_its_status() {
    let k = Cluster::start().await;
    k.namespace("team-a").await;
    let rendered = render_vm(&tiny_machine(), &options(PowerState::Started));
    let vm = serde_json::to_value(&rendered.vm).unwrap();
    let (st, applied) = k.apply(&vm, "virtualmachines", "function-vmaas").await;
    assert!(st == 200 || st == 201, "the VM is refused: {st} {applied:#}");
    // The server really validates: a field KubeVirt's schema lacks is refused.
    let mut bad = vm.clone();
    bad["spec"]["template"]["spec"]["domain"]["notAField"] = json!(1);
    let (st, err) = k.apply(&bad, "virtualmachines", "function-vmaas").await;
    assert!(st >= 400 && err.to_string().contains("notAField"), "{st} {err}");

    let svc = serde_json::to_value(rendered.service.as_ref().expect("tiny exposes port 80")).unwrap();
    let (st, applied_svc) = k.apply(&svc, "services", "function-vmaas").await;
    assert!(st == 200 || st == 201, "the Service is refused: {st} {applied_svc:#}");

    // Before KubeVirt says anything, the VM is not ready.
    let o = observe_vm(Some(&applied), None, Some(&applied_svc), true, "default");
    assert!(!matches!(o.phase, Phase::Ready), "{o:?}");

    // Play KubeVirt and the load balancer: the VM runs and is ready, its VMI has an address, the Service an ingress.
    let (st, vm_now) = k.write_status(&vm, "virtualmachines", json!({"ready": true, "printableStatus": "Running"})).await;
    assert_eq!(st, 200, "{vm_now}");
    let vmi = json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": "web", "namespace": "team-a"},
        "spec": {"domain": {"devices": {}}}
    });
    let (st, body) = k.apply(&vmi, "virtualmachineinstances", "virt-controller").await;
    assert!(st == 200 || st == 201, "{st} {body}");
    let (st, vmi_now) =
        k.write_status(&vmi, "virtualmachineinstances", json!({"interfaces": [{"name": "default", "ipAddress": "10.128.0.7"}]})).await;
    assert_eq!(st, 200, "{vmi_now}");
    let (st, svc_now) = k.write_status(&svc, "services", json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}})).await;
    assert_eq!(st, 200, "{svc_now}");
    let o = observe_vm(Some(&vm_now), Some(&vmi_now), Some(&svc_now), true, "default");
    assert!(matches!(o.phase, Phase::Ready), "{o:?}");
    assert_eq!((o.internal_ip.as_deref(), o.external_ip.as_deref()), (Some("10.128.0.7"), Some("192.0.2.10")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_vm_renders_halted_and_is_accepted() {
    let k = Cluster::start().await;
    k.namespace("team-a").await;
    let rendered = render_vm(&tiny_machine(), &options(PowerState::Stopped));
    let vm: Value = serde_json::to_value(&rendered.vm).unwrap();
    let (st, applied) = k.apply(&vm, "virtualmachines", "function-vmaas").await;
    assert!(st == 200 || st == 201, "{st} {applied:#}");
    assert_eq!(applied["spec"]["runStrategy"], "Halted");
    let (st, vm_now) = k.write_status(&vm, "virtualmachines", json!({"ready": false, "printableStatus": "Stopped"})).await;
    assert_eq!(st, 200, "{vm_now}");
    assert!(matches!(observe_vm(Some(&vm_now), None, None, false, "default").phase, Phase::Stopped));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_template_catalog_installs_and_every_template_compiles() {
    let k = Cluster::start().await;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/compositions");
    let crd: Value = serde_norway::from_str(&std::fs::read_to_string(dir.join("crd-virtualmachinetemplate.yaml")).unwrap()).unwrap();
    let name = k.install_crd(&crd).await;
    k.wait_established(&name).await;
    let text = std::fs::read_to_string(dir.join("templates.yaml")).unwrap();
    let mut ids = Vec::new();
    for doc in serde_norway::Deserializer::from_str(&text) {
        let obj = <Value as serde::Deserialize>::deserialize(doc).unwrap();
        let (st, body) = k.apply(&obj, "virtualmachinetemplates", "platform-team").await;
        assert!(st == 200 || st == 201, "{st} {body:#}");
        // What the function does with each object Crossplane hands it.
        let template = vmaas_function::xr::template_from_object(&body).unwrap();
        ids.push(template.id.clone());
        Template::compile(template).unwrap();
    }
    assert_eq!(ids, ["simple_vm", "web", "secure"]);
}
