//! The kubevirt backend against a real kube-apiserver (envtest style,
//! `vmaas_tests::k8s`), with a task playing KubeVirt and MetalLB
//! (`vmaas_tests::kubevirt`): VMs made through the vmaas API become
//! KubeVirt VMs in their tenant's namespace, accepted by the real API
//! server with strict field validation; their status follows what the
//! cluster reports; stop, start, restart, a deletion behind the server's
//! back and a server restart all end where they should; deleting leaves
//! nothing behind.

use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::k8s::{Cluster, KubeApi};
use vmaas_tests::kubevirt::{IMAGES, SERVICES, VMIS, VMS, env, objects_of, the_vm};
use vmaas_tests::vms::{self, TINY, V1};
use vmaas_tests::{Db, Server};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vms_run_as_kubevirt_vms_in_their_tenants_namespaces() {
    let (k, _kubevirt, mut s) = env().await;
    let (acme, globex) = (s.token("acme", false), s.token("globex", false));

    let id = vms::create(&s, &acme, "web", "tiny").await;
    let ready = vms::wait_ready(&s, &acme, &id).await;
    let vm = the_vm(&k, &id).await;
    let ns = vm["metadata"]["namespace"].as_str().unwrap().to_owned();
    assert!(ns.starts_with("vmaas-acme-"), "{ns}");
    assert_eq!(vm["metadata"]["name"], "web");
    assert_eq!(vm["spec"]["runStrategy"], "Always");
    assert_eq!(vm["metadata"]["finalizers"], json!(["vmaas.io/cleanup"]));
    assert_eq!(
        vm["spec"]["dataVolumeTemplates"][0]["spec"]["sourceRef"],
        json!({"kind": "DataSource", "name": "test-guest", "namespace": IMAGES})
    );
    let managers: Vec<&str> = vm["metadata"]["managedFields"].as_array().unwrap().iter().filter_map(|m| m["manager"].as_str()).collect();
    assert!(managers.contains(&"vmaas"), "applied as field manager vmaas: {managers:?}");
    let vmi = objects_of(&k, VMIS, &id).await;
    let address = vmi[0]["status"]["interfaces"][0]["ipAddress"].as_str().unwrap();
    assert_eq!(ready["status"]["internalIP"], address, "{ready:#}");
    let svc = objects_of(&k, SERVICES, &id).await;
    assert_eq!(svc.len(), 1, "tiny exposes a port: a floating-IP Service");
    assert_eq!(svc[0]["metadata"]["ownerReferences"][0]["uid"], vm["metadata"]["uid"], "owned by the VM");
    let floating = vms::wait_until(&s, &acme, &id, "the floating IP", 60, |v| {
        v["status"]["externalIP"].as_str().is_some_and(|a| a.starts_with("192.0.2."))
    })
    .await;
    assert_eq!(floating["status"]["externalIP"], svc[0]["status"]["loadBalancer"]["ingress"][0]["ip"]);

    // Another tenant's VM of the same name lives in its own namespace.
    let other = vms::create(&s, &globex, "web", "tiny").await;
    vms::wait_ready(&s, &globex, &other).await;
    let other_ns = the_vm(&k, &other).await["metadata"]["namespace"].as_str().unwrap().to_owned();
    assert!(other_ns.starts_with("vmaas-globex-") && other_ns != ns, "{other_ns}");
    assert_eq!(vms::get(&s, &globex, &id).await.0, 404, "tenants never see each other's VMs");

    // Stop, start, restart.
    let patch = |state: &str| json!({"object": {"spec": {"state": state}}});
    let path = format!("{V1}/virtual_machines/{id}");
    assert_eq!(s.raw(Method::PATCH, &path, Some(&acme), Some(patch("stopped"))).await.0, 200);
    vms::wait_until(&s, &acme, &id, "STOPPED", 60, |v| vms::state(v) == "VIRTUAL_MACHINE_STATE_STOPPED").await;
    assert_eq!(the_vm(&k, &id).await["spec"]["runStrategy"], "Halted");
    assert!(objects_of(&k, VMIS, &id).await.is_empty(), "no VMI while stopped");
    assert!(objects_of(&k, SERVICES, &id).await.is_empty(), "a stopped VM has no floating IP");
    assert_eq!(s.raw(Method::PATCH, &path, Some(&acme), Some(patch("started"))).await.0, 200);
    vms::wait_ready(&s, &acme, &id).await;
    let before = objects_of(&k, VMIS, &id).await[0]["metadata"]["uid"].clone();
    let (st, body) = s.raw(Method::POST, &format!("{path}/restart"), Some(&acme), None).await;
    assert!(st < 300, "{st} {body}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let now = objects_of(&k, VMIS, &id).await;
        if now.first().is_some_and(|v| v["metadata"]["uid"] != before && v["status"]["phase"] == "Running") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the restart made no new VMI: {now:#?}\n{}", s.log());
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    vms::wait_ready(&s, &acme, &id).await;

    // A server restart adopts what is there: the same VM, not a second one.
    let uid = the_vm(&k, &id).await["metadata"]["uid"].clone();
    s.restart().await;
    vms::wait_ready(&s, &acme, &id).await;
    assert_eq!(the_vm(&k, &id).await["metadata"]["uid"], uid, "adopted, not made again");

    // Deleted in the cluster behind the server's back: made again.
    let (st, _) = k.request(Method::DELETE, &Cluster::path_of(&the_vm(&k, &id).await, "virtualmachines"), None, None).await;
    assert_eq!(st, 200);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let now = objects_of(&k, VMS, &id).await;
        if now.len() == 1 && now[0]["metadata"]["uid"] != uid && now[0]["metadata"]["deletionTimestamp"].is_null() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the VM was not made again: {now:#?}\n{}", s.log());
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }

    // Deleting leaves nothing behind.
    for (token, vm) in [(&acme, &id), (&globex, &other)] {
        let (st, body) = s.raw(Method::DELETE, &format!("{V1}/virtual_machines/{vm}"), Some(token), None).await;
        assert!(st < 300, "{st} {body}");
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    for (token, vm) in [(&acme, &id), (&globex, &other)] {
        while vms::get(&s, token, vm).await.0 != 404 {
            assert!(std::time::Instant::now() < deadline, "VM {vm} not deleted:\n{}", s.log());
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        for path in [VMS, VMIS, SERVICES] {
            assert_eq!(objects_of(&k, path, vm).await, Vec::<Value>::new(), "{path} of {vm} left behind");
        }
    }
}

/// Waits for the migration of `id` named `name`, as the backend made it;
/// on a timeout, says what the server logged of migrations and watches.
async fn the_migration(k: &KubeApi, s: &Server, id: &str, name: &str) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let found = objects_of(k, "/apis/kubevirt.io/v1/virtualmachineinstancemigrations", id).await;
        if let Some(m) = found.iter().find(|m| m["metadata"]["name"] == name) {
            return m.clone();
        }
        if std::time::Instant::now() > deadline {
            let log = s.log();
            let said: Vec<&str> =
                log.lines().filter(|l| ["migrat", "watch", "VMI", "WARN", "ERROR"].iter().any(|w| l.contains(w))).collect();
            panic!("no migration {name}: {found:#?}\nthe server said:\n{}", said.join("\n"));
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

fn condition<'a>(vm: &'a Value, kind: &str) -> &'a Value {
    let all = vm["status"]["conditions"].as_array().expect("conditions");
    all.iter().find(|c| c["type"] == format!("VIRTUAL_MACHINE_CONDITION_TYPE_{kind}")).unwrap_or(&Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_administrator_live_migrates_a_vm() {
    let (k, _kubevirt, s) = env().await;
    let (acme, admin) = (s.token("acme", false), s.token("ops", true));
    let id = vms::create(&s, &acme, "db", "tiny").await;
    vms::wait_ready(&s, &acme, &id).await;
    let migrate = format!("{V1}/virtual_machines/{id}/migrate");

    let (st, body) = s.raw(Method::POST, &migrate, Some(&acme), None).await;
    assert_eq!(st, 403, "tenants do not migrate: {body}");
    let (st, body) = s.raw(Method::POST, &migrate, Some(&admin), Some(json!({"target_node": "Node_2"}))).await;
    assert_eq!((st, body["details"][0]["field"].as_str()), (400, Some("target_node")), "{body}");
    let (st, body) = s.raw(Method::POST, &migrate, Some(&admin), Some(json!({"target": "node-2"}))).await;
    assert_eq!(st, 400, "unknown fields are refused: {body}");
    assert!(
        objects_of(&k, "/apis/kubevirt.io/v1/virtualmachineinstancemigrations", &id).await.is_empty(),
        "a refused request made nothing"
    );

    let (st, body) = s.raw(Method::POST, &migrate, Some(&admin), Some(json!({"target_node": "node-2"}))).await;
    assert_eq!(st, 202, "{body}");
    let m = the_migration(&k, &s, &id, "db-migration-1").await;
    assert_eq!(m["spec"], json!({"vmiName": "db", "addedNodeSelector": {"kubernetes.io/hostname": "node-2"}}));
    let moving = vms::wait_until(&s, &admin, &id, "MIGRATING", 30, |v| vms::state(v) == "VIRTUAL_MACHINE_STATE_MIGRATING").await;
    assert!(condition(&moving, "PROGRESSING")["message"].as_str().unwrap().contains("to node node-2"), "{moving:#}");
    // Play KubeVirt: the migration runs, then succeeds with the VMI on node-2.
    let (st, body) = k.write_status(&m, "virtualmachineinstancemigrations", json!({"phase": "Running"})).await;
    assert_eq!(st, 200, "{body}");
    vms::wait_until(&s, &admin, &id, "still MIGRATING", 10, |v| {
        condition(v, "PROGRESSING")["message"].as_str().is_some_and(|m| m.ends_with("Running"))
    })
    .await;
    let vmi = objects_of(&k, VMIS, &id).await.remove(0);
    k.write_status(&m, "virtualmachineinstancemigrations", json!({"phase": "Succeeded"})).await;
    k.write_status(&vmi, "virtualmachineinstances", json!({"nodeName": "node-2"})).await;
    vms::wait_ready(&s, &acme, &id).await;

    // A second migration (through the CLI) that fails: READY, and DEGRADED saying why.
    let out = s.cli(&admin, &["vm", "migrate", &id, "-o", "json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let shown: Value = serde_json::from_slice(&out.stdout).expect("the VM as JSON");
    assert_eq!(vms::state(&shown), "VIRTUAL_MACHINE_STATE_MIGRATING", "{shown:#}");
    let m = the_migration(&k, &s, &id, "db-migration-2").await;
    assert!(m["spec"].get("addedNodeSelector").is_none(), "no node asked: the scheduler's choice");
    let failed = json!({"phase": "Failed", "migrationState": {"failed": true, "failureReason": "target node has no room"}});
    let (st, body) = k.write_status(&m, "virtualmachineinstancemigrations", failed).await;
    assert_eq!(st, 200, "{body}");
    let degraded =
        vms::wait_until(&s, &admin, &id, "DEGRADED", 30, |v| condition(v, "DEGRADED")["status"] == "CONDITION_STATUS_TRUE").await;
    assert_eq!(vms::state(&degraded), "VIRTUAL_MACHINE_STATE_READY", "the guest stays where it was");
    assert!(condition(&degraded, "DEGRADED")["message"].as_str().unwrap().contains("target node has no room"), "{degraded:#}");

    // The VM's status says whether KubeVirt can move it, and why not.
    assert_eq!(condition(&degraded, "LIVE_MIGRATABLE")["status"], "CONDITION_STATUS_TRUE", "{degraded:#}");
    let vmi = objects_of(&k, VMIS, &id).await.remove(0);
    let stuck = json!({"type": "LiveMigratable", "status": "False", "reason": "DisksNotLiveMigratable", "message": "PVC data is not ReadWriteMany", "lastProbeTime": null, "lastTransitionTime": null});
    let (st, body) = k.write_status(&vmi, "virtualmachineinstances", json!({"conditions": [stuck]})).await;
    assert_eq!(st, 200, "{body}");
    let unmovable =
        vms::wait_until(&s, &admin, &id, "not migratable", 30, |v| condition(v, "LIVE_MIGRATABLE")["status"] == "CONDITION_STATUS_FALSE")
            .await;
    let c = condition(&unmovable, "LIVE_MIGRATABLE");
    assert_eq!((&c["reason"], &c["message"]), (&json!("DisksNotLiveMigratable"), &json!("PVC data is not ReadWriteMany")));
    // Asked anyway, it is refused at once, saying why; nothing is made.
    let (st, body) = s.raw(Method::POST, &migrate, Some(&admin), None).await;
    let why = body["message"].as_str().unwrap_or_default();
    assert!(st == 409 && why.contains("DisksNotLiveMigratable") && why.contains("not ReadWriteMany"), "{st} {body}");
    let names: Vec<Value> = objects_of(&k, "/apis/kubevirt.io/v1/virtualmachineinstancemigrations", &id)
        .await
        .iter()
        .map(|m| m["metadata"]["name"].clone())
        .collect();
    assert_eq!(names, vec![json!("db-migration-1"), json!("db-migration-2")], "no third migration was made");

    // Stopped VMs do not migrate; a backend that cannot migrate says so.
    assert_eq!(
        s.raw(Method::PATCH, &format!("{V1}/virtual_machines/{id}"), Some(&acme), Some(json!({"object": {"spec": {"state": "stopped"}}})))
            .await
            .0,
        200
    );
    let (st, body) = s.raw(Method::POST, &migrate, Some(&admin), None).await;
    assert!(st == 409 && body["message"].as_str().unwrap().contains("stopped"), "{st} {body}");

    // Deleted: its migrations go with it.
    assert_eq!(s.raw(Method::DELETE, &format!("{V1}/virtual_machines/{id}"), Some(&acme), None).await.0, 202);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !objects_of(&k, "/apis/kubevirt.io/v1/virtualmachineinstancemigrations", &id).await.is_empty() {
        assert!(std::time::Instant::now() < deadline, "the migrations of a deleted VM stayed:\n{}", s.log());
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }

    let none = Server::start(Db::Sqlite).await.expect("sqlite");
    vms::publish(&none, TINY);
    let vm = vms::create(&none, &none.token("acme", false), "db", "tiny").await;
    let (st, body) = none.raw(Method::POST, &format!("{V1}/virtual_machines/{vm}/migrate"), Some(&none.token("ops", true)), None).await;
    assert!(st == 409 && body["message"].as_str().unwrap().contains("none backend cannot live-migrate"), "{st} {body}");
}

/// The id of the one VM `token` sees.
async fn the_only_vm(s: &Server, token: &str) -> String {
    let (_, list) = s.raw(Method::GET, &format!("{V1}/virtual_machines"), Some(token), None).await;
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "one VM: {list:#}");
    items[0]["id"].as_str().unwrap().to_owned()
}

/// The quickstart applies against the kubevirt backend with both Terraform
/// versions: apply waits for READY (KubeVirt's ready VM), the external IP is
/// the floating-IP Service's, a re-plan is empty, and destroy leaves nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_terraform_quickstart_applies_on_kubevirt() {
    use vmaas_tests::tf::{Tf, Workspace, repo};
    let (k, _kubevirt, s) = env().await;
    let token = s.token("ci", false);
    let quickstart = std::fs::read_to_string(repo().join("examples/terraform/quickstart/main.tf")).unwrap();
    for tf in Tf::ALL {
        let w = Workspace::new(tf, &s, &token, &quickstart);
        w.apply(&[]);
        assert_eq!(w.output("status"), "READY", "{tf:?}");
        let id = the_only_vm(&s, &token).await;
        let svc = objects_of(&k, SERVICES, &id).await;
        assert_eq!(w.output("external_ip"), svc[0]["status"]["loadBalancer"]["ingress"][0]["ip"].as_str().unwrap(), "{tf:?}");
        let vm = the_vm(&k, &id).await;
        assert_eq!(vm["spec"]["template"]["spec"]["domain"]["memory"]["guest"], "256Mi");
        let (code, text) = w.plan_code(&[]);
        assert_eq!(code, 0, "{tf:?}: a no-op re-plan:\n{text}");
        w.apply(&["-var", "memory=512Mi"]);
        let id = the_only_vm(&s, &token).await;
        assert_eq!(the_vm(&k, &id).await["spec"]["template"]["spec"]["domain"]["memory"]["guest"], "512Mi", "{tf:?}");
        w.ok(&["destroy", "-auto-approve", "-no-color", "-var", "memory=512Mi"]);
        for path in [VMS, VMIS, SERVICES] {
            assert_eq!(objects_of(&k, path, &id).await, Vec::<Value>::new(), "{tf:?}: {path} left behind");
        }
    }
}
