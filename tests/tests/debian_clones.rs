//! Clones of a Debian guest are machines of their own: the Debian image
//! (systemd, cloud-init, OpenSSH) boots, writes a file and is snapshotted
//! online; two clones of the snapshot boot with the file, and each has its
//! own SSH host keys (cloud-init makes them again for a new instance id),
//! machine-id (the qemu backend gives each VM its id as systemd's
//! machine-id), host name, MAC and address; they run on when the source
//! is deleted. Checked over SSH with the tenant's key, on loopback.

use reqwest::Method;
use serde_json::json;
use vmaas_tests::Server;
use vmaas_tests::objects::{created, state, wait_for};
use vmaas_tests::ssh::{keypair, ssh, ssh_once_up};
use vmaas_tests::vms::{V1, publish, wait_until};

const DEBIAN: &str = include_str!("../../examples/templates/debian.yaml");
/// What each guest says of itself.
const IDENTITY: &str = "echo host=$(hostname) mid=$(cat /etc/machine-id) mac=$(cat /sys/class/net/eth0/address) \
     key=$(ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub | cut -d' ' -f2) file=$(cat /var/tmp/kept 2>/dev/null)";

/// Waits until VM `id` is READY; its loopback address.
async fn ready_at(s: &Server, t: &str, id: &str) -> String {
    let vm = wait_until(s, t, id, "READY", 400, |v| vmaas_tests::vms::state(v) == "VIRTUAL_MACHINE_STATE_READY").await;
    vm["status"]["externalIP"].as_str().unwrap().to_owned()
}

/// The value of `key=` in `text`.
fn field<'a>(text: &'a str, key: &str) -> &'a str {
    text.split_whitespace().find_map(|w| w.strip_prefix(&format!("{key}="))).unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clones_of_a_debian_guest_have_their_own_host_keys_and_machine_ids() {
    assert!(
        vmaas_tests::images_dir().join("debian-12/image.json").exists(),
        "build it with scripts/debian-image.sh (scripts/test.sh does)"
    );
    let s = Server::start_qemu().await;
    publish(&s, DEBIAN);
    let t = s.token("acme", false);
    let dir = tempfile::tempdir().unwrap();
    let (key, public) = keypair(dir.path());
    let body = json!({"metadata": {"name": "source"}, "spec": {"template": "debian", "template_parameters": {"vm_ssh_keys": {"value": [public]}}}});
    let src = created(&s, &t, "virtual_machines", body).await;
    let ip = ready_at(&s, &t, &src).await;
    let out = ssh_once_up(&ip, &key, &format!("echo kept-from-the-source | sudo tee /var/tmp/kept >/dev/null; sync; {IDENTITY}")).await;
    let source = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success() && field(&source, "host") == "source", "{source} {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(field(&source, "mid"), src.replace('-', ""), "the VM's id is its machine-id");

    let snap = json!({"metadata": {"name": "golden"}, "spec": {"compute_instance": "source"}});
    let snap = created(&s, &t, "compute_instance_snapshots", snap).await;
    let taken = wait_for(&s, &t, &format!("compute_instance_snapshots/{snap}"), "the snapshot READY", |v| {
        state(v) == "COMPUTE_INSTANCE_SNAPSHOT_STATE_READY"
    })
    .await;
    // This image runs no guest agent: nothing froze its file systems.
    assert_eq!(taken["status"]["consistency"], "SNAPSHOT_CONSISTENCY_CRASH_CONSISTENT", "{taken}");

    // Two clones of the snapshot, the source's template and key.
    let mut ids = Vec::new();
    for name in ["one", "two"] {
        ids.push((
            name,
            created(&s, &t, "virtual_machines", json!({"metadata": {"name": name}, "spec": {"clone_of": {"snapshot": "golden"}}})).await,
        ));
    }
    let mut seen = vec![source.clone()];
    for (name, id) in &ids {
        let ip = ready_at(&s, &t, id).await;
        let out = ssh_once_up(&ip, &key, IDENTITY).await;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{text} {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(field(&text, "file"), "kept-from-the-source", "clone {name} has the source's disk: {text}");
        assert_eq!(field(&text, "host"), *name, "{text}");
        assert_eq!(field(&text, "mid"), id.replace('-', ""), "{text}");
        seen.push(text);
    }
    for key_name in ["mid", "mac", "key"] {
        let values: Vec<&str> = seen.iter().map(|t| field(t, key_name)).collect();
        assert!(values.iter().all(|v| !v.is_empty()), "{key_name}: {values:?}");
        for i in 0..values.len() {
            for j in i + 1..values.len() {
                assert_ne!(values[i], values[j], "{key_name} differs between source and clones: {values:?}");
            }
        }
    }

    // The source goes; both clones answer on.
    let (st, _) = s.raw(Method::DELETE, &format!("{V1}/virtual_machines/{src}"), Some(&t), None).await;
    assert_eq!(st, 202);
    wait_for(&s, &t, &format!("virtual_machines/{src}"), "the source gone", |v| v.is_none()).await;
    for (name, id) in &ids {
        let (_, vm) = s.raw(Method::GET, &format!("{V1}/virtual_machines/{id}"), Some(&t), None).await;
        let ip = vm["object"]["status"]["externalIP"].as_str().unwrap_or_default().to_owned();
        let out = ssh(&ip, &key, "cat /var/tmp/kept");
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "kept-from-the-source", "clone {name} after the source went");
    }
}
