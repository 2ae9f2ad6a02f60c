//! Two kube-apiservers as two clusters behind one server
//! (`--cluster NAME=KUBECONFIG`, `--cluster-label`): VMs placed by a
//! label, by capacity (the nodes' allocatable CPU and memory, less what
//! vmaas's VMs ask), and made to wait when the cluster they name is full;
//! `status.cluster` names where each runs and its KubeVirt VM is there and
//! nowhere else; an image imported on both; a subnet made only where its
//! VMs run; one cluster stopped, its VMs DEGRADED while the other's stay
//! READY, and all READY again when it is back, nothing made twice; one
//! away when the server starts.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::chart::server_kubeconfig;
use vmaas_tests::k8s::{Cluster, KubeApi};
use vmaas_tests::kubevirt::{Controllers, IMAGES, VMS, data_source, node, objects_of};
use vmaas_tests::vms::{self, TINY, V1};
use vmaas_tests::{Db, Server};

/// A cluster with the catalog's image, one node and its controllers played.
async fn cluster(cpu: &str, memory: &str) -> (Cluster, Controllers) {
    let k = Cluster::start().await;
    k.namespace(IMAGES).await;
    data_source(&k, "test-guest").await;
    node(&k, "node-1", cpu, memory, json!({})).await;
    let controllers = Controllers::start(&k).await;
    (k, controllers)
}

/// Creates VM `name` (tiny: 1 core, 256Mi) placed by `placement`: `(status, body)`.
async fn create(s: &Server, t: &str, name: &str, placement: Value) -> (u16, Value) {
    let body = json!({"object": {"metadata": {"name": name}, "spec": {"template": "tiny", "placement": placement}}});
    s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(t), Some(body)).await
}

fn id_of(v: &Value) -> String {
    v["object"]["id"].as_str().unwrap_or_default().to_owned()
}

/// How many KubeVirt VMs of vmaas VM `id` each cluster holds.
async fn held(east: &KubeApi, west: &KubeApi, id: &str) -> (usize, usize) {
    (objects_of(east, VMS, id).await.len(), objects_of(west, VMS, id).await.len())
}

fn degraded(v: &Value) -> bool {
    v["status"]["conditions"]
        .as_array()
        .is_some_and(|c| c.iter().any(|c| c["type"] == "VIRTUAL_MACHINE_CONDITION_TYPE_DEGRADED" && c["status"] == "CONDITION_STATUS_TRUE"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vms_are_placed_among_two_clusters_and_survive_one_going_away() {
    // east: 4 cores, 2 GiB; west: 1 core, 8 GiB (more memory, room for one tiny VM's CPU).
    let (mut east, east_kv) = cluster("4", "2Gi").await;
    let (west, _west_kv) = cluster("1", "8Gi").await;
    let (ek, wk) = (server_kubeconfig(&east).await, server_kubeconfig(&west).await);
    let (ea, wa) = (format!("east={}", ek.display()), format!("west={}", wk.display()));
    let args =
        ["--backend", "kubevirt", "--cluster", &ea, "--cluster", &wa, "--cluster-label", "east:zone=a", "--cluster-label", "west:zone=b"];
    let mut args: Vec<&str> = args.to_vec();
    args.extend(["--default-image", "test-guest"]);
    let s = Server::start_with(Db::Sqlite, &args).await.expect("sqlite");
    vms::publish(&s, TINY);
    let t = s.token("acme", false);
    let (e, w) = (east.api(), west.api());

    // Refused at create, naming the field: no cluster has the label, or the name.
    let (st, body) = create(&s, &t, "nowhere", json!({"labels": {"zone": "c"}})).await;
    assert_eq!(st, 400, "{body}");
    assert!(body.to_string().contains("object.spec.placement") && body.to_string().contains("zone=c"), "{body}");
    assert_eq!(create(&s, &t, "nowhere", json!({"cluster": "north"})).await.0, 400);

    // By label: west.
    let (st, by_label) = create(&s, &t, "by-label", json!({"labels": {"zone": "b"}})).await;
    assert_eq!(st, 201, "{by_label}");
    let by_label = id_of(&by_label);
    let v = vms::wait_ready(&s, &t, &by_label).await;
    assert_eq!(v["status"]["cluster"], "west", "{v:#}");
    assert_eq!(held(&e, &w, &by_label).await, (0, 1));
    assert_eq!(v["spec"]["placement"], json!({"labels": {"zone": "b"}}), "the placement is kept as asked");

    // By capacity: west has the most memory left but no CPU: east.
    let (st, by_room) = create(&s, &t, "by-room", json!({})).await;
    assert_eq!(st, 201, "{by_room}");
    let by_room = id_of(&by_room);
    let v = vms::wait_ready(&s, &t, &by_room).await;
    assert_eq!(v["status"]["cluster"], "east", "{v:#}");
    assert_eq!(held(&e, &w, &by_room).await, (1, 0));

    // From the CLI, by label; `vm get` names the placement and the cluster.
    let out = s.cli(&t, &["vm", "create", "by-cli", "-t", "tiny", "--placement-label", "zone=a", "--wait", "--timeout", "60s"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let shown = String::from_utf8_lossy(&s.cli(&t, &["vm", "get", "by-cli"]).stdout).into_owned();
    assert!(shown.contains("labels {zone=a}") && shown.lines().any(|l| l.starts_with("Cluster") && l.contains("east")), "{shown}");

    // Naming a full cluster: it waits, saying why, and is made nowhere.
    let (st, waits) = create(&s, &t, "waits", json!({"cluster": "west"})).await;
    assert_eq!(st, 201, "{waits}");
    let waits = id_of(&waits);
    let v = vms::wait_until(&s, &t, &waits, "waiting for room on west", 30, |v| v.to_string().contains("InsufficientCapacity")).await;
    assert_eq!(vms::state(&v), "VIRTUAL_MACHINE_STATE_PROGRESSING", "{v:#}");
    assert!(v.to_string().contains("west: 0 of 1000 CPU millicores free"), "{v:#}");
    assert!(v["status"]["cluster"].is_null(), "{v:#}");
    assert_eq!(held(&e, &w, &waits).await, (0, 0));
    // A VM to run is not moved.
    let patch = json!({"object": {"spec": {"placement": {"cluster": "east"}}}});
    let (st, body) = s.raw(Method::PATCH, &format!("{V1}/virtual_machines/{waits}"), Some(&t), Some(patch)).await;
    assert_eq!(st, 400, "{body}");
    assert!(body.to_string().contains("object.spec.placement"), "{body}");
    // Room made on west: it goes there.
    assert!(s.raw(Method::DELETE, &format!("{V1}/virtual_machines/{by_label}"), Some(&t), None).await.0 < 300);
    let v = vms::wait_until(&s, &t, &waits, "READY on west", 60, |v| vms::state(v) == "VIRTUAL_MACHINE_STATE_READY").await;
    assert_eq!(v["status"]["cluster"], "west", "{v:#}");
    assert_eq!(held(&e, &w, &waits).await, (0, 1));

    // An image imported once is made on both clusters.
    let url = "http://127.0.0.1:9/images/alpine.qcow2";
    let body = json!({"object": {"metadata": {"name": "alpine"}, "spec": {"source": url}}});
    let (st, img) = s.raw(Method::POST, &format!("{V1}/images"), Some(&t), Some(body)).await;
    assert_eq!(st, 201, "{img}");
    let img = id_of(&img);
    vms::wait_state(&s, &t, &format!("{V1}/images/{img}"), "IMAGE_STATE_READY", 30).await;
    for k in [&e, &w] {
        assert_eq!(
            objects_of(k, "/apis/cdi.kubevirt.io/v1beta1/datasources", &img).await.len(),
            1,
            "the image's DataSource on each cluster"
        );
    }

    // A subnet is made where its VMs run, and only there.
    let post = |path: &str, body: Value| {
        let (s, t, path) = (&s, t.clone(), format!("{V1}/{path}"));
        async move { s.raw(Method::POST, &path, Some(&t), Some(body)).await }
    };
    post("virtual_networks", json!({"object": {"metadata": {"name": "app"}, "spec": {"ipv4_cidr": "10.60.0.0/16"}}})).await;
    let (st, subnet) = post(
        "subnets",
        json!({"object": {"metadata": {"name": "front"}, "spec": {"virtual_network": "app", "ipv4_cidr": "10.60.1.0/24"}}}),
    )
    .await;
    assert_eq!(st, 201, "{subnet}");
    let subnet = id_of(&subnet);
    let body = json!({"object": {"metadata": {"name": "on-subnet"}, "spec": {"template": "tiny", "placement": {"cluster": "east"},
        "network_attachments": [{"subnet": "front"}]}}});
    let (st, on_subnet) = post("virtual_machines", body).await;
    assert_eq!(st, 201, "{on_subnet}");
    let v = vms::wait_ready(&s, &t, &id_of(&on_subnet)).await;
    assert_eq!(v["status"]["cluster"], "east");
    let udns = "/apis/k8s.ovn.org/v1/userdefinednetworks";
    assert_eq!((objects_of(&e, udns, &subnet).await.len(), objects_of(&w, udns, &subnet).await.len()), (1, 0));
    vms::wait_state(&s, &t, &format!("{V1}/subnets/{subnet}"), "SUBNET_STATE_READY", 30).await;

    // One cluster away: its VM is DEGRADED, the other's is not; back: READY, nothing made twice.
    east_kv.halt().await;
    east.stop_apiserver();
    let v = vms::wait_until(&s, &t, &by_room, "DEGRADED ClusterUnreachable while east is away", 60, |v| {
        degraded(v) && v.to_string().contains("ClusterUnreachable")
    })
    .await;
    assert_eq!(v["status"]["cluster"], "east");
    let (_, other) = vms::get(&s, &t, &waits).await;
    assert!(!degraded(&other["object"]) && !degraded(&other), "west's VM is not affected: {other:#}");
    east.start_apiserver().await;
    east_kv.pause(false);
    vms::wait_until(&s, &t, &by_room, "READY once east is back", 90, |v| vms::state(v) == "VIRTUAL_MACHINE_STATE_READY" && !degraded(v))
        .await;
    assert_eq!(held(&east.api(), &w, &by_room).await, (1, 0));
    assert_eq!(held(&east.api(), &w, &waits).await, (0, 1));
    let (_, health) = s.raw(Method::GET, "/healthz", None, None).await;
    assert_eq!(health["backend"]["details"]["clusters"]["east"]["reachable"], true, "{health:#}");
    assert_eq!(health["reconciler"]["workers"], 64, "32 reconciled at once per cluster: {health:#}");
}

/// A cluster whose API server does not answer when the server starts: the
/// server starts anyway. Its VMs are DEGRADED (`ClusterUnreachable`) and made
/// nowhere else; a new VM goes to the other cluster; one that names it waits;
/// a deletion waits for it. Once it answers, all of it settles, nothing twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_away_at_start_holds_nothing_back_and_gets_nothing_twice() {
    let (mut east, east_kv) = cluster("4", "8Gi").await;
    let (west, _west_kv) = cluster("4", "2Gi").await;
    let (ea, wa) =
        (format!("east={}", server_kubeconfig(&east).await.display()), format!("west={}", server_kubeconfig(&west).await.display()));
    let args = ["--backend", "kubevirt", "--cluster", &ea, "--cluster", &wa, "--default-image", "test-guest"];
    let mut s = Server::start_with(Db::Sqlite, &args).await.expect("sqlite");
    vms::publish(&s, TINY);
    let t = s.token("acme", false);
    let mut ids = Vec::new();
    for name in ["kept", "gone"] {
        let (st, v) = create(&s, &t, name, json!({"cluster": "east"})).await;
        assert_eq!(st, 201, "{v}");
        ids.push(id_of(&v));
        vms::wait_ready(&s, &t, ids.last().unwrap()).await;
    }
    let (kept, gone) = (ids[0].clone(), ids[1].clone());
    let w = west.api();

    s.stop().await;
    east_kv.halt().await;
    east.stop_apiserver();
    s.relaunch().await;
    let v = vms::wait_until(&s, &t, &kept, "DEGRADED ClusterUnreachable", 60, |v| degraded(v) && v.to_string().contains("not been listed"))
        .await;
    assert_eq!(v["status"]["cluster"], "east", "{v:#}");
    let (st, fresh) = create(&s, &t, "fresh", json!({})).await;
    assert_eq!(st, 201, "{fresh}");
    let fresh = id_of(&fresh);
    let v = vms::wait_ready(&s, &t, &fresh).await;
    assert_eq!(v["status"]["cluster"], "west", "placed on the cluster that answers: {v:#}");
    let (st, pinned) = create(&s, &t, "pinned", json!({"cluster": "east"})).await;
    assert_eq!(st, 201, "{pinned}");
    let pinned = id_of(&pinned);
    let v = vms::wait_until(&s, &t, &pinned, "waiting for east", 30, |v| v.to_string().contains("not answering")).await;
    assert!(v["status"]["cluster"].is_null(), "{v:#}");
    assert!(s.raw(Method::DELETE, &format!("{V1}/virtual_machines/{gone}"), Some(&t), None).await.0 < 300);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (st, v) = vms::get(&s, &t, &gone).await;
    assert_eq!(st, 200, "a VM on a cluster not listed is not taken to be gone: {v:#}");
    for id in [&kept, &gone, &pinned] {
        assert!(objects_of(&w, VMS, id).await.is_empty(), "nothing of east's VMs made on west");
    }

    east.start_apiserver().await;
    east_kv.pause(false);
    let e = east.api();
    for id in [&kept, &pinned] {
        let v = vms::wait_until(&s, &t, id, "READY on east", 90, |v| vms::state(v) == "VIRTUAL_MACHINE_STATE_READY" && !degraded(v)).await;
        assert_eq!(v["status"]["cluster"], "east", "{v:#}");
        assert_eq!(held(&e, &w, id).await, (1, 0));
    }
    vms::wait_object(&s, &t, &format!("{V1}/virtual_machines/{gone}"), "gone", 60, |v| v.is_none()).await;
    assert_eq!(held(&e, &w, &gone).await, (0, 0));
    assert_eq!(held(&e, &w, &fresh).await, (0, 1));
}

/// This host (the qemu backend, `NAME=host`) and a Kubernetes cluster as two
/// clusters of one server: a VM placed on the host boots a real guest here
/// and nothing of it is on the cluster; one placed on the cluster is a
/// KubeVirt VM there and no QEMU process here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn this_host_and_a_cluster_are_two_clusters_of_one_server() {
    let (k, _kv) = cluster("4", "8Gi").await;
    let kube = format!("k8s={}", server_kubeconfig(&k).await.display());
    let host = vmaas_tests::qemu_args(&vmaas_tests::images_dir());
    let mut args = vec!["--backend", "kubevirt", "--cluster", "dev=host", "--cluster", &kube, "--cluster-label", "dev:kind=laptop"];
    args.extend(host.iter().map(String::as_str));
    args.extend(["--default-image", "test-guest"]);
    let s = Server::start_with(Db::Sqlite, &args).await.expect("sqlite");
    vms::publish(&s, TINY);
    let t = s.token("acme", false);

    let (st, here) = create(&s, &t, "here", json!({"labels": {"kind": "laptop"}})).await;
    assert_eq!(st, 201, "{here}");
    let (st, there) = create(&s, &t, "there", json!({"cluster": "k8s"})).await;
    assert_eq!(st, 201, "{there}");
    let (here, there) = (id_of(&here), id_of(&there));
    let v = vms::wait_ready(&s, &t, &here).await;
    assert_eq!(v["status"]["cluster"], "dev", "{v:#}");
    assert!(!vmaas_tests::qemu_pids(&here).is_empty(), "a QEMU process runs the VM placed on this host");
    assert!(objects_of(&k.api(), VMS, &here).await.is_empty());
    let v = vms::wait_ready(&s, &t, &there).await;
    assert_eq!(v["status"]["cluster"], "k8s", "{v:#}");
    assert!(vmaas_tests::qemu_pids(&there).is_empty(), "no QEMU process for the VM on the cluster");
    assert_eq!(objects_of(&k.api(), VMS, &there).await.len(), 1);
    // The console of each is its cluster's: the guest here answers on its serial line.
    let out = vms::console(&s, &t, &here, "echo fleet-$((40+2))");
    assert!(out.contains("fleet-42"), "{out}");

    // A clone goes where its source's disks are, whatever the room says:
    // a clone of the VM here runs here; one of the VM there is a
    // VirtualMachineClone on that cluster.
    let clone = |name: &str, of: &str| json!({"object": {"metadata": {"name": name}, "spec": {"clone_of": {"compute_instance": of}}}});
    let (st, copy_here) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(clone("copy-here", "here"))).await;
    assert_eq!(st, 201, "{copy_here}");
    let (st, copy_there) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(clone("copy-there", "there"))).await;
    assert_eq!(st, 201, "{copy_there}");
    let (copy_here, copy_there) = (id_of(&copy_here), id_of(&copy_there));
    let v = vms::wait_ready(&s, &t, &copy_here).await;
    assert_eq!(v["status"]["cluster"], "dev", "{v:#}");
    assert!(!vmaas_tests::qemu_pids(&copy_here).is_empty());
    let deadline = Instant::now() + Duration::from_secs(30);
    while objects_of(&k.api(), "/apis/clone.kubevirt.io/v1beta1/virtualmachineclones", &copy_there).await.is_empty() {
        assert!(Instant::now() < deadline, "no VirtualMachineClone on the cluster of the source");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(vmaas_tests::qemu_pids(&copy_there).is_empty());

    for id in [&here, &there, &copy_here, &copy_there] {
        assert!(s.raw(Method::DELETE, &format!("{V1}/virtual_machines/{id}"), Some(&t), None).await.0 < 300);
    }
    for id in [&here, &there, &copy_here, &copy_there] {
        vms::wait_object(&s, &t, &format!("{V1}/virtual_machines/{id}"), "gone", 60, |v| v.is_none()).await;
    }
    assert!(vmaas_tests::qemu_pids(&here).is_empty());
    assert!(objects_of(&k.api(), VMS, &there).await.is_empty());
}
