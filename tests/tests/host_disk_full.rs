//! A guest frozen by a full host disk: the VMs' directory is a small file
//! system of the test's own, filled from the host while the guest runs.
//! QEMU freezes the guest on the write it cannot take; the VM stays READY
//! and is DEGRADED (`PausedIOError`) naming the full disk for as long as
//! there is no room, then goes on by itself once there is, and the write
//! it was frozen on lands whole.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use vmaas_tests::Server;
use vmaas_tests::vms::{TINY, console, create, get, publish, state, wait_ready, wait_until};

/// A tmpfs of `size` MiB mounted on a directory, unmounted when dropped
/// (lazily: whatever still holds a file there lets go of it after).
struct SmallFs(PathBuf);

impl SmallFs {
    fn mount(dir: &Path, size_mib: u32) -> Self {
        std::fs::create_dir_all(dir).expect("mount point");
        let size = format!("size={size_mib}m");
        let st = Command::new("mount").args(["-t", "tmpfs", "-o", &size, "tmpfs"]).arg(dir).status().expect("run mount");
        assert!(st.success(), "mounting a tmpfs on {} (the suite runs as root)", dir.display());
        Self(dir.to_owned())
    }

    /// Writes a file until the file system has no room left; its path.
    fn fill(&self) -> PathBuf {
        let path = self.0.join("filler");
        let mut f = std::fs::File::create(&path).expect("create the filler");
        let chunk = vec![0x5a_u8; 1 << 20];
        let mut size = chunk.len();
        while size > 0 {
            match f.write(&chunk[..size]) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(28) => size /= 2,
                Err(e) => panic!("filling {}: {e}", path.display()),
            }
        }
        path
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn degraded(v: &Value) -> Option<&Value> {
    let conditions = v["status"]["conditions"].as_array()?;
    conditions.iter().find(|c| c["type"] == "VIRTUAL_MACHINE_CONDITION_TYPE_DEGRADED" && c["status"] == "CONDITION_STATUS_TRUE")
}

/// Whether the guest's synced write has landed whole: its sync returned,
/// and the file read back from its disk (its cache dropped) is the data.
fn landed(s: &Server, t: &str) -> bool {
    let check = "[ -e /tmp/synced ] && echo 3 > /proc/sys/vm/drop_caches && a=$(md5sum < /data/fill) && \
                 b=$(i=0; while [ $i -lt 16 ]; do cat /tmp/r; i=$((i+1)); done | md5sum) && [ \"$a\" = \"$b\" ] && echo WHOLE=$((40+2)).";
    console(s, t, "frozen", check).contains("WHOLE=42.")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_frozen_by_a_full_host_disk_is_degraded_and_goes_on_once_there_is_room() {
    let data = tempfile::tempdir().expect("tempdir");
    // Room enough for the 1 GiB disk the host admits at twice its file system.
    let fs = SmallFs::mount(&data.path().join("vms"), 640);
    let s = Server::start_qemu_in(data, &["--vm-snapshots=false"]).await;
    publish(&s, TINY);
    let t = s.token("acme", false);
    let id = create(&s, &t, "frozen", "tiny").await;
    let v = wait_ready(&s, &t, &id).await;
    assert!(degraded(&v).is_none(), "a guest that runs is not degraded: {v}");

    // 16 MiB of data the guest cannot compress away, written and synced in
    // the background: the sync is the write the host cannot take.
    let filler = fs.fill();
    let write = "head -c 1048576 /dev/urandom > /tmp/r; \
                 (i=0; while [ $i -lt 16 ]; do cat /tmp/r; i=$((i+1)); done > /data/fill; sync; touch /tmp/synced) &";
    console(&s, &t, "frozen", write);
    let v = wait_until(&s, &t, &id, "DEGRADED by a full host disk", 90, |v| degraded(v).is_some()).await;
    let why = degraded(&v).expect("degraded");
    assert_eq!(why["reason"], "PausedIOError", "{v}");
    let message = why["message"].as_str().unwrap_or_default();
    assert!(message.contains("want of room on the host") && message.contains("MiB free"), "{message}");
    assert_eq!(state(&v), "VIRTUAL_MACHINE_STATE_READY", "a frozen guest's VM stays READY, DEGRADED saying why: {v}");

    // While there is no room, the guest stays frozen and the VM degraded.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let (_, got) = get(&s, &t, &id).await;
    let v = &got["object"];
    assert!(degraded(v).is_some_and(|c| c["reason"] == "PausedIOError"), "still no room, still frozen: {v}");

    // Room again: the guest goes on by itself, and its write lands whole.
    std::fs::remove_file(&filler).expect("remove the filler");
    let v = wait_until(&s, &t, &id, "no longer DEGRADED", 60, |v| degraded(v).is_none()).await;
    assert_eq!(state(&v), "VIRTUAL_MACHINE_STATE_READY", "{v}");
    let deadline = Instant::now() + Duration::from_secs(120);
    while !landed(&s, &t) {
        assert!(Instant::now() < deadline, "the guest's write did not land whole within 120 s of the host having room");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
