//! Guest profiles and instance types on the kubevirt backend, against the
//! real kube-apiserver with strict field validation: a Windows-family VM
//! references a `VirtualMachineClusterPreference` with EFI (Secure Boot,
//! persistent NVRAM), SMM, a persistent TPM, Hyper-V enlightenments and a
//! clock in local time; a VM of an instance type references a
//! `VirtualMachineClusterInstancetype` with its vCPUs, memory and GPUs;
//! and a VM that can be resized live has KubeVirt's `maxSockets` and
//! `maxGuest`.

use serde_json::json;
use vmaas_tests::k8s::KubeApi;
use vmaas_tests::kubevirt::{VMS, env, objects_of, the_vm};
use vmaas_tests::vms::{self, publish};

const WINDOWS: &str = r#"
id: windows-ready
spec_defaults:
  image: test-guest
  memory: 512Mi
  disk_size: 1Gi
  guest_os_family: windows
"#;

const RESIZABLE: &str = r#"
id: resizable
spec_defaults:
  image: test-guest
  cpu_cores: 2
  memory: 512Mi
  disk_size: 1Gi
  max_cpu_cores: 4
  max_memory: 2Gi
"#;

const EFI_LINUX: &str = r#"
id: efi-linux
spec_defaults:
  image: test-guest
  memory: 512Mi
  disk_size: 1Gi
  firmware: efi
  tpm: true
"#;

const PLACED: &str = r#"
id: placed
spec_defaults:
  image: test-guest
  cpu_cores: 2
  memory: 1Gi
  disk_size: 1Gi
  node_selector: {vmaas.io/pool: gpu, topology.kubernetes.io/zone: zone-a}
  tolerations:
    - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
    - {key: dedicated, operator: Equal, value: vms, effect: NoExecute, toleration_seconds: 300}
  affinity:
    podAntiAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 100
          podAffinityTerm:
            topologyKey: kubernetes.io/hostname
            labelSelector: {matchLabels: {app: db}}
  dedicated_cpus: true
  hugepages: 2Mi
  gpus: [{name: gpu0, device_name: nvidia.com/A10}]
  labels: {vm.kubevirt.io/template: placed, app: from-template}
  instance_labels: {kubevirt.io/size: large}
  instance_annotations: {vm.kubevirt.io/os: rhel9}
"#;

/// Where a VM may run, pinned CPUs, huge pages, host devices, the
/// template's labels and annotations, and the VM's own boot disk and
/// additional disk (OSAC's) reach the KubeVirt VM as KubeVirt writes them,
/// accepted Strict; the tenant's labels and annotations travel
/// under the tenant's domain, and vmaas's own stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn where_a_vm_may_run_reaches_kubevirt() {
    let (k, _kubevirt, s) = env().await;
    publish(&s, PLACED);
    let t = s.token("acme", false);
    let body = json!({"object": {"metadata": {"name": "placed",
        "labels": {"app": "shop", "example.com/team": "payments", "vmaas.io/vm": "forged"},
        "annotations": {"note": "hello"}}, "spec": {"template": "placed",
        "boot_disk": {"size_gib": 20, "storage_tier": "fast"}, "additional_disks": [{"size_gib": 3, "storage_tier": "archive"}]}}});
    let (st, b) = s.raw(reqwest::Method::POST, "/api/fulfillment/v1/virtual_machines", Some(&t), Some(body)).await;
    assert_eq!(st, 201, "{b}");
    let id = b["object"]["id"].as_str().unwrap().to_owned();
    vms::wait_ready(&s, &t, &id).await;
    let vm = the_vm(&k, &id).await;
    let labels = &vm["metadata"]["labels"];
    assert_eq!(labels["tenant.vmaas.io/app"], "shop", "{vm:#}");
    assert_eq!(labels["example.com.tenant.vmaas.io/team"], "payments");
    assert_eq!(labels["vmaas.io.tenant.vmaas.io/vm"], "forged", "a tenant never writes vmaas's keys");
    assert_eq!(labels["vmaas.io/vm"], "placed", "vmaas's own stay");
    assert_eq!(labels["vm.kubevirt.io/template"], "placed");
    assert_eq!(labels["app"], "from-template");
    assert_eq!(vm["metadata"]["annotations"]["tenant.vmaas.io/note"], "hello");
    let inst = &vm["spec"]["template"]["metadata"];
    assert_eq!(inst["labels"]["kubevirt.io/size"], "large", "{inst:#}");
    assert_eq!(inst["labels"]["kubevirt.io/domain"], "placed");
    assert_eq!(inst["labels"]["tenant.vmaas.io/app"], "shop");
    assert_eq!(inst["annotations"], json!({"vm.kubevirt.io/os": "rhel9"}), "the tenant's annotations stay on the VM");
    let spec = vm["spec"]["template"]["spec"].clone();
    assert_eq!(spec["nodeSelector"], json!({"vmaas.io/pool": "gpu", "topology.kubernetes.io/zone": "zone-a"}), "{spec:#}");
    assert_eq!(
        spec["tolerations"],
        json!([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
               {"key": "dedicated", "operator": "Equal", "value": "vms", "effect": "NoExecute", "tolerationSeconds": 300}])
    );
    let term = &spec["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0];
    assert_eq!(term["weight"], 100, "{spec:#}");
    assert_eq!(term["podAffinityTerm"]["labelSelector"], json!({"matchLabels": {"app": "db"}}));
    let d = &spec["domain"];
    assert_eq!(d["cpu"]["dedicatedCpuPlacement"], true, "{d:#}");
    assert_eq!(d["cpu"]["cores"], 2);
    assert_eq!(d["memory"]["hugepages"], json!({"pageSize": "2Mi"}));
    assert_eq!(d["devices"]["hostDevices"], json!([{"name": "gpu0", "deviceName": "nvidia.com/A10"}]));
    // OSAC's boot disk and additional disks: DataVolumes of their sizes in their tiers' storage classes.
    let storage = |dv: &serde_json::Value| {
        (dv["spec"]["storage"]["resources"]["requests"]["storage"].clone(), dv["spec"]["storage"]["storageClassName"].clone())
    };
    let dvs: Vec<_> = vm["spec"]["dataVolumeTemplates"].as_array().into_iter().flatten().map(storage).collect();
    assert_eq!(dvs, [(json!("20Gi"), json!("fast")), (json!("3Gi"), json!("archive"))], "{vm:#}");
    let disks: Vec<&str> = d["devices"]["disks"].as_array().into_iter().flatten().filter_map(|x| x["name"].as_str()).collect();
    assert!(disks.contains(&"disk1"), "{disks:?}");

    // A bad one is refused by name before anything is made.
    let bad = "id: bad-toleration\nspec_defaults: {image: test-guest, tolerations: [{key: a, operator: Sometimes}]}\n";
    let own = "id: own-label\nspec_defaults: {image: test-guest, labels: {vmaas.io/tenant: other}}\n";
    let admin = s.token("ops", true);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("own.yaml"), own).unwrap();
    let out = s.cli(&admin, &["template", "sync", dir.path().to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("labels.vmaas.io/tenant") && err.contains("vmaas's own"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.yaml"), bad).unwrap();
    let out = s.cli(&s.token("ops", true), &["template", "sync", dir.path().to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("spec_defaults.tolerations[0].operator: unknown variant `Sometimes`"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profiles_render_as_kubevirt_firmware_features_clock_and_tpm() {
    let (k, _kubevirt, s) = env().await;
    publish(&s, &format!("{WINDOWS}---{EFI_LINUX}---{RESIZABLE}"));
    let t = s.token("acme", false);

    let win = vms::create(&s, &t, "win", "windows-ready").await;
    vms::wait_ready(&s, &t, &win).await;
    let vm = the_vm(&k, &win).await;
    assert_eq!(vm["spec"]["preference"], json!({"kind": "VirtualMachineClusterPreference", "name": "vmaas-efi-sb-tpm-windows"}), "{vm:#}");
    let d = &vm["spec"]["template"]["spec"]["domain"];
    assert!(
        d.get("firmware").is_none() && d.get("features").is_none() && d["devices"].get("tpm").is_none(),
        "the preference gives them: {d:#}"
    );
    let p = cluster_object(&k, "virtualmachineclusterpreferences", "vmaas-efi-sb-tpm-windows").await;
    assert_eq!(p["spec"]["firmware"]["preferredEfi"], json!({"secureBoot": true, "persistent": true}), "{p:#}");
    assert_eq!(p["spec"]["features"]["preferredSmm"], json!({"enabled": true}));
    assert_eq!(p["spec"]["features"]["preferredHyperv"]["spinlocks"], json!({"spinlocks": 8191}));
    assert_eq!(p["spec"]["features"]["preferredHyperv"]["synictimer"], json!({"enabled": true}));
    assert_eq!(p["spec"]["devices"]["preferredTPM"], json!({"persistent": true}));
    assert_eq!(p["spec"]["clock"]["preferredClockOffset"], json!({"timezone": "UTC"}));
    assert_eq!(p["spec"]["clock"]["preferredTimer"]["rtc"], json!({"tickPolicy": "catchup"}));

    let efi = vms::create(&s, &t, "efi", "efi-linux").await;
    vms::wait_ready(&s, &t, &efi).await;
    assert_eq!(the_vm(&k, &efi).await["spec"]["preference"]["name"], "vmaas-efi-tpm");
    let p = cluster_object(&k, "virtualmachineclusterpreferences", "vmaas-efi-tpm").await;
    assert_eq!(p["spec"]["firmware"]["preferredEfi"]["secureBoot"], false, "{p:#}");
    assert_eq!(p["spec"]["devices"]["preferredTPM"], json!({"persistent": true}));
    assert!(p["spec"].get("features").is_none() && p["spec"].get("clock").is_none(), "{p:#}");

    // An instance type: a cluster instance type the VM references, its shape not inline.
    let admin = s.token("ops", true);
    let gpu = json!({"pci_device_selector": "10DE:2236", "resource_name": "nvidia.com/A10", "count": 1});
    let ty = json!({"object": {"metadata": {"name": "g1.large"}, "spec": {"cores": 4, "memory_gib": 8, "gpu": gpu}}});
    let (st, b) = s.raw(reqwest::Method::POST, "/api/fulfillment/v1/instance_types", Some(&admin), Some(ty)).await;
    assert_eq!(st, 201, "{b}");
    let body = json!({"object": {"metadata": {"name": "typed"}, "spec": {"template": "efi-linux", "instance_type": "g1.large"}}});
    let (st, b) = s.raw(reqwest::Method::POST, "/api/fulfillment/v1/virtual_machines", Some(&t), Some(body)).await;
    assert_eq!(st, 201, "{b}");
    let typed = b["object"]["id"].as_str().unwrap().to_owned();
    let vm = vms::wait_until(&s, &t, &typed, "applied", 60, |v| v["status"]["state"].as_str().is_some()).await;
    let kv = wait_vm(&k, &typed).await;
    assert_eq!(kv["spec"]["instancetype"], json!({"kind": "VirtualMachineClusterInstancetype", "name": "vmaas-g1.large"}), "{vm:#}");
    let d = &kv["spec"]["template"]["spec"]["domain"];
    assert!(
        d.get("cpu").is_none() && d.get("memory").is_none() && d["devices"].get("gpus").is_none(),
        "the instance type gives them: {d:#}"
    );
    assert_eq!(kv["metadata"]["annotations"]["vmaas.io/vcpus"], "4");
    assert_eq!(kv["metadata"]["annotations"]["vmaas.io/gpus"], "nvidia.com/A10=1", "the GPUs its domain does not carry, for the room");
    let it = cluster_object(&k, "virtualmachineclusterinstancetypes", "vmaas-g1.large").await;
    assert_eq!(it["spec"]["cpu"], json!({"guest": 4}), "{it:#}");
    assert_eq!(it["spec"]["memory"], json!({"guest": "8Gi"}));
    assert_eq!(it["spec"]["hostDevices"], json!([{"name": "gpu0", "deviceName": "nvidia.com/A10"}]), "{it:#}");

    // Live resize limits: KubeVirt's LiveUpdate counts vCPUs in sockets.
    let big = vms::create(&s, &t, "big", "resizable").await;
    vms::wait_ready(&s, &t, &big).await;
    let d = the_vm(&k, &big).await["spec"]["template"]["spec"]["domain"].clone();
    assert_eq!(d["cpu"], json!({"cores": 1, "sockets": 2, "maxSockets": 4}), "{d:#}");
    assert_eq!(d["memory"], json!({"guest": "512Mi", "maxGuest": "2Gi"}));
}

/// The cluster-scoped object `name` of KubeVirt's instancetype group (`plural`).
async fn cluster_object(k: &KubeApi, plural: &str, name: &str) -> serde_json::Value {
    let (st, o) = k.request(reqwest::Method::GET, &format!("/apis/instancetype.kubevirt.io/v1beta1/{plural}/{name}"), None, None).await;
    assert_eq!(st, 200, "{plural}/{name}: {o}");
    o
}

/// The KubeVirt VM of vmaas VM `id`, once it is made.
async fn wait_vm(k: &KubeApi, id: &str) -> serde_json::Value {
    for _ in 0..300 {
        if let Some(vm) = objects_of(k, VMS, id).await.into_iter().next() {
            return vm;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("no KubeVirt VM for {id}");
}
