//! Template snapshots on the qemu backend, with real guests: VMs of the
//! test guest start as clones of one snapshot, each with its own MACs,
//! subnet address, host name and keys (its first console output names
//! itself); what a clone frees leaves the snapshot as it was; a clone is
//! healed after `kill -9` of its QEMU and kept across a
//! server restart like any VM; a changed image makes a new snapshot; with
//! `--vm-snapshots=false` a VM boots and its status says so. The images
//! are a copy of the test guest's, so touching them touches no other test.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use vmaas_tests::Server;
use vmaas_tests::vms::{self, TINY, V1, get, publish, wait_ready};

/// The READY condition's message: how the guest was started.
fn boot_of(vm: &Value) -> String {
    vms::boot_of(&vm["object"])
}

/// The snapshot a VM was restored from, from its READY message.
fn snapshot_of(vm: &Value) -> Option<String> {
    let m = boot_of(vm);
    m.split("restored from template snapshot ").nth(1).map(|k| k.trim_end_matches(')').to_owned())
}

/// Runs `line` on the VM's console; what it printed.
fn console(s: &Server, t: &str, name: &str, line: &str) -> String {
    let out = s.cli_with_stdin(t, &["vm", "console", name, "--batch", "--idle", "3s"], format!("{line}\n").as_bytes());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `vmaas vm create NAME -t tiny --subnet front --ssh-key KEY --wait`; the VM's id.
fn create(s: &Server, t: &str, name: &str, key: &str) -> String {
    let args = ["vm", "create", name, "-t", "tiny", "--subnet", "front", "--ssh-key", key, "--wait", "-o", "json"];
    let out = s.cli(t, &args);
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stderr), s.log());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    v["id"].as_str().or(v["object"]["id"].as_str()).unwrap().to_owned()
}

/// The flags VM `id`'s QEMU opened `ram` with (`/proc/PID/fdinfo`).
fn ram_open_flags(s: &Server, id: &str, ram: &Path) -> u32 {
    let pid = std::fs::read_to_string(s.data_dir.join(format!("vms/{id}/qemu.pid"))).unwrap().trim().to_owned();
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap();
    let fd = fds.flatten().find(|e| std::fs::read_link(e.path()).is_ok_and(|l| l == ram)).unwrap_or_else(|| panic!("{id} maps no {ram:?}"));
    let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{}", fd.file_name().to_string_lossy())).unwrap();
    let flags = info.lines().find_map(|l| l.strip_prefix("flags:")).unwrap().trim();
    u32::from_str_radix(flags, 8).unwrap()
}

/// A copy of the test guest's image in `dir` (its files linked, its
/// manifest copied).
fn copy_images(dir: &Path) {
    let from = vmaas_tests::images_dir().join("test-guest");
    let to = dir.join("test-guest");
    std::fs::create_dir_all(&to).unwrap();
    for e in std::fs::read_dir(&from).unwrap().flatten() {
        let name = e.file_name();
        if name == "image.json" {
            std::fs::copy(e.path(), to.join(&name)).unwrap();
        } else {
            std::os::unix::fs::symlink(e.path(), to.join(&name)).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clones_of_one_snapshot_are_each_themselves() {
    let images = tempfile::tempdir().unwrap();
    copy_images(images.path());
    let mut s = Server::start_qemu_images(images.path(), &[]).await;
    publish(&s, TINY);
    let t = s.token("acme", false);
    s.cli_json(&t, &["network", "create", "lab", "--cidr", "10.31.0.0/16"]);
    let sn = s.cli_json(&t, &["subnet", "create", "front", "--network", "lab", "--cidr", "10.31.1.0/24"]);
    vms::wait_state(&s, &t, &format!("{V1}/subnets/{}", sn["id"].as_str().unwrap()), "SUBNET_STATE_READY", 15).await;

    let keys = ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOne one@acme", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAITwo two@acme"];
    let ids = [create(&s, &t, "one", keys[0]), create(&s, &t, "two", keys[1])];
    let mut seen = Vec::new();
    for (id, (name, key)) in ids.iter().zip([("one", keys[0]), ("two", keys[1])]) {
        let (_, vm) = get(&s, &t, id).await;
        let snap = snapshot_of(&vm).unwrap_or_else(|| panic!("{name} was not restored: {}", boot_of(&vm)));
        let ip = vm["object"]["status"]["internalIP"].as_str().unwrap().to_owned();
        let out = console(
            &s,
            &t,
            name,
            "echo id=$(hostname)@$(cat /sys/class/net/eth0/address)@$(cat /sys/class/net/eth1/address)@$(ip -4 -o addr show eth1 | awk '{print $4}')@$(cat /root/.ssh/authorized_keys)=end",
        );
        let line = out.lines().find(|l| l.starts_with("id=") && l.ends_with("=end")).unwrap_or_else(|| panic!("{name}: {out}"));
        let f: Vec<&str> = line.trim_start_matches("id=").trim_end_matches("=end").splitn(5, '@').collect();
        assert_eq!((f[0], f[3], f[4]), (name, format!("{ip}/24").as_str(), key), "{name}: {line}");
        let log = String::from_utf8_lossy(&s.cli(&t, &["vm", "logs", name]).stdout).into_owned();
        let resumed = log.split("resumed as a clone").nth(1).unwrap_or_else(|| panic!("{name}'s console: {log}"));
        assert!(resumed.contains(&format!("hostname {name},")), "its first words after the restore name it: {log}");
        seen.push((snap, f[1].to_owned(), f[2].to_owned(), ip));
    }
    assert_eq!(seen[0].0, seen[1].0, "one snapshot for both");
    assert!(seen[0].1 != seen[1].1 && seen[0].2 != seen[1].2 && seen[0].3 != seen[1].3, "distinct MACs and addresses: {seen:?}");
    let key = seen[0].0.clone();
    assert!(s.data_dir.join("snapshots").join(&key).join("ram").is_file());

    // What each costs the host, in /metrics: its unique memory is part of its resident memory.
    let admin = s.token("ops", true);
    let metrics = s.raw(reqwest::Method::GET, "/metrics", Some(&admin), None).await.1;
    let text = metrics.as_str().unwrap_or_default();
    let gauge = |name: &str, id: &str| -> u64 {
        let prefix = format!("vmaas_{name}{{vm=\"{id}\"}} ");
        let line = text.lines().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("no {prefix} in {text}"));
        line[prefix.len()..].trim().parse().unwrap()
    };
    for id in &ids {
        let (resident, unique) = (gauge("vm_memory_resident_bytes", id), gauge("vm_memory_unique_bytes", id));
        assert!(unique > 0 && unique < resident, "{id}: unique {unique} of resident {resident}");
    }

    // What a clone frees stays its own business: one deletes files its
    // template had read into memory and drops its caches (its guest reports
    // the freed pages to QEMU); the snapshot's RAM, which every clone maps,
    // is unchanged (QEMU punches holes into a writable file for that).
    let ram = s.data_dir.join("snapshots").join(&key).join("ram");
    let digest = || {
        use sha2::Digest;
        let mut file = std::fs::File::open(&ram).unwrap();
        let mut h = sha2::Sha256::new();
        std::io::copy(&mut file, &mut h).unwrap();
        format!("{:x}", h.finalize())
    };
    let (before_free, allocated) = (digest(), std::fs::metadata(&ram).map(|m| std::os::unix::fs::MetadataExt::blocks(&m)).unwrap());
    let out = console(&s, &t, "one", "rm -rf /lib/modules; echo 3 > /proc/sys/vm/drop_caches; echo freed=$(ls /lib | grep -c modules)");
    assert!(out.contains("freed=0"), "{out}");
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(digest(), before_free, "a clone's freed memory changed the snapshot every clone maps");
    assert_eq!(std::fs::metadata(&ram).map(|m| std::os::unix::fs::MetadataExt::blocks(&m)).unwrap(), allocated, "no hole punched");
    for id in &ids {
        assert_eq!(ram_open_flags(&s, id, &ram) & 0o3, 0, "{id}'s QEMU holds the snapshot's RAM read-only");
    }

    // A clone's QEMU killed: healed (READY again, a new READY transition), again from the snapshot.
    let ready_since = |v: &Value| -> String {
        let conditions = v["status"]["conditions"].as_array().cloned().unwrap_or_default();
        let ready = conditions.iter().find(|c| c["type"] == "VIRTUAL_MACHINE_CONDITION_TYPE_READY").cloned().unwrap_or_default();
        ready["last_transition_time"].as_str().unwrap_or_default().to_owned()
    };
    let before = ready_since(&get(&s, &t, &ids[0]).await.1["object"]);
    let pid: i32 = std::fs::read_to_string(s.data_dir.join(format!("vms/{}/qemu.pid", ids[0]))).unwrap().trim().parse().unwrap();
    std::process::Command::new("kill").args(["-9", &pid.to_string()]).status().unwrap();
    let healed = vms::wait_until(&s, &t, &ids[0], "READY again", 120, |v| {
        vms::state(v) == "VIRTUAL_MACHINE_STATE_READY" && ready_since(v) != before
    })
    .await;
    assert_eq!(snapshot_of(&serde_json::json!({"object": healed})).as_deref(), Some(key.as_str()), "{healed:#}");

    // A server restart keeps both clones running, as any VM.
    let pids: Vec<String> = ids.iter().map(|id| std::fs::read_to_string(s.data_dir.join(format!("vms/{id}/qemu.pid"))).unwrap()).collect();
    s.kill9().await;
    s.relaunch().await;
    for (id, pid) in ids.iter().zip(&pids) {
        let vm = wait_ready(&s, &t, id).await;
        assert_eq!(&std::fs::read_to_string(s.data_dir.join(format!("vms/{id}/qemu.pid"))).unwrap(), pid, "adopted, not restarted");
        assert_eq!(snapshot_of(&serde_json::json!({"object": vm})).as_deref(), Some(key.as_str()));
    }
    let out = console(&s, &t, "one", &format!("wget -qO- http://{}/ | grep -o 'guest two'", seen[1].3));
    assert!(out.contains("guest two"), "one reaches two over their subnet after the restart: {out}");

    // A changed image: the next VM makes a new snapshot; the old one stays while clones use it.
    let manifest = images.path().join("test-guest/image.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(&manifest, text).unwrap();
    let three = create(&s, &t, "three", keys[0]);
    let (_, vm) = get(&s, &t, &three).await;
    let new_key = snapshot_of(&vm).unwrap_or_else(|| panic!("not restored: {}", boot_of(&vm)));
    assert_ne!(new_key, key, "the changed image's VM is not a clone of the old snapshot");
    assert!(s.data_dir.join("snapshots").join(&key).is_dir(), "kept: clones still map it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_snapshots_a_vm_boots_and_says_so() {
    let s = Server::start_qemu_with(&["--vm-snapshots=false"]).await;
    publish(&s, TINY);
    let t = s.token("acme", false);
    let id = vms::create(&s, &t, "cold", "tiny").await;
    let vm = wait_ready(&s, &t, &id).await;
    let message = boot_of(&serde_json::json!({"object": vm}));
    assert_eq!(message, "the guest answers its readiness probe (cold boot: snapshots are off (--vm-snapshots=false))");
    assert!(!s.data_dir.join("snapshots").exists(), "no snapshot made");
}
