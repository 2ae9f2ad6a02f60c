//! `vmaas_volume`, `vmaas_volume_attachment` and the `vmaas_volumes` data
//! source with both Terraform versions (`examples/terraform/data-volume`):
//! a file written on the volume survives `terraform apply -replace` of the
//! VM, growing the volume is an in-place change the running guest sees,
//! the VM's own boot disk and additional disk plan without drift and the
//! boot disk grows in place, and destroy removes everything.

use reqwest::Method;
use serde_json::Value;
use vmaas_tests::Server;
use vmaas_tests::tf::{Tf, Workspace, repo};
use vmaas_tests::vms::{TINY, V1, console, find_disk, found_disk, publish};

async fn get(s: &Server, t: &str, path: &str) -> Value {
    s.raw(Method::GET, &format!("{V1}/{path}"), Some(t), None).await.1
}

/// The guest's disk with `serial`, or a panic showing the console. A disk
/// plugged in just now may take the guest a moment to probe (seen in CI:
/// 0.6 s after the hotplug it was not there yet), so it looks five times.
fn disk(s: &Server, t: &str, vm: &str, serial: &str) -> String {
    let mut text = String::new();
    for _ in 0..5 {
        text = console(s, t, vm, &find_disk(serial));
        if let Some(d) = found_disk(&text) {
            return d;
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
    panic!("no disk with serial {serial} in {vm}:\n{text}")
}

async fn scenario(tf: Tf) {
    let s = Server::start_qemu().await;
    publish(&s, TINY);
    let t = s.token("ci", false);
    let main_tf = std::fs::read_to_string(repo().join("examples/terraform/data-volume/main.tf")).unwrap();
    let w = Workspace::new(tf, &s, &t, &main_tf);

    w.apply(&[]);
    let (volume, serial, first) = (w.output("volume_id"), w.output("serial"), w.output("vm_id"));
    let v = get(&s, &t, &format!("volumes/{volume}")).await;
    assert_eq!(v["object"]["status"]["state"], "VOLUME_STATE_ATTACHED", "{v}");
    assert_eq!(v["object"]["status"]["attached_to"], first.as_str(), "{v}");
    let listed: Value = serde_json::from_str(&w.ok(&["output", "-json", "volumes"])).unwrap();
    assert_eq!(listed, serde_json::json!(["app-data:VOLUME_STATE_ATTACHED"]));
    let dev = disk(&s, &t, "app", &serial);
    let text = console(
        &s,
        &t,
        "app",
        &format!(
            "mke2fs -q /dev/{dev} && mkdir -p /m && mount /dev/{dev} /m && echo survives > /m/f && umount /m && sync && echo W=$((1+1))"
        ),
    );
    assert!(text.contains("W=2"), "{text}");

    let (code, text) = w.plan_code(&[]);
    assert_eq!(code, 0, "a no-op re-plan:\n{text}");

    // A new VM: the attachment follows it, the volume and its data stay.
    let text = w.apply(&["-replace=vmaas_virtual_machine.app"]);
    assert!(text.contains("2 added, 0 changed, 2 destroyed"), "{text}");
    assert_eq!(w.output("volume_id"), volume);
    let second = w.output("vm_id");
    assert_ne!(second, first);
    let dev = disk(&s, &t, "app", &serial);
    let text = console(&s, &t, "app", &format!("mkdir -p /m && mount /dev/{dev} /m && echo \"R=$(cat /m/f)\"; umount /m"));
    assert!(text.contains("R=survives"), "{text}");

    // Growing is in place; the running guest sees it. The VM's boot disk grows in place too.
    let text = w.apply(&["-var", "size=320Mi", "-var", "boot_gib=2"]);
    assert!(text.contains("0 added, 2 changed, 0 destroyed"), "{text}");
    let vm = get(&s, &t, &format!("virtual_machines/{second}")).await;
    let spec = &vm["object"]["spec"];
    assert_eq!(
        (&spec["boot_disk"], &spec["additional_disks"]),
        (&serde_json::json!({"size_gib": 2}), &serde_json::json!([{"size_gib": 1}])),
        "{vm}"
    );
    let want = format!("S={}", (320u64 << 20) / 512);
    let seen = (0..10).map(|_| console(&s, &t, "app", &format!("echo S=$(cat /sys/block/{dev}/size)"))).find(|x| x.contains(&want));
    assert!(seen.is_some(), "the guest never saw {want}");

    w.ok(&["destroy", "-auto-approve", "-no-color", "-var", "size=320Mi", "-var", "boot_gib=2"]);
    assert_eq!(get(&s, &t, "volumes").await["total"], 0);
    assert_eq!(get(&s, &t, "virtual_machines").await["total"], 0);
    assert!(!s.data_dir.join("volumes").join(format!("{volume}.qcow2")).exists(), "the volume's file is gone");
}

vmaas_tests::on_every_terraform!(scenario: data_volume_tofu, data_volume_terraform_1_0_3, data_volume_terraform_1_15_5);
