//! Guests configured as asked: the qemu backend hands every guest its
//! cloud-init NoCloud seed (host name, SSH keys, user data, network), the
//! test guest applies it, and the Debian image runs cloud-init from it.

use std::process::Command;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::Server;
use vmaas_tests::ssh::{keypair, ssh, ssh_once_up};
use vmaas_tests::vms::{V1, console_log_with, publish, state, wait_ready, wait_until};

const TINY: &str = include_str!("../../examples/templates/tiny.yaml");
const DEBIAN: &str = include_str!("../../examples/templates/debian.yaml");

/// Creates VM `name` from `template` with `params`; the VM's id.
async fn create_with(s: &Server, token: &str, name: &str, template: &str, params: Value) -> String {
    let body = json!({"object": {"metadata": {"name": name}, "spec": {"template": template, "template_parameters": params}}});
    let (st, vm) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(token), Some(body)).await;
    assert_eq!(st, 201, "{vm}");
    vm["object"]["id"].as_str().unwrap().to_owned()
}

/// Types `input` on the VM's console and returns what it printed.
fn console(s: &Server, token: &str, vm: &str, input: &str) -> String {
    let out = s.cli_with_stdin(token, &["vm", "console", vm, "--batch", "--idle", "3s"], input.as_bytes());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_test_guest_takes_its_name_and_keys_from_the_seed() {
    let s = Server::start_qemu().await;
    publish(&s, TINY);
    let t = s.token("acme", false);
    let keys = ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOne one@acme", "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQTwo two@acme"];
    let id = create_with(&s, &t, "seeded", "tiny", json!({"vm_ssh_keys": {"value": keys}})).await;
    wait_ready(&s, &t, &id).await;
    // The host name comes only from the seed (the kernel command line no
    // longer names the VM), and the keys are written as cloud-init would.
    let text = console(&s, &t, "seeded", "\necho name=$(hostname); cat /root/.ssh/authorized_keys; echo keys-done\n");
    assert!(text.contains("name=seeded"), "{text}");
    for k in keys {
        assert!(text.contains(k), "{k} in {text}");
    }
    let log = String::from_utf8_lossy(&s.cli(&t, &["vm", "logs", "seeded"]).stdout).into_owned();
    assert!(log.contains("cloud-init seed on /dev/vd") && log.contains("2 ssh keys"), "{log}");
    // The seed is a file of the VM, read-only to QEMU, gone with the VM.
    let seed = s.data_dir.join("vms").join(&id).join("cidata.img");
    assert!(seed.exists(), "{}", seed.display());

    // A key that is not one, or user data too large: 400 naming the parameter; nothing made.
    for (params, field, reason) in [
        (json!({"vm_ssh_keys": {"value": ["ssh-ed25519 AAAAC3Nz ok", "password123"]}}), "vm_ssh_keys", "item 1 must start with a key type"),
        (json!({"vm_ssh_keys": {"value": ["ssh-ed25519 AAAA\nrm -rf /"]}}), "vm_ssh_keys", "one line"),
    ] {
        let body = json!({"object": {"metadata": {"name": "bad"}, "spec": {"template": "tiny", "template_parameters": params}}});
        let (st, err) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(body)).await;
        assert_eq!(st, 400, "{err}");
        let text = err.to_string();
        assert!(text.contains(field) && text.contains(reason), "{text}");
    }
    // OSAC's spec fields, bad: 400 naming them.
    let body = json!({"object": {"metadata": {"name": "bad"}, "spec": {"template": "tiny", "ssh_public_key": "ssh-ed25519 AAAAC3Nz ok\nnot-a-key", "user_data": "a\u{0}b"}}});
    let (st, err) = s.raw(Method::POST, &format!("{V1}/virtual_machines"), Some(&t), Some(body)).await;
    assert_eq!(st, 400, "{err}");
    let text = err.to_string();
    assert!(text.contains("object.spec.ssh_public_key") && text.contains("key 2 must start with a key type"), "{text}");
    assert!(text.contains("object.spec.user_data") && text.contains("NUL"), "{text}");
    let (_, list) = s.raw(Method::GET, &format!("{V1}/virtual_machines"), Some(&t), None).await;
    assert_eq!(list["items"].as_array().unwrap().len(), 1, "{list}");

    // The CLI: --ssh-key takes a key or a file of keys, --user-data a file;
    // they join the template's keys (OSAC's `ssh_public_key`, `user_data`).
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("keys.pub");
    std::fs::write(&file, format!("# mine\n{}\n", keys[1])).unwrap();
    let data = dir.path().join("user-data");
    std::fs::write(&data, "#cloud-config\n").unwrap();
    let out = s.cli(
        &t,
        &[
            "vm",
            "create",
            "cli",
            "-t",
            "tiny",
            "-p",
            &format!("vm_ssh_keys={}", keys[0]),
            "--ssh-key",
            file.to_str().unwrap(),
            "--ssh-key",
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIThree three@acme",
            "--user-data",
            data.to_str().unwrap(),
            "--wait",
        ],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let vm = s.cli_json(&t, &["vm", "get", "cli"]);
    assert_eq!(vm["spec"]["ssh_public_key"], format!("{}\nssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIThree three@acme", keys[1]), "{vm}");
    assert_eq!(vm["spec"]["user_data"], "#cloud-config\n");
    let text = console(&s, &t, "cli", "\ncat /root/.ssh/authorized_keys; echo keys-done\n");
    for k in [keys[0], keys[1], "three@acme"] {
        assert!(text.contains(k), "{k} in {text}");
    }
}

/// The Debian image boots from a copy-on-write overlay of its base disk, and
/// cloud-init applies the seed: the tenant's key opens SSH on the VM's
/// external address, and the user data ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debian_runs_cloud_init_from_its_seed() {
    let s = Server::start_qemu().await;
    assert!(
        vmaas_tests::images_dir().join("debian-12/image.json").exists(),
        "build it with scripts/debian-image.sh (scripts/test.sh does)"
    );
    publish(&s, DEBIAN);
    let t = s.token("acme", false);
    let dir = tempfile::tempdir().unwrap();
    let (key, public) = keypair(dir.path());
    let user_data = "#cloud-config\nwrite_files:\n  - path: /var/tmp/from-user-data\n    content: \"written by cloud-init\\n\"\n";
    let params = json!({"vm_ssh_keys": {"value": [public]}, "vm_user_data": {"value": user_data}});
    let id = create_with(&s, &t, "deb", "debian", params).await;
    let vm = wait_until(&s, &t, &id, "READY", 400, |v| state(v) == "VIRTUAL_MACHINE_STATE_READY").await;
    let ip = vm["status"]["externalIP"].as_str().unwrap().to_owned();
    // The image's initramfs has the clone hook: the VM starts from the
    // template snapshot its first VM makes, saved before the root is mounted.
    assert!(vm["status"].to_string().contains("restored from template snapshot"), "{vm}");

    // The VM's disk is an overlay whose backing file is the image's base disk.
    let info = vmaas_tests::disk_info(&s.data_dir.join("vms").join(&id).join("disk.qcow2"));
    assert!(info["backing-filename"].as_str().unwrap().ends_with("debian-12/disk.qcow2"), "{info}");
    assert_eq!(info["virtual-size"], 4u64 << 30, "sized by vm_disk_size");

    // SSH with the tenant's key on the external address (cloud-init makes
    // the host keys and authorises the key on its first boot).
    // READY means cloud-init has finished (the probed web server starts
    // after its last stage), without errors.
    // A clone of the template takes its machine-id, MAC and clock as its own.
    let ask = "echo who=$(id -un) host=$(hostname) pid1=$(cat /proc/1/comm) mid=$(cat /etc/machine-id) mac=$(cat /sys/class/net/eth0/address) \
               now=$(date +%s); cloud-init status; sync";
    let out = ssh_once_up(&ip, &key, ask).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("who=debian host=deb pid1=systemd"), "{text} {}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains(&format!("mid={}", id.replace('-', ""))), "the VM's id is its machine-id: {text}");
    assert!(text.contains("mac=52:54:00:") && !text.contains("mac=52:54:00:00:00:01"), "its own MAC, not the template's: {text}");
    let now = text.split_whitespace().find_map(|w| w.strip_prefix("now=")).and_then(|n| n.parse::<i64>().ok()).unwrap_or(0);
    let host_now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    assert!((host_now - now).abs() < 30, "the guest's clock is the host's, not the template's: {now} against {host_now}");
    assert!(text.contains("status: done"), "cloud-init had finished when the VM was READY: {text}");
    // Another key does not open it.
    let other_dir = dir.path().join("other");
    std::fs::create_dir(&other_dir).unwrap();
    let (other, _) = keypair(&other_dir);
    assert!(!ssh(&ip, &other, "true").status.success(), "a key the tenant did not give is refused");
    // The CLI opens the same SSH by the VM's name, remembering its host key as this VM's.
    let out = s.cli(&t, &["vm", "ssh", "deb", "-i", key.to_str().unwrap(), "--", "echo", "via-cli=$(hostname)"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && said.contains("via-cli=deb"), "{said} {}", String::from_utf8_lossy(&out.stderr));
    let known =
        Command::new("ssh-keygen").arg("-F").arg(format!("vmaas-{id}")).arg("-f").arg(s.data_dir.join("known_hosts")).output().unwrap();
    assert!(known.status.success(), "the host key is kept under the VM's id (hashed or not)");
    let out = s.cli(&t, &["vm", "ssh", "deb", "-i", other.to_str().unwrap(), "--", "true"]);
    assert_eq!(out.status.code(), Some(255), "ssh's own failure is the CLI's: {}", String::from_utf8_lossy(&out.stderr));

    // The user data ran: its file is there, seen on the serial console
    // (once its autologin shell, named after the VM, is up).
    console_log_with(&s, &t, "deb", "root@deb", Duration::from_secs(120)).await;
    let text = console(&s, &t, "deb", "\necho root=$(findmnt -no SOURCE /) file=$(cat /var/tmp/from-user-data)\n");
    assert!(text.contains("root=/dev/vda file=written by cloud-init"), "{text}");

    // A bigger disk: the guest sees it at once (the disk grows while it
    // runs), and after a restart the root file system has grown too
    // (cloud-init's resize_rootfs at that boot).
    let (_, now) = s.raw(Method::GET, &format!("{V1}/virtual_machines/{id}"), Some(&t), None).await;
    let mut params = now["object"]["spec"]["template_parameters"].clone();
    params["vm_disk_size"] = json!({"value": "5Gi"});
    let patch = json!({"object": {"spec": {"template_parameters": params}}});
    let (st, body) = s.raw(Method::PATCH, &format!("{V1}/virtual_machines/{id}"), Some(&t), Some(patch)).await;
    assert_eq!(st, 200, "{body}");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = ssh_once_up(&ip, &key, "cat /sys/block/vda/size").await;
        if String::from_utf8_lossy(&out.stdout).trim() == ((5u64 << 30) / 512).to_string() {
            break;
        }
        assert!(Instant::now() < deadline, "the guest does not see the grown disk: {}", String::from_utf8_lossy(&out.stdout));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(!vmaas_tests::vms::restart_required(&wait_ready(&s, &t, &id).await), "a grown disk needs no restart");
    let (st, body) = s.raw(Method::POST, &format!("{V1}/virtual_machines/{id}/restart"), Some(&t), None).await;
    assert!(st == 200 || st == 202, "{st} {body}");
    wait_until(&s, &t, &id, "restarting", 120, |v| state(v) != "VIRTUAL_MACHINE_STATE_READY").await;
    wait_until(&s, &t, &id, "READY after the restart", 400, |v| state(v) == "VIRTUAL_MACHINE_STATE_READY").await;
    let out = ssh_once_up(&ip, &key, "df -B1 --output=size / | tail -n 1").await;
    let size: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(0);
    assert!(size > 9 << 29, "the root file system grew to about 5Gi: {size} {}", String::from_utf8_lossy(&out.stderr));
}
