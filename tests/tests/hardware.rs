//! A template's virtual hardware on the qemu backend with real QEMU and the
//! real test guest: the guest boots from a SATA disk, serves through an
//! e1000e NIC and sees the sockets and threads asked for; the RNG and the
//! tablet are on QEMU's command line; what QEMU cannot express here (a
//! storage class, multiqueue, a machine type it lacks, where on a cluster a
//! VM may run, pinned CPUs, huge pages) is refused at create,
//! naming the field and the backend, and nothing is made. A VM's own boot
//! disk and additional disks (OSAC's) reach the guest at their sizes.

use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::vms::{V1, console, console_log_with, create, wait_ready};
use vmaas_tests::{Server, qemu_pids};

const WINDOWS_LIKE: &str = "id: windows-like
spec_defaults:
  image: test-guest
  memory: 256Mi
  disk_size: 1Gi
  cpu_cores: 1
  cpu_sockets: 2
  cpu_threads: 2
  disk_bus: sata
  nic_model: e1000e
  rng: true
  tablet: true
  machine_type: q35
  termination_grace_period_seconds: 30
  exposed_ports: [{port: 80}]
  readiness_probe: {http: {port: 80}, period_seconds: 1, timeout_seconds: 180}
---
id: on-ceph
spec_defaults: {image: test-guest, disk_storage_class: ceph-rbd}
---
id: multiqueue
spec_defaults: {image: test-guest, network_interface_multiqueue: true}
---
id: rhel-machine
spec_defaults: {image: test-guest, machine_type: pc-q35-rhel9.2.0}
---
id: gpu-nodes
spec_defaults: {image: test-guest, node_selector: {gpu: a10}}
---
id: pinned
spec_defaults: {image: test-guest, dedicated_cpus: true}
---
id: huge
spec_defaults: {image: test-guest, hugepages: 2Mi}
";

/// The text between `<<` and `>>` in `out`.
fn marked(out: &str) -> &str {
    out.rsplit("<<").next().and_then(|r| r.split(">>").next()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_boots_on_sata_with_an_e1000e_nic_and_its_topology() {
    let s = Server::start_qemu().await;
    let admin = s.token("ops", true);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hardware.yaml"), WINDOWS_LIKE).unwrap();
    let out = s.cli(&admin, &["template", "sync", dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let t = s.token("acme", false);

    // What QEMU cannot express here is refused at create, naming it.
    for (template, field) in [
        ("on-ceph", "disk_storage_class"),
        ("multiqueue", "network_interface_multiqueue"),
        ("rhel-machine", "machine_type"),
        ("gpu-nodes", "node_selector"),
        ("pinned", "dedicated_cpus"),
        ("huge", "hugepages"),
    ] {
        let body = json!({"object": {"metadata": {"name": template}, "spec": {"template": template}}});
        let (st, err) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(body)).await;
        assert_eq!(st, 400, "{template}: {err}");
        let e = &err["details"][0];
        assert_eq!(e["field"], "object.spec.template", "{err}");
        let why = e["reason"].as_str().unwrap_or_default();
        assert!(why.contains(field) && why.contains("qemu backend"), "{template}: {err}");
    }
    let (_, list) = s.raw(Method::GET, &format!("{V1}/virtual_machines"), Some(&t), None).await;
    assert_eq!(list["size"], 0, "nothing was made: {list}");

    // The guest is READY: its HTTP server answered through the e1000e NIC.
    let id = create(&s, &t, "win", "windows-like").await;
    let vm: Value = wait_ready(&s, &t, &id).await;
    assert_eq!(vm["status"]["state"], "VIRTUAL_MACHINE_STATE_READY");
    let log = console_log_with(&s, &t, "win", "mounted on /data", std::time::Duration::from_secs(60)).await;
    assert!(log.contains("disk /dev/sda mounted on /data"), "the boot disk is on SATA: {log}");
    let cmd = "echo \"<<$(basename $(readlink /sys/class/net/eth0/device/driver)) $(cat /sys/block/sda/device/vendor) \
               $(grep -c ^processor /proc/cpuinfo) $(cat /sys/devices/system/cpu/cpu*/topology/physical_package_id | sort -u | wc -l) \
               $(cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list) $(cat /sys/devices/system/cpu/cpu*/topology/core_id | tr '\\n' ,)>>\"";
    let out = console(&s, &t, "win", cmd);
    let seen: Vec<&str> = marked(&out).split_whitespace().collect();
    assert_eq!(seen, ["e1000e", "ATA", "4", "2", "0-1", "0,0,0,0,"], "driver, disk vendor, vCPUs, sockets, cpu0's threads, cores: {out}");

    // The RNG and the tablet are QEMU devices of this VM.
    let pid = qemu_pids(&id)[0];
    let cmdline = String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/cmdline")).unwrap()).replace('\0', " ");
    for device in ["virtio-rng-pci", "usb-tablet", "-machine q35", "ahci,id=sata0", "e1000e,netdev="] {
        assert!(cmdline.contains(device), "{device} in {cmdline}");
    }
}

/// OSAC's `boot_disk` and `additional_disks` on the qemu backend: the guest
/// boots on a boot disk larger than its template's and sees each
/// additional disk at its size; a storage tier (no storage classes on one
/// host), a boot disk smaller than the template's, and a change to the
/// additional disks are refused by field; the boot disk grows in place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_sees_its_boot_disk_and_additional_disks() {
    let s = Server::start_qemu().await;
    let admin = s.token("ops", true);
    let dir = tempfile::tempdir().unwrap();
    let template = "id: small-disk\nspec_defaults: {image: test-guest, memory: 256Mi, disk_size: 1Gi}\n";
    std::fs::write(dir.path().join("t.yaml"), template).unwrap();
    let out = s.cli(&admin, &["template", "sync", dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let t = s.token("acme", false);
    let vms = format!("{V1}/virtual_machines");
    let body = |name: &str, spec: Value| {
        let mut spec = spec;
        spec["template"] = json!("small-disk");
        json!({"object": {"metadata": {"name": name}, "spec": spec}})
    };

    for (spec, field) in [
        (json!({"additional_disks": [{"size_gib": 1, "storage_tier": "fast"}]}), "object.spec.additional_disks[0].storage_tier"),
        (json!({"boot_disk": {"size_gib": 2, "storage_tier": "fast"}}), "object.spec.boot_disk.storage_tier"),
        (json!({"boot_disk": {"size_gib": 0}}), "object.spec.boot_disk.size_gib"),
    ] {
        let (st, err) = s.raw(Method::POST, &vms, Some(&t), Some(body("refused", spec.clone()))).await;
        assert_eq!(st, 400, "{spec}: {err}");
        let fields: Vec<&str> = err["details"].as_array().into_iter().flatten().filter_map(|e| e["field"].as_str()).collect();
        assert_eq!(fields, [field], "{spec}: {err}");
    }
    let (_, list) = s.raw(Method::GET, &vms, Some(&t), None).await;
    assert_eq!(list["size"], 0, "nothing was made: {list}");

    let spec = json!({"boot_disk": {"size_gib": 2}, "additional_disks": [{"size_gib": 1}, {"size_gib": 3}]});
    let (st, vm) = s.raw(Method::POST, &vms, Some(&t), Some(body("disks", spec.clone()))).await;
    assert_eq!(st, 201, "{vm}");
    assert_eq!(
        (&vm["object"]["spec"]["boot_disk"], &vm["object"]["spec"]["additional_disks"]),
        (&spec["boot_disk"], &spec["additional_disks"])
    );
    let id = vm["object"]["id"].as_str().unwrap().to_owned();
    wait_ready(&s, &t, &id).await;
    console_log_with(&s, &t, "disks", "vmaas-guest: ready", std::time::Duration::from_secs(120)).await;
    let out = console(&s, &t, "disks", "echo \"<<$(for d in /sys/block/vd*; do echo $(basename $d)=$(cat $d/size); done)>>\"");
    let seen: Vec<&str> = marked(&out).split_whitespace().collect();
    let gib = |n: u64| n << 21;
    assert!(seen.contains(&format!("vda={}", gib(2)).as_str()), "the boot disk is 2 GiB: {out}");
    for size in [gib(1), gib(3)] {
        assert!(seen.iter().any(|d| d.ends_with(&format!("={size}")) && !d.starts_with("vda")), "a {size}-sector disk: {out}");
    }

    let patch = |spec: Value| json!({"object": {"spec": spec}});
    let (st, err) =
        s.raw(Method::PATCH, &format!("{vms}/{id}"), Some(&t), Some(patch(json!({"additional_disks": [{"size_gib": 1}]})))).await;
    assert_eq!((st, &err["details"][0]["field"]), (400, &json!("object.spec.additional_disks")), "{err}");
    let (st, err) = s.raw(Method::PATCH, &format!("{vms}/{id}"), Some(&t), Some(patch(json!({"boot_disk": {"size_gib": 1}})))).await;
    assert_eq!((st, &err["details"][0]["field"]), (400, &json!("object.spec.boot_disk.size_gib")), "shrinking: {err}");
    let (st, vm) = s.raw(Method::PATCH, &format!("{vms}/{id}"), Some(&t), Some(patch(json!({"boot_disk": {"size_gib": 4}})))).await;
    assert_eq!((st, &vm["object"]["spec"]["boot_disk"]["size_gib"]), (200, &json!(4)), "grown: {vm}");
}
