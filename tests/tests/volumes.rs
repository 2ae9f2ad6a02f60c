//! Volumes end to end on real guests: a volume made by the server, written
//! in one VM (a file system made and a file written on it, through the
//! serial console), kept when that VM is deleted with it attached, attached
//! to a new VM and read back; hotplugged into and unplugged from a running
//! guest, which sees the disk (by its serial) appear and go. And the
//! refusals: bad sizes and images, another tenant's volume or VM, a volume
//! attached twice, deleting an attached volume, shrinking.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};
use vmaas_tests::Server;
use vmaas_tests::objects::{attach, created, post, ready_volume, state, wait_for};
use vmaas_tests::vms::{TINY, V1, console, find_disk, found_disk as device, publish, wait_ready};

#[tokio::test(flavor = "multi_thread")]
async fn a_volume_outlives_its_vm_and_is_hotplugged_and_unplugged() {
    let s = Server::start_qemu().await;
    publish(&s, TINY);
    let t = s.token("acme", false);
    let (vol, file) = ready_volume(&s, &t, "data", "64Mi").await;
    assert!(file.exists(), "the volume's disk is a file of its own: {}", file.display());

    // Hotplug into a running guest: the disk appears, a file system and a file go on it.
    let one = created(&s, &t, "virtual_machines", json!({"metadata": {"name": "one"}, "spec": {"template": "tiny"}})).await;
    wait_ready(&s, &t, &one).await;
    let before = console(&s, &t, "one", "ls /sys/block");
    let (_, serial) = attach(&s, &t, "data-on-one", "data", "one").await;
    let v = wait_for(&s, &t, &format!("volumes/{vol}"), "ATTACHED", |v| state(v) == "VOLUME_STATE_ATTACHED").await;
    assert_eq!(v["status"]["attached_to"], one.as_str());
    let text = console(&s, &t, "one", &find_disk(&serial));
    let dev = device(&text).unwrap_or_else(|| panic!("the hotplugged disk is not in the guest:\n{text}\nbefore: {before}"));
    let write = format!(
        "mke2fs -q /dev/{dev} && mkdir -p /mnt/v && mount /dev/{dev} /mnt/v && echo kept-across-vms > /mnt/v/note && umount /mnt/v && sync && echo WROTE-$((40+2))"
    );
    let text = console(&s, &t, "one", &write);
    assert!(text.contains("WROTE-42"), "writing on the volume failed:\n{text}");

    // It cannot be deleted or attached twice while attached.
    let (st, e) = s.raw(Method::DELETE, &format!("{V1}/volumes/{vol}"), Some(&t), None).await;
    assert_eq!(st, 409, "{e}");
    assert!(e["message"].as_str().unwrap().contains("\"one\""), "the refusal names the VM: {e}");
    let (st, e) =
        post(&s, &t, "volume_attachments", json!({"metadata": {"name": "twice"}, "spec": {"volume": "data", "compute_instance": "one"}}))
            .await;
    assert_eq!((st, e["code"].as_i64()), (409, Some(9)), "{e}");

    // The VM goes, the volume stays (detached), with its data.
    let (st, _) = s.raw(Method::DELETE, &format!("{V1}/virtual_machines/{one}"), Some(&t), None).await;
    assert_eq!(st, 202);
    wait_for(&s, &t, &format!("virtual_machines/{one}"), "the VM gone", |v| v.is_none()).await;
    let v = wait_for(&s, &t, &format!("volumes/{vol}"), "READY again", |v| state(v) == "VOLUME_STATE_READY").await;
    assert!(v["status"].get("attached_to").is_none(), "{v}");
    let (_, list) = s.raw(Method::GET, &format!("{V1}/volume_attachments"), Some(&t), None).await;
    assert_eq!(list["total"], 0, "the VM's attachment went with it: {list}");

    // A new VM gets it (attached while it boots) and reads the file back.
    let two = created(&s, &t, "virtual_machines", json!({"metadata": {"name": "two"}, "spec": {"template": "tiny"}})).await;
    let (att, serial) = attach(&s, &t, "data-on-two", &vol, "two").await;
    wait_ready(&s, &t, &two).await;
    let text = console(&s, &t, "two", &find_disk(&serial));
    let dev = device(&text).unwrap_or_else(|| panic!("the volume is not in the new guest:\n{text}"));
    let text =
        console(&s, &t, "two", &format!("mkdir -p /mnt/v && mount /dev/{dev} /mnt/v && echo \"READ=$(cat /mnt/v/note)\"; umount /mnt/v"));
    assert!(text.contains("READ=kept-across-vms"), "the file did not survive:\n{text}");

    // Grown while attached: the running guest sees the new size at once.
    let (st, e) = s.raw(Method::PATCH, &format!("{V1}/volumes/{vol}"), Some(&t), Some(json!({"object": {"spec": {"size": "96Mi"}}}))).await;
    assert_eq!(st, 200, "{e}");
    let sectors = (96u64 << 20) / 512;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = console(&s, &t, "two", &format!("echo SIZE=$(cat /sys/block/{dev}/size)"));
        if text.contains(&format!("SIZE={sectors}")) {
            break;
        }
        assert!(Instant::now() < deadline, "the guest never saw the volume grow to {sectors} sectors:\n{text}");
    }

    // Hot-unplug: the attachment goes once the guest let go, and so does the disk.
    let (st, a) = s.raw(Method::DELETE, &format!("{V1}/volume_attachments/{att}"), Some(&t), None).await;
    assert_eq!(st, 202, "{a}");
    wait_for(&s, &t, &format!("volume_attachments/{att}"), "the attachment gone", |v| v.is_none()).await;
    let text = console(&s, &t, "two", &find_disk(&serial));
    assert_eq!(device(&text), None, "the unplugged disk is still in the guest:\n{text}");
    assert!(text.contains("DEV=."), "{text}");
    wait_for(&s, &t, &format!("volumes/{vol}"), "READY after the unplug", |v| state(v) == "VOLUME_STATE_READY").await;

    // Deleted for good: the record and the file.
    let (st, _) = s.raw(Method::DELETE, &format!("{V1}/volumes/{vol}"), Some(&t), None).await;
    assert_eq!(st, 202);
    wait_for(&s, &t, &format!("volumes/{vol}"), "the volume gone", |v| v.is_none()).await;
    assert!(!file.exists(), "the volume's file is removed");
}

fn field(e: &Value) -> String {
    e["details"][0]["field"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_volumes_and_attachments_are_refused_with_the_field() {
    let s = Server::start_qemu().await;
    publish(&s, TINY);
    let (a, b) = (s.token("acme", false), s.token("globex", false));
    for (spec, want) in [
        (json!({"size": "0"}), "object.spec.size"),
        (json!({"size": "10Gi", "source_image": "no-such-image"}), "object.spec.source_image"),
        (json!({"size": "1Mi", "source_image": "test-guest"}), "object.spec.size"),
        (json!({"size": "1Gi", "bytes": 1}), ""),
    ] {
        let (st, e) = post(&s, &a, "volumes", json!({"metadata": {"name": "bad"}, "spec": spec})).await;
        assert_eq!(st, 400, "{spec}: {e}");
        if !want.is_empty() {
            assert_eq!(field(&e), want, "{e}");
        }
    }
    // More than the host's disk holds (beside the VMs' disks): 429 naming
    // `disk`, on create and on growth.
    let (st, e) = post(&s, &a, "volumes", json!({"metadata": {"name": "huge"}, "spec": {"size": "64Ti"}})).await;
    assert_eq!((st, field(&e).as_str()), (429, "disk"), "{e}");
    let (_, list) = s.raw(Method::GET, &format!("{V1}/volumes"), Some(&a), None).await;
    assert_eq!(list["total"], 0, "nothing half-made: {list}");
    let small = created(&s, &a, "volumes", json!({"metadata": {"name": "small"}, "spec": {"size": "1Mi"}})).await;
    let (st, e) =
        s.raw(Method::PATCH, &format!("{V1}/volumes/{small}"), Some(&a), Some(json!({"object": {"spec": {"size": "64Ti"}}}))).await;
    assert_eq!((st, field(&e).as_str()), (429, "disk"), "{e}");
    let (st, _) = s.raw(Method::DELETE, &format!("{V1}/volumes/{small}"), Some(&a), None).await;
    assert_eq!(st, 202);
    wait_for(&s, &a, &format!("volumes/{small}"), "the small volume gone", |v| v.is_none()).await;

    // A volume from an image is an overlay of it: the image is never written.
    let base = vmaas_tests::images_dir().join("test-guest/disk.qcow2");
    let stamp = std::fs::metadata(&base).unwrap().modified().unwrap();
    let vol = created(&s, &a, "volumes", json!({"metadata": {"name": "sys"}, "spec": {"size": "1Gi", "source_image": "test-guest"}})).await;
    wait_for(&s, &a, &format!("volumes/{vol}"), "READY", |v| state(v) == "VOLUME_STATE_READY").await;
    let info = vmaas_tests::disk_info(&s.data_dir.join("volumes").join(format!("{vol}.qcow2")));
    assert!(info["backing-filename"].as_str().unwrap_or_default().ends_with("test-guest/disk.qcow2"), "{info}");
    assert_eq!(info["virtual-size"], 1u64 << 30);
    assert_eq!(std::fs::metadata(&base).unwrap().modified().unwrap(), stamp);
    let (_, image) = s.raw(Method::GET, &format!("{V1}/images/test-guest"), Some(&a), None).await;
    assert_eq!(image["object"]["status"]["references"], 1, "the volume counts as a reference of its image: {image}");
    let (_, image) = s.raw(Method::GET, &format!("{V1}/images/test-guest"), Some(&b), None).await;
    assert_eq!(image["object"]["status"]["references"], 0, "another tenant's references are not shown: {image}");

    // Shrinking is refused; growing a detached volume grows its file.
    let (st, e) =
        s.raw(Method::PATCH, &format!("{V1}/volumes/{vol}"), Some(&a), Some(json!({"object": {"spec": {"size": "512Mi"}}}))).await;
    assert_eq!((st, field(&e)), (400, "object.spec.size".to_owned()), "{e}");

    // Another tenant sees nothing of it and cannot use it.
    let (st, _) = s.raw(Method::GET, &format!("{V1}/volumes/{vol}"), Some(&b), None).await;
    assert_eq!(st, 404);
    let vm = created(&s, &a, "virtual_machines", json!({"metadata": {"name": "web"}, "spec": {"template": "tiny"}})).await;
    created(&s, &b, "virtual_machines", json!({"metadata": {"name": "theirs"}, "spec": {"template": "tiny"}})).await;
    let (st, e) =
        post(&s, &b, "volume_attachments", json!({"metadata": {"name": "x"}, "spec": {"volume": vol, "compute_instance": "theirs"}})).await;
    assert_eq!((st, field(&e)), (400, "object.spec.volume".to_owned()), "{e}");
    let (st, e) =
        post(&s, &a, "volume_attachments", json!({"metadata": {"name": "x"}, "spec": {"volume": "sys", "compute_instance": "theirs"}}))
            .await;
    assert_eq!((st, field(&e)), (400, "object.spec.compute_instance".to_owned()), "{e}");
    let (st, e) =
        post(&s, &a, "volume_attachments", json!({"metadata": {"name": "x"}, "spec": {"volume": "", "compute_instance": ""}})).await;
    assert_eq!(st, 400, "{e}");
    assert_eq!(e["details"].as_array().map(Vec::len), Some(2), "both fields named: {e}");
    let (_, list) = s.raw(Method::GET, &format!("{V1}/volume_attachments"), Some(&a), None).await;
    assert_eq!(list["total"], 0, "{list}");

    // The CLI: create, attach and detach with --wait (progress on stderr), list, delete.
    let v = s.cli_json(&a, &["volume", "create", "scratch", "--size", "32Mi", "--wait"]);
    assert_eq!(v["status"]["state"], "VOLUME_STATE_READY", "{v}");
    let out = s.cli(&a, &["volume", "attach", "scratch", "--vm", "web", "--wait", "-o", "json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let att: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(att["status"]["state"], "VOLUME_ATTACHMENT_STATE_READY", "{att}");
    let table = String::from_utf8_lossy(&s.cli(&a, &["volume", "list"]).stdout).into_owned();
    assert!(table.lines().any(|l| l.starts_with("scratch") && l.contains("ATTACHED") && l.contains(&vm)), "{table}");
    let out = s.cli(&a, &["volume", "delete", "scratch"]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("\"web\""), "{}", String::from_utf8_lossy(&out.stderr));
    let out = s.cli(&a, &["volume", "detach", "scratch", "--wait"]);
    let progress = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success() && progress.contains("… gone"), "{progress}");
    let out = s.cli(&a, &["volume", "delete", "scratch"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // auto_delete: the volume goes with its VM.
    let (st, e) = post(
        &s,
        &a,
        "volume_attachments",
        json!({"metadata": {"name": "x"}, "spec": {"volume": "sys", "compute_instance": "web", "auto_delete": true}}),
    )
    .await;
    assert_eq!(st, 201, "{e}");
    let (st, _) = s.raw(Method::DELETE, &format!("{V1}/virtual_machines/{vm}"), Some(&a), None).await;
    assert_eq!(st, 202);
    wait_for(&s, &a, &format!("volumes/{vol}"), "the volume deleted with its VM", |v| v.is_none()).await;
}
