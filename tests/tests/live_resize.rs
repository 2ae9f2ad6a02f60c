//! Live resize on the qemu backend, with a real guest: a running VM whose
//! template sets `max_cpu_cores` and `max_memory` goes from 1 to 2 vCPUs
//! and from 256 to 512 MiB without a reboot (the same boot id), and the
//! guest sees both; its boot disk grows and the guest sees the new size;
//! no restart is asked for, and a live migration keeps them all. Beyond the limits the change
//! waits for a restart (`RESTART_REQUIRED`), as before.

use reqwest::Method;
use serde_json::json;
use vmaas_tests::vms::{V1, console, publish, restart_required, said, state, wait_ready, wait_until};
use vmaas_tests::{Server, qemu_pids};

const RESIZABLE: &str = r#"
id: resizable
parameters:
  - { name: vm_cpu_cores, type: integer, min: 1, max: 4, default: { value: 1 } }
  - { name: vm_memory, type: quantity, min: 128Mi, max: 2Gi, default: { value: 256Mi } }
  - { name: vm_disk_size, type: quantity, min: 128Mi, max: 2Gi, default: { value: 256Mi } }
spec_defaults:
  image: test-guest
  max_cpu_cores: 2
  max_memory: 1Gi
  readiness_probe:
    http: { port: 80, path: / }
    period_seconds: 1
    timeout_seconds: 120
"#;

/// The guest's boot id, online vCPUs and MemTotal in MiB.
fn seen(s: &Server, t: &str) -> (String, u32, u64) {
    let out = said(&console(
        s,
        t,
        "grower",
        "echo \"<<$(cat /proc/sys/kernel/random/boot_id) $(nproc) $(sed -n 's/MemTotal: *\\([0-9]*\\) kB/\\1/p' /proc/meminfo)>>\"",
    ));
    let words: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(words.len(), 3, "the guest said {out:?}");
    (words[0].to_owned(), words[1].parse().unwrap(), words[2].parse::<u64>().unwrap() / 1024)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_vm_takes_more_vcpus_and_memory_without_a_reboot() {
    let s = Server::start_qemu().await;
    publish(&s, RESIZABLE);
    let t = s.token("acme", false);
    let body = json!({"object": {"metadata": {"name": "grower"}, "spec": {"template": "resizable"}}});
    let (st, vm) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(body)).await;
    assert_eq!(st, 201, "{vm}");
    let id = vm["object"]["id"].as_str().unwrap().to_owned();
    wait_ready(&s, &t, &id).await;
    let (boot, cpus, mem) = seen(&s, &t);
    assert_eq!(cpus, 1);
    assert!((100..=256).contains(&mem), "at most 256 MiB at first: {mem}");

    let path = format!("{V1}/virtual_machines/{id}");
    let grow = json!({"object": {"spec": {"template_parameters": {"vm_cpu_cores": {"value": 2}, "vm_memory": {"value": "512Mi"}}}}});
    let (st, b) = s.raw(Method::PATCH, &path, Some(&t), Some(grow)).await;
    assert_eq!(st, 200, "{b}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let (now_boot, now_cpus, now_mem) = loop {
        let now = seen(&s, &t);
        if now.1 == 2 && now.2 >= mem + 250 {
            break now;
        }
        assert!(std::time::Instant::now() < deadline, "the guest does not see 2 vCPUs and 512 MiB: {now:?}\n{}", s.log());
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    };
    assert_eq!(now_boot, boot, "the same boot: no reboot");
    assert_eq!(now_cpus, 2);
    assert!(now_mem >= mem + 250, "{mem} MiB then {now_mem} MiB");
    assert!(s.log().contains("resized live"), "{}", s.log());
    wait_until(&s, &t, &id, "READY with nothing waiting for a restart", 30, |v| {
        state(v) == "VIRTUAL_MACHINE_STATE_READY" && !restart_required(v)
    })
    .await;

    // The boot disk grows while the guest runs, and the guest sees it.
    let sectors = || said(&console(&s, &t, "grower", "echo \"<<$(cat /sys/block/vda/size)>>\"")).parse::<u64>().unwrap_or(0);
    assert_eq!(sectors(), (256 << 20) / 512);
    let bigger = json!({"object": {"spec": {"template_parameters": {
        "vm_cpu_cores": {"value": 2}, "vm_memory": {"value": "512Mi"}, "vm_disk_size": {"value": "512Mi"}}}}});
    let (st, b) = s.raw(Method::PATCH, &path, Some(&t), Some(bigger)).await;
    assert_eq!(st, 200, "{b}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while sectors() != (512 << 20) / 512 {
        assert!(std::time::Instant::now() < deadline, "the guest does not see the grown disk\n{}", s.log());
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
    assert_eq!(seen(&s, &t).0, boot, "the same boot");
    wait_until(&s, &t, &id, "READY with nothing waiting for a restart", 30, |v| {
        state(v) == "VIRTUAL_MACHINE_STATE_READY" && !restart_required(v)
    })
    .await;

    // A live migration keeps the vCPU and the memory added.
    let old = qemu_pids(&id);
    let admin = s.token("ops", true);
    let (st, b) = s.raw(Method::POST, &format!("{path}/migrate"), Some(&admin), Some(json!({}))).await;
    assert_eq!(st, 202, "{b}");
    wait_until(&s, &t, &id, "READY on a new QEMU", 180, |v| state(v) == "VIRTUAL_MACHINE_STATE_READY" && qemu_pids(&id) != old).await;
    assert_eq!(seen(&s, &t), (boot.clone(), 2, now_mem), "after a live migration\n{}", s.log());

    // Beyond what the guest started able to take: a restart is asked for.
    let more = json!({"object": {"spec": {"template_parameters": {"vm_cpu_cores": {"value": 2}, "vm_memory": {"value": "2Gi"}, "vm_disk_size": {"value": "512Mi"}}}}});
    let (st, b) = s.raw(Method::PATCH, &path, Some(&t), Some(more)).await;
    assert_eq!(st, 400, "over max_memory is refused: {b}");
    assert!(b.to_string().contains("max_memory"), "{b}");
    let fewer = json!({"object": {"spec": {"template_parameters": {"vm_cpu_cores": {"value": 1}, "vm_memory": {"value": "512Mi"}, "vm_disk_size": {"value": "512Mi"}}}}});
    let (st, b) = s.raw(Method::PATCH, &path, Some(&t), Some(fewer)).await;
    assert_eq!(st, 200, "{b}");
    wait_until(&s, &t, &id, "RESTART_REQUIRED", 60, |v| state(v) == "VIRTUAL_MACHINE_STATE_READY" && restart_required(v)).await;
    assert_eq!(seen(&s, &t).1, 2, "fewer vCPUs wait for the restart");
}
