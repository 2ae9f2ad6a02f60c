//! Snapshots of a VM's disks and restores in place, on the qemu backend
//! with real guests: a guest writes a file, an online snapshot is taken
//! (the guest keeps running), the guest deletes the file and writes
//! another, and a restore (stopping the VM for it, paused or running)
//! brings back exactly the first state, checked in the guest. A stopped
//! VM's snapshot is offline; deleting a VM deletes its snapshots unless it
//! asks to keep them; bad input is a 400 or 409 naming the field, leaving
//! nothing half-made.

use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::Server;
use vmaas_tests::objects::{created, state, wait_for};
use vmaas_tests::vms::{TINY, V1, console, publish, wait_ready, wait_until};

/// Takes snapshot `name` of VM `vm` and waits until it is READY.
async fn snapshot(s: &Server, t: &str, name: &str, vm: &str) -> Value {
    let id = created(s, t, "compute_instance_snapshots", json!({"metadata": {"name": name}, "spec": {"compute_instance": vm}})).await;
    wait_for(s, t, &format!("compute_instance_snapshots/{id}"), "the snapshot READY", |v| {
        let st = state(v);
        assert_ne!(st, "COMPUTE_INSTANCE_SNAPSHOT_STATE_FAILED", "{v:?}");
        st == "COMPUTE_INSTANCE_SNAPSHOT_STATE_READY"
    })
    .await
}

/// Runs `cmd` in VM `vm`'s guest and returns what the console printed.
fn run(s: &Server, t: &str, vm: &str, cmd: &str) -> String {
    console(s, t, vm, cmd)
}

async fn restore(s: &Server, t: &str, vm: &str, body: Value) -> (u16, Value) {
    s.raw(Method::POST, &format!("{V1}/virtual_machines/{vm}/restore"), Some(t), Some(body)).await
}

#[tokio::test(flavor = "multi_thread")]
async fn an_online_snapshot_restores_the_guest_to_exactly_its_first_state() {
    let s = Server::start_qemu().await;
    publish(&s, TINY);
    let t = s.token("acme", false);
    let vm = created(&s, &t, "virtual_machines", json!({"metadata": {"name": "box"}, "spec": {"template": "tiny"}})).await;
    wait_ready(&s, &t, &vm).await;
    let text = run(&s, &t, "box", "echo first-state > /data/state; sync; echo \"HAS=$(cat /data/state)\"");
    assert!(text.contains("HAS=first-state"), "the guest could not write its disk:\n{text}");

    // Online: the guest runs on, the status says how it was taken: its
    // agent froze /data for the instant and thawed it after.
    let snap = snapshot(&s, &t, "before", "box").await;
    assert_eq!(snap["status"]["online"], true, "{snap}");
    assert_eq!(snap["status"]["consistency"], "SNAPSHOT_CONSISTENCY_FILESYSTEM_FROZEN", "{snap}");
    let log = String::from_utf8_lossy(&s.cli(&t, &["vm", "logs", "box"]).stdout).into_owned();
    assert!(log.contains("agent froze 1 file systems") && log.contains("agent thawed 1 file systems"), "{log}");
    assert!(snap["status"]["size_bytes"].as_u64().unwrap_or(0) > 0, "{snap}");
    assert!(snap["status"]["taken_at"].is_string(), "{snap}");
    let disks: Vec<&str> = snap["status"]["disks"].as_array().unwrap().iter().filter_map(|d| d["name"].as_str()).collect();
    assert!(!disks.is_empty(), "{snap}");
    let snap_id = snap["id"].as_str().unwrap().to_owned();
    assert!(s.data_dir.join("disk-snapshots").join(&snap_id).join("snapshot.json").exists());
    let (_, got) = s.raw(Method::GET, &format!("{V1}/virtual_machines/{vm}"), Some(&t), None).await;
    assert_eq!(got["object"]["status"]["state"], "VIRTUAL_MACHINE_STATE_READY", "the guest kept running: {got}");

    let text = run(&s, &t, "box", "rm /data/state; echo second > /data/other; sync; ls /data; echo CHANGED");
    assert!(text.contains("CHANGED"), "{text}");

    // A running VM is not restored unless the request says it may be stopped.
    let (st, body) = restore(&s, &t, &vm, json!({"snapshot": "before"})).await;
    assert_eq!(st, 409, "{body}");
    assert!(body["message"].as_str().unwrap_or("").contains("\"stop\": true"), "{body}");
    let (st, body) = restore(&s, &t, &vm, json!({"snapshot": "nothing-of-that-name", "stop": true})).await;
    assert_eq!(st, 400, "{body}");
    assert_eq!(body["details"][0]["field"], "snapshot", "{body}");

    // Paused, it is refused the same way, and told it comes back started.
    let path = format!("{V1}/virtual_machines/{vm}");
    let (st, body) = s.raw(Method::PATCH, &path, Some(&t), Some(json!({"object": {"spec": {"state": "paused"}}}))).await;
    assert_eq!(st, 200, "{body}");
    wait_until(&s, &t, &vm, "PAUSED", 60, |v| state(Some(v)) == "VIRTUAL_MACHINE_STATE_PAUSED").await;
    let (st, body) = restore(&s, &t, &vm, json!({"snapshot": "before"})).await;
    let message = body["message"].as_str().unwrap_or("");
    assert!(st == 409 && message.contains("is paused") && message.contains("comes back started"), "{st} {body}");

    // The restore: stopped for it (paused, its memory is let go), the disks
    // back, running again.
    let (st, body) = restore(&s, &t, &vm, json!({"snapshot": "before", "stop": true})).await;
    assert_eq!((st, &body["object"]["spec"]["state"]), (202, &json!("started")), "{body}");
    assert_eq!(body["object"]["status"]["state"], "VIRTUAL_MACHINE_STATE_PROGRESSING", "{body}");
    wait_ready(&s, &t, &vm).await;
    let text =
        run(&s, &t, "box", "echo \"STATE=$(cat /data/state 2>/dev/null)\"; [ -e /data/other ] && echo OTHER-THERE || echo OTHER-GONE");
    assert!(text.contains("STATE=first-state"), "the restored guest lacks the file of the snapshot:\n{text}");
    assert!(text.contains("OTHER-GONE"), "the restored guest still has the file written after the snapshot:\n{text}");
    assert!(s.log().contains("virtual machine restored from a snapshot"), "{}", s.log());

    // Deleting the VM deletes its snapshot, files and all.
    let (st, _) = s.raw(Method::DELETE, &format!("{V1}/virtual_machines/{vm}"), Some(&t), None).await;
    assert_eq!(st, 202);
    wait_for(&s, &t, &format!("compute_instance_snapshots/{snap_id}"), "the snapshot gone with its VM", |v| v.is_none()).await;
    assert!(!s.data_dir.join("disk-snapshots").join(&snap_id).exists(), "the snapshot's files stayed");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stopped_vm_is_snapshotted_offline_and_kept_if_asked_and_bad_input_names_the_field() {
    let s = Server::start_qemu().await;
    publish(&s, TINY);
    let t = s.token("acme", false);
    let other = s.token("globex", false);
    let vm = created(&s, &t, "virtual_machines", json!({"metadata": {"name": "cold"}, "spec": {"template": "tiny"}})).await;
    wait_ready(&s, &t, &vm).await;
    let stop = json!({"object": {"spec": {"state": "stopped"}}});
    let (st, _) = s.raw(Method::PATCH, &format!("{V1}/virtual_machines/{vm}"), Some(&t), Some(stop)).await;
    assert_eq!(st, 200);
    wait_until(&s, &t, &vm, "STOPPED", 60, |v| state(Some(v)) == "VIRTUAL_MACHINE_STATE_STOPPED").await;

    // Its bytes count against the tenant's disk quota.
    let (admin, quota) = (s.token("ops", true), format!("{V1}/tenants/acme/quota"));
    let limit = |disk: String| json!({"object": {"spec": {"disk": disk}}});
    assert_eq!(s.raw(Method::PUT, &quota, Some(&admin), Some(limit("1Ti".into()))).await.0, 200);
    let disk_used = || async {
        let (_, q) = s.raw(Method::GET, &quota, Some(&t), None).await;
        let used = q["object"]["status"]["usage"]["disk"].as_str().unwrap_or_else(|| panic!("{q}")).to_owned();
        used.parse::<vmaas_model::Quantity>().unwrap().to_units_ceil().unwrap()
    };
    let before = disk_used().await;
    let snap = snapshot(&s, &t, "at-rest", "cold").await;
    assert_eq!(snap["status"]["online"], false, "{snap}");
    assert_eq!(snap["status"]["consistency"], "SNAPSHOT_CONSISTENCY_STOPPED", "{snap}");
    let snap_id = snap["id"].as_str().unwrap().to_owned();
    let bytes = snap["status"]["size_bytes"].as_u64().unwrap();
    assert!(bytes > 0, "{snap}");
    let after = disk_used().await;
    assert_eq!(after, before + bytes, "the snapshot's {bytes} bytes count against the disk quota");
    // A tenant whose disk quota is used up takes no more snapshots.
    assert_eq!(s.raw(Method::PUT, &quota, Some(&admin), Some(limit(after.to_string()))).await.0, 200);
    let body = json!({"object": {"metadata": {"name": "one-more"}, "spec": {"compute_instance": "cold"}}});
    let (st, e) = s.raw(Method::POST, &format!("{V1}/compute_instance_snapshots"), Some(&t), Some(body)).await;
    assert_eq!(st, 429, "{e}");
    assert!(e.to_string().contains("quota.disk"), "{e}");
    assert_eq!(s.raw(Method::DELETE, &quota, Some(&admin), None).await.0 / 100, 2);

    // Another tenant neither sees it nor snapshots the VM.
    let (st, _) = s.raw(Method::GET, &format!("{V1}/compute_instance_snapshots/{snap_id}"), Some(&other), None).await;
    assert_eq!(st, 404);
    let body = json!({"object": {"metadata": {"name": "theirs"}, "spec": {"compute_instance": vm}}});
    let (st, e) = s.raw(Method::POST, &format!("{V1}/compute_instance_snapshots"), Some(&other), Some(body)).await;
    assert_eq!((st, e["details"][0]["field"].as_str()), (400, Some("object.spec.compute_instance")), "{e}");
    // A taken name is a 409, and nothing else is made.
    let body = json!({"object": {"metadata": {"name": "at-rest"}, "spec": {"compute_instance": "cold"}}});
    let (st, e) = s.raw(Method::POST, &format!("{V1}/compute_instance_snapshots"), Some(&t), Some(body)).await;
    assert_eq!(st, 409, "{e}");
    let (_, list) = s.raw(Method::GET, &format!("{V1}/compute_instance_snapshots"), Some(&t), None).await;
    assert_eq!(list["total"], 1, "{list}");

    // A stopped VM is restored without `stop`, and stays stopped.
    let (st, body) = restore(&s, &t, &vm, json!({"snapshot": snap_id})).await;
    assert_eq!(st, 202, "{body}");
    assert_eq!(body["object"]["status"]["state"], "VIRTUAL_MACHINE_STATE_STOPPED", "{body}");

    // Deleted keeping its snapshots: the snapshot outlives the VM.
    let (st, _) = s.raw(Method::DELETE, &format!("{V1}/virtual_machines/{vm}?retain_snapshots=true"), Some(&t), None).await;
    assert_eq!(st, 202);
    // A VM being deleted is not snapshotted.
    let body = json!({"object": {"metadata": {"name": "too-late"}, "spec": {"compute_instance": vm}}});
    let (st, e) = s.raw(Method::POST, &format!("{V1}/compute_instance_snapshots"), Some(&t), Some(body)).await;
    assert_eq!((st, e["details"][0]["field"].as_str()), (400, Some("object.spec.compute_instance")), "{e}");
    wait_for(&s, &t, &format!("virtual_machines/{vm}"), "the VM gone", |v| v.is_none()).await;
    let (st, kept) = s.raw(Method::GET, &format!("{V1}/compute_instance_snapshots/{snap_id}"), Some(&t), None).await;
    assert_eq!((st, state(Some(&kept["object"]))), (200, "COMPUTE_INSTANCE_SNAPSHOT_STATE_READY"), "{kept}");
    assert!(s.data_dir.join("disk-snapshots").join(&snap_id).join("snapshot.json").exists());

    // Deleted by itself: gone, files and all.
    let (st, _) = s.raw(Method::DELETE, &format!("{V1}/compute_instance_snapshots/{snap_id}"), Some(&t), None).await;
    assert_eq!(st, 202);
    wait_for(&s, &t, &format!("compute_instance_snapshots/{snap_id}"), "the snapshot gone", |v| v.is_none()).await;
    assert!(!s.data_dir.join("disk-snapshots").join(&snap_id).exists());
}

const SNAPSHOT_TF: &str = r#"
terraform {
  required_providers {
    vmaas = { source = "vmaas/vmaas" }
  }
}
provider "vmaas" {}

resource "vmaas_virtual_machine" "vm" {
  name     = "app"
  template = "tiny"
}

resource "vmaas_snapshot" "before_upgrade" {
  name             = "before-upgrade"
  compute_instance = vmaas_virtual_machine.vm.id
}

resource "vmaas_virtual_machine" "copy" {
  name              = "copy"
  template          = "tiny"
  clone_of_snapshot = vmaas_snapshot.before_upgrade.id
}

output "snapshot" {
  value = vmaas_snapshot.before_upgrade.id
}

output "copy" {
  value = vmaas_virtual_machine.copy.id
}

output "online" {
  value = vmaas_snapshot.before_upgrade.online
}

output "size_bytes" {
  value = vmaas_snapshot.before_upgrade.size_bytes
}
"#;

/// `vmaas_snapshot` of a running VM and a VM cloned from it: apply waits
/// until the snapshot is taken (the state has its size and that it was
/// online) and the clone is READY, a re-plan changes nothing, and destroy
/// removes them, the snapshot's files too.
async fn terraform_snapshot_scenario(tf: vmaas_tests::tf::Tf) {
    let s = Server::start_qemu().await;
    publish(&s, TINY);
    let t = s.token("ci", false);
    let w = vmaas_tests::tf::Workspace::new(tf, &s, &t, SNAPSHOT_TF);
    w.apply(&[]);
    let id = w.output("snapshot");
    assert_eq!(w.output("online"), "true");
    assert!(w.output("size_bytes").parse::<u64>().unwrap() > 0);
    let (_, snap) = s.raw(Method::GET, &format!("{V1}/compute_instance_snapshots/{id}"), Some(&t), None).await;
    assert_eq!(state(Some(&snap["object"])), "COMPUTE_INSTANCE_SNAPSHOT_STATE_READY", "{snap}");
    let (_, copy) = s.raw(Method::GET, &format!("{V1}/virtual_machines/{}", w.output("copy")), Some(&t), None).await;
    assert_eq!(copy["object"]["status"]["state"], "VIRTUAL_MACHINE_STATE_READY", "{copy}");
    assert_eq!(copy["object"]["spec"]["clone_of"]["snapshot"], id.as_str(), "{copy}");
    assert!(s.log().contains("clone made from a snapshot"), "{}", s.log());
    assert_eq!(w.plan_code(&[]).0, 0, "no drift");
    w.ok(&["destroy", "-auto-approve", "-no-color"]);
    let (st, _) = s.raw(Method::GET, &format!("{V1}/compute_instance_snapshots/{id}"), Some(&t), None).await;
    assert_eq!(st, 404);
    assert!(!s.data_dir.join("disk-snapshots").join(&id).exists(), "its files went with it");
}

vmaas_tests::on_every_terraform!(terraform_snapshot_scenario: snapshot_tofu, snapshot_terraform_1_0_3, snapshot_terraform_1_15_5);

/// What a guest says of itself: its host name, first MAC and cloud-init instance id, and the file.
fn identity(s: &Server, t: &str, vm: &str) -> (String, String, String, String) {
    let text = run(
        s,
        t,
        vm,
        "echo \"ID=$(hostname)|$(cat /sys/class/net/eth0/address)|$(grep -o 'instance-id.*' /run/cidata/meta-data)|$(cat /data/state)|\"",
    );
    let line = text.lines().rev().find_map(|l| l.trim().strip_prefix("ID=")).unwrap_or_else(|| panic!("no identity:\n{text}"));
    let f: Vec<&str> = line.split('|').collect();
    assert!(f.len() >= 4, "{line}");
    (f[0].to_owned(), f[1].to_owned(), f[2].to_owned(), f[3].to_owned())
}

#[tokio::test(flavor = "multi_thread")]
async fn clones_of_a_snapshot_and_of_a_running_vm_have_its_disks_and_their_own_identity() {
    let s = Server::start_qemu().await;
    publish(&s, TINY);
    let t = s.token("acme", false);
    let src = created(&s, &t, "virtual_machines", json!({"metadata": {"name": "source"}, "spec": {"template": "tiny"}})).await;
    wait_ready(&s, &t, &src).await;
    let text = run(&s, &t, "source", "echo from-the-source > /data/state; sync; echo W=$((2+2))");
    assert!(text.contains("W=4"), "{text}");
    let snap = snapshot(&s, &t, "golden", "source").await;
    let snap_id = snap["id"].as_str().unwrap().to_owned();

    // Two clones of the snapshot (no template given: the source's), one of the running VM.
    let mut clones = Vec::new();
    for (name, of) in
        [("one", json!({"snapshot": "golden"})), ("two", json!({"snapshot": snap_id})), ("live", json!({"compute_instance": "source"}))]
    {
        let id = created(&s, &t, "virtual_machines", json!({"metadata": {"name": name}, "spec": {"clone_of": of}})).await;
        clones.push((name, id));
    }
    let mut seen = Vec::new();
    for (name, id) in &clones {
        let vm = wait_ready(&s, &t, id).await;
        assert_eq!(vm["spec"]["template"], "tiny", "the source's template: {vm}");
        let clone_of = &vm["spec"]["clone_of"];
        assert!(clone_of["snapshot"] == snap_id.as_str() || clone_of["compute_instance"] == src.as_str(), "stored as ids: {vm}");
        let (host, mac, instance, file) = identity(&s, &t, name);
        assert_eq!(file, "from-the-source", "clone {name} lacks the source's disk");
        assert_eq!(host, *name);
        seen.push((mac, instance, vm["status"]["externalIP"].as_str().unwrap_or_default().to_owned()));
    }
    for i in 0..seen.len() {
        for j in i + 1..seen.len() {
            assert_ne!(seen[i].0, seen[j].0, "MACs differ: {seen:?}");
            assert_ne!(seen[i].1, seen[j].1, "cloud-init instance ids differ: {seen:?}");
            assert_ne!(seen[i].2, seen[j].2, "addresses differ: {seen:?}");
        }
    }

    // The source goes (its snapshot with it, as none is in use); the clones run on.
    let (st, _) = s.raw(Method::DELETE, &format!("{V1}/virtual_machines/{src}"), Some(&t), None).await;
    assert_eq!(st, 202);
    wait_for(&s, &t, &format!("virtual_machines/{src}"), "the source gone", |v| v.is_none()).await;
    for (name, id) in &clones {
        let (_, vm) = s.raw(Method::GET, &format!("{V1}/virtual_machines/{id}"), Some(&t), None).await;
        assert_eq!(vm["object"]["status"]["state"], "VIRTUAL_MACHINE_STATE_READY", "{vm}");
        assert_eq!(identity(&s, &t, name).3, "from-the-source");
    }

    // Bad sources name the field and make nothing.
    for (of, field) in [
        (json!({"snapshot": "no-such"}), "object.spec.clone_of.snapshot"),
        (json!({"compute_instance": "no-such"}), "object.spec.clone_of.compute_instance"),
        (json!({}), "object.spec.clone_of"),
        (json!({"snapshot": "a", "compute_instance": "b"}), "object.spec.clone_of"),
    ] {
        let body = json!({"object": {"metadata": {"name": "bad"}, "spec": {"clone_of": of}}});
        let (st, e) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(body)).await;
        assert_eq!((st, e["details"][0]["field"].as_str()), (400, Some(field)), "{e}");
    }
    let body = json!({"object": {"metadata": {"name": "one"}, "spec": {"clone_of": {"compute_instance": "two"}}}});
    let (st, e) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(body)).await;
    assert_eq!(st, 409, "a clone into a taken name: {e}");
    let (_, list) = s.raw(Method::GET, &format!("{V1}/virtual_machines"), Some(&t), None).await;
    assert_eq!(list["total"], 3, "{list}");
}

const PICK: &str = "id: pick\nparameters:\n  - {name: vm_image, type: string, default: {value: test-guest}}\nspec_defaults:\n  memory: 256Mi\n  exposed_ports:\n    - { port: 80, protocol: tcp }\n  readiness_probe:\n    http: { port: 80, path: / }\n    timeout_seconds: 180\n";

/// The guest command printing the 32 bytes at 32 MiB into its boot disk.
const READ_MARK: &str = "echo \"MARK=$(dd if=/dev/vda bs=512 skip=65536 count=1 2>/dev/null | head -c 32)|\"";

/// A VM of `pick` booting image `image` by BIOS, READY.
async fn booted(s: &Server, t: &str, name: &str, image: &str) -> String {
    let spec = json!({"template": "pick", "template_parameters": {"vm_image": {"value": image}}});
    let id = created(s, t, "virtual_machines", json!({"metadata": {"name": name}, "spec": spec})).await;
    wait_ready(s, t, &id).await;
    id
}

#[tokio::test(flavor = "multi_thread")]
async fn an_exported_disk_imports_again_and_boots_to_the_same_content() {
    let s = Server::start_qemu().await;
    publish(&s, PICK);
    let t = s.token("acme", false);
    let bios = vmaas_tests::images_dir().join("test-guest/bios.qcow2");
    let out = s.cli(&t, &["image", "import", "bios", bios.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let vm = booted(&s, &t, "orig", "bios").await;
    let mark = "exported-with-its-disk-0123456789";
    let text =
        run(&s, &t, "orig", &format!("printf '{mark}' | dd of=/dev/vda bs=512 seek=65536 conv=notrunc 2>/dev/null; sync; {READ_MARK}"));
    assert!(text.contains(&format!("MARK={}|", &mark[..32])), "the guest could not write its disk:\n{text}");

    // A running VM's disk is not exported.
    let (st, e) = s.raw(Method::GET, &format!("{V1}/virtual_machines/{vm}/export"), Some(&t), None).await;
    assert_eq!((st, e["details"][0]["field"].as_str()), (400, Some("spec.state")), "{e}");
    let stop = json!({"object": {"spec": {"state": "stopped"}}});
    let (st, _) = s.raw(Method::PATCH, &format!("{V1}/virtual_machines/{vm}"), Some(&t), Some(stop)).await;
    assert_eq!(st, 200);
    wait_until(&s, &t, &vm, "STOPPED", 60, |v| state(Some(v)) == "VIRTUAL_MACHINE_STATE_STOPPED").await;
    grow_by_128_mib(&s.data_dir.join("vms").join(&vm).join("disk.qcow2"));

    // Exported through the CLI: one qcow2 file, no backing file, its SHA-256 checked.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("orig.qcow2");
    let out = s.cli(&t, &["vm", "export", "orig", "-f", file.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{said}");
    let info = std::process::Command::new("qemu-img").args(["info", "--output=json"]).arg(&file).output().unwrap();
    let info: Value = serde_json::from_slice(&info.stdout).unwrap();
    assert_eq!(info["format"], "qcow2", "{info}");
    assert!(info.get("backing-filename").is_none(), "self-contained: {info}");
    let sum = std::process::Command::new("sha256sum").arg(&file).output().unwrap();
    let sum = String::from_utf8_lossy(&sum.stdout).split_whitespace().next().unwrap_or_default().to_owned();
    assert!(said.contains(&sum), "the CLI reports the file's SHA-256 {sum}: {said}");
    assert!(!s.data_dir.join("exports").read_dir().map(|mut d| d.next().is_some()).unwrap_or(false), "no file was made for it");
    crc32_checked(&s, &t, &vm, &file).await;

    // An export under way (its disk read in place) keeps the VM from
    // booting until it ends.
    let url = format!("{}{V1}/virtual_machines/{vm}/export", s.endpoint);
    let held = reqwest::Client::new().get(url).header("te", "trailers").bearer_auth(&t).send().await.unwrap();
    assert_eq!(held.status(), 200);
    let start = json!({"object": {"spec": {"state": "started"}}});
    let (st, e) = s.raw(Method::PATCH, &format!("{V1}/virtual_machines/{vm}"), Some(&t), Some(start)).await;
    assert_eq!(st, 200, "{e}");
    let waiting = wait_until(&s, &t, &vm, "waiting for its export", 30, |v| v.to_string().contains("DiskExported")).await;
    assert_ne!(state(Some(&waiting)), "VIRTUAL_MACHINE_STATE_RUNNING", "{waiting}");
    drop(held);

    // Imported again, it boots to the same content; the first boots too.
    let out = s.cli(&t, &["image", "import", "copy", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    booted(&s, &t, "again", "copy").await;
    let text = run(&s, &t, "again", READ_MARK);
    assert!(text.contains(&format!("MARK={}|", &mark[..32])), "the re-imported disk lacks what the guest wrote:\n{text}");
    wait_ready(&s, &t, &vm).await;
}

/// The stopped VM `vm`'s export, `file` already, asked with CRC-32 as its
/// checksum: through the CLI (after the body) the same bytes, the CRC-32
/// reported; asked directly (before the body) `X-Checksum-Crc32` says the
/// same; a checksum there is none of is refused naming the parameter.
async fn crc32_checked(s: &Server, t: &str, vm: &str, file: &std::path::Path) {
    let mut h = crc32fast::Hasher::new();
    let mut f = std::fs::File::open(file).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    while let n @ 1.. = std::io::Read::read(&mut f, &mut buf).unwrap() {
        h.update(&buf[..n]);
    }
    let crc = format!("{:08x}", h.finalize());
    let again = file.with_extension("crc32.qcow2");
    let out = s.cli(t, &["vm", "export", "orig", "--checksum", "crc32", "-f", again.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{said}");
    assert!(said.contains(&format!("CRC-32 {crc}")), "the CLI reports the CRC-32 {crc}: {said}");
    let same = std::process::Command::new("cmp").arg("-s").arg(file).arg(&again).status().unwrap();
    assert!(same.success(), "the same bytes whichever checksum");
    std::fs::remove_file(&again).unwrap();
    let url = format!("{}{V1}/virtual_machines/{vm}/export?checksum=crc32", s.endpoint);
    let mut rsp = reqwest::Client::new().get(url).bearer_auth(t).send().await.unwrap();
    assert_eq!(rsp.status(), 200);
    let before = rsp.headers().get("x-checksum-crc32").and_then(|v| v.to_str().ok()).map(str::to_owned);
    assert!(rsp.headers().get("x-checksum-sha256").is_none(), "one checksum, the one asked for");
    let mut h = crc32fast::Hasher::new();
    while let Some(chunk) = rsp.chunk().await.unwrap() {
        h.update(&chunk);
    }
    assert_eq!((before.as_deref(), format!("{:08x}", h.finalize())), (Some(crc.as_str()), crc.clone()));
    let url = format!("{}{V1}/virtual_machines/{vm}/export?checksum=crc32", s.endpoint);
    let mut rsp = reqwest::Client::new().get(url).bearer_auth(t).header("te", "trailers").send().await.unwrap();
    let trailer = rsp.headers().get("trailer").and_then(|v| v.to_str().ok()).map(str::to_owned);
    assert_eq!(trailer.as_deref(), Some("x-checksum-crc32"), "the trailer to come is announced, and only it");
    while rsp.chunk().await.unwrap().is_some() {}
    let (st, e) = s.raw(Method::GET, &format!("{V1}/virtual_machines/{vm}/export?checksum=md5"), Some(t), None).await;
    assert_eq!((st, e["details"][0]["field"].as_str()), (400, Some("checksum")), "{e}");
}

/// Grows the qcow2 file `disk` (of a stopped VM) by 128 MiB, written
/// with a pattern: an export of it is then far more than every buffer
/// between the server and a client that holds it unread.
fn grow_by_128_mib(disk: &std::path::Path) {
    let info = std::process::Command::new("qemu-img").args(["info", "--output=json"]).arg(disk).output().unwrap();
    let end = serde_json::from_slice::<Value>(&info.stdout).unwrap()["virtual-size"].as_u64().unwrap();
    let st = std::process::Command::new("qemu-img").arg("resize").arg(disk).arg("+128M").status().unwrap();
    assert!(st.success());
    let write = format!("write -q -P 0x5a {end} 128M");
    let st = std::process::Command::new("qemu-io").args(["-f", "qcow2", "-c", &write]).arg(disk).status().unwrap();
    assert!(st.success());
}

/// Whether the ext4 file system in qcow2 `file` (and its backing chain)
/// is consistent as a boot finds it after a power cut: its journal
/// replayed and the safe repairs of a preening fsck made (`e2fsck -p`:
/// orphans, blocks past a file's end, as the kernel's own recovery would),
/// then a full read-only check finds nothing; e2fsck's words when not.
fn clean_after_replay(file: &std::path::Path) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("disk.raw");
    let st = std::process::Command::new("qemu-img").args(["convert", "-U", "-O", "raw"]).arg(file).arg(&raw).status().unwrap();
    assert!(st.success());
    let words = |o: &std::process::Output| format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    let preen = std::process::Command::new("e2fsck").args(["-fp"]).arg(&raw).output().expect("e2fsck (e2fsprogs)");
    // 0: clean, 1: safe repairs made; 4 and above: what a boot would stop at.
    if preen.status.code().unwrap_or(8) >= 4 {
        return Err(format!("e2fsck -p (as at boot) left errors:\n{}", words(&preen)));
    }
    let fsck = std::process::Command::new("e2fsck").args(["-fn"]).arg(&raw).output().unwrap();
    if fsck.status.success() { Ok(()) } else { Err(format!("after e2fsck -p:\n{}", words(&fsck))) }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_online_snapshot_of_a_busy_guest_restores_to_a_clean_file_system() {
    let s = Server::start_qemu().await;
    publish(&s, TINY);
    let t = s.token("acme", false);
    let vm = created(&s, &t, "virtual_machines", json!({"metadata": {"name": "busy"}, "spec": {"template": "tiny"}})).await;
    wait_ready(&s, &t, &vm).await;
    // A bounded writer, busy while the snapshot is taken.
    let writer = "(i=0; while [ $i -lt 3000 ]; do dd if=/dev/urandom of=/data/f$((i%8)) bs=4k count=32 2>/dev/null; i=$((i+1)); done) & echo STARTED-$((3+4))";
    let text = run(&s, &t, "busy", writer);
    assert!(text.contains("STARTED-7"), "{text}");
    let snap = snapshot(&s, &t, "mid-write", "busy").await;
    assert_eq!(snap["status"]["online"], true, "{snap}");

    // The snapshot's disk, as taken mid-write: what a power cut leaves, which
    // a boot's fsck takes without stopping.
    let id = snap["id"].as_str().unwrap();
    let disk = snap["status"]["disks"][0]["name"].as_str().unwrap().replace(':', "-");
    let file = s.data_dir.join("disk-snapshots").join(id).join(format!("{disk}.qcow2"));
    if let Err(words) = clean_after_replay(&file) {
        panic!("the snapshot of a busy guest is not crash-consistent:\n{words}");
    }

    // Restored, the guest mounts it (replaying the journal) and reads its files.
    let (st, body) = restore(&s, &t, &vm, json!({"snapshot": "mid-write", "stop": true})).await;
    assert_eq!(st, 202, "{body}");
    wait_ready(&s, &t, &vm).await;
    let text = run(&s, &t, "busy", "cat /data/f* >/dev/null && ls /data | grep -c '^f' | sed 's/^/FILES=/'");
    assert!(text.contains("FILES="), "the restored guest reads its files:\n{text}");
}

/// The project's own gRPC service for snapshots, driven by a Python client
/// generated from `proto/vmaas/v1/snapshots.proto` (`tests/osac/snapshots_client.py`).
#[tokio::test(flavor = "multi_thread")]
async fn snapshots_over_grpc_from_a_generated_client() {
    let s = Server::start_qemu().await;
    publish(&s, TINY);
    let (t, other) = (s.token("acme", false), s.token("globex", false));
    let vm = created(&s, &t, "virtual_machines", json!({"metadata": {"name": "rpc"}, "spec": {"template": "tiny"}})).await;
    wait_ready(&s, &t, &vm).await;
    let out = tokio::process::Command::new(vmaas_tests::tf::python())
        .arg(vmaas_tests::tf::repo().join("tests/osac/snapshots_client.py"))
        .args(["--grpc", s.endpoint.trim_start_matches("http://"), "--token", &t, "--other-token", &other, "--vm", "rpc"])
        .arg("--repo")
        .arg(vmaas_tests::tf::repo())
        .output()
        .await
        .expect("run the client");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the gRPC client failed:\n{stdout}\n{stderr}{}\n{}", vmaas_tests::scratch::SERVER_LOG, s.log());
    for step in
        ["READY over gRPC", "listed with a CEL filter", "NOT_FOUND", "FAILED_PRECONDITION", "restore with stop requested", "deleted"]
    {
        assert!(stdout.contains(step), "missing step {step:?}:\n{stdout}");
    }
    wait_ready(&s, &t, &vm).await;
}
