//! A volume keeps the last writes of the VM it was on, on real guests: a
//! guest writes to its volume without syncing, then its VM is deleted (the
//! guest is powered off and QEMU flushes before it exits, never killed
//! first), and the bytes are in the volume's file and read back in another
//! VM; the same for a volume detached from a running guest.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::json;
use vmaas_tests::Server;
use vmaas_tests::objects::{attach, created, ready_volume, state, wait_for};
use vmaas_tests::vms::{TINY, V1, console, find_disk, found_disk, publish, wait_ready};

/// Attaches `volume` to `vm` and waits until the guest has it; the
/// attachment's id and the device's name.
async fn attached(s: &Server, t: &str, name: &str, volume: &str, vm: &str) -> (String, String) {
    let (id, serial) = attach(s, t, name, volume, vm).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = console(s, t, vm, &find_disk(&serial));
        if let Some(dev) = found_disk(&text) {
            return (id, dev);
        }
        assert!(Instant::now() < deadline, "the guest never saw the volume:\n{text}");
    }
}

/// Writes `marker` at sector `sector` of `/dev/{dev}` through the page
/// cache: no sync, no direct I/O, nothing that flushes.
fn write_unsynced(s: &Server, t: &str, vm: &str, dev: &str, sector: u32, marker: &str) {
    let cmd = format!("printf '{marker}' | dd of=/dev/{dev} bs=512 seek={sector} conv=notrunc 2>/dev/null; echo WROTE-$((40+2))");
    let text = console(s, t, vm, &cmd);
    assert!(text.contains("WROTE-42"), "writing to the volume failed:\n{text}");
}

/// The bytes of the volume's file, read by `qemu-img` (its qcow2 mapping
/// as written on the host).
fn host_bytes(file: &std::path::Path) -> Vec<u8> {
    let out = tempfile::NamedTempFile::new().unwrap();
    let st =
        std::process::Command::new("qemu-img").args(["convert", "-U", "-O", "raw"]).arg(file).arg(out.path()).output().expect("qemu-img");
    assert!(st.status.success(), "{}", String::from_utf8_lossy(&st.stderr));
    std::fs::read(out.path()).unwrap()
}

fn holds(bytes: &[u8], sector: usize, marker: &str) -> bool {
    bytes.get(sector * 512..sector * 512 + marker.len()) == Some(marker.as_bytes())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deleted_or_detached_vm_leaves_its_volume_whole() {
    let s = Server::start_qemu().await;
    publish(&s, TINY);
    let t = s.token("acme", false);
    let (vol, file) = ready_volume(&s, &t, "data", "64Mi").await;

    // Written without a sync, then the VM deleted.
    let one = created(&s, &t, "virtual_machines", json!({"metadata": {"name": "one"}, "spec": {"template": "tiny"}})).await;
    wait_ready(&s, &t, &one).await;
    let (_, dev) = attached(&s, &t, "data-on-one", "data", "one").await;
    let deleted = "written-just-before-the-delete";
    write_unsynced(&s, &t, "one", &dev, 8, deleted);
    let (st, _) = s.raw(Method::DELETE, &format!("{V1}/virtual_machines/{one}"), Some(&t), None).await;
    assert_eq!(st, 202);
    wait_for(&s, &t, &format!("virtual_machines/{one}"), "the VM gone", |v| v.is_none()).await;
    assert!(s.log().contains("the guest powered off"), "the guest was powered off, not killed:\n{}", s.log());
    wait_for(&s, &t, &format!("volumes/{vol}"), "the volume READY again", |v| state(v) == "VOLUME_STATE_READY").await;
    assert!(holds(&host_bytes(&file), 8, deleted), "the volume's file lost the last write of the deleted VM");

    // Another VM reads it; then writes without a sync and has it detached.
    let two = created(&s, &t, "virtual_machines", json!({"metadata": {"name": "two"}, "spec": {"template": "tiny"}})).await;
    wait_ready(&s, &t, &two).await;
    let (att, dev) = attached(&s, &t, "data-on-two", "data", "two").await;
    let text =
        console(&s, &t, "two", &format!("echo \"READ=$(dd if=/dev/{dev} bs=512 skip=8 count=1 2>/dev/null | head -c {})\"", deleted.len()));
    assert!(text.contains(&format!("READ={deleted}")), "the second VM does not see the first one's write:\n{text}");
    let detached = "written-just-before-the-detach";
    write_unsynced(&s, &t, "two", &dev, 16, detached);
    let (st, _) = s.raw(Method::DELETE, &format!("{V1}/volume_attachments/{att}"), Some(&t), None).await;
    assert_eq!(st, 202);
    wait_for(&s, &t, &format!("volume_attachments/{att}"), "the attachment gone", |v| v.is_none()).await;
    wait_for(&s, &t, &format!("volumes/{vol}"), "the volume READY after the detach", |v| state(v) == "VOLUME_STATE_READY").await;
    let bytes = host_bytes(&file);
    assert!(holds(&bytes, 16, detached), "the volume's file lost the last write before the detach");
    assert!(holds(&bytes, 8, deleted));
}
