//! Snapshots of a running test guest's disks and restores from them, as
//! `vmaas-bench qemu` prints them (and `vmaas-bench snapshots` alone): a
//! 1 GiB volume on the guest with 256 MiB written by the guest, then per
//! round an online snapshot (create → READY through the API, and how long
//! the QMP transaction that fixes the instant held the guest's disks: its
//! vCPUs are never stopped; and how long its agent kept the guest's file
//! systems frozen) and a restore with `stop` (the copy of the
//! disks back, from the VM's state file, and restore request → READY).

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use vmaas_client::{Client, WaitFor};
use vmaas_model::{
    ComputeInstanceSnapshot, ComputeInstanceSnapshotSpec, ComputeInstanceSnapshotState, CreateObject, MetadataInput, Volume,
    VolumeAttachment, VolumeAttachmentSpec, VolumeSpec,
};

use crate::percentile;
use crate::storage::{seen, send};
use crate::vms::{QemuServer, none_left, ready_tiny, start_qemu_server};

fn named<S>(name: String, spec: S) -> CreateObject<S> {
    CreateObject { type_url: None, id: None, metadata: Some(MetadataInput { name: Some(name), ..Default::default() }), spec, status: None }
}

/// Polls `path`/`id` every 10 ms until `done` (at most a minute).
async fn until<T: serde::de::DeserializeOwned>(c: &Client, path: &str, id: &str, done: impl Fn(&T) -> bool) -> anyhow::Result<T> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let o: T = c.get_object(path, id).await?;
        if done(&o) {
            return Ok(o);
        }
        if Instant::now() > deadline {
            bail!("{path}/{id} never got there");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A 1 GiB volume on VM `vm` with 256 MiB written by its guest; its id.
async fn written_volume(c: &Client, ws: &mut crate::storage::Ws, vm: &str) -> anyhow::Result<String> {
    let v: Volume = c.create_object("/volumes", &named("data".into(), VolumeSpec { size: "1Gi".parse()?, source_image: None })).await?;
    until::<Volume>(c, "/volumes", &v.id, |v| v.status.state.as_str().ends_with("READY")).await?;
    let spec = VolumeAttachmentSpec { volume: v.id.clone(), compute_instance: vm.to_owned(), auto_delete: true };
    let a: VolumeAttachment = c.create_object("/volume_attachments", &named("data".into(), spec)).await?;
    until::<VolumeAttachment>(c, "/volume_attachments", &a.id, |a| a.status.state.as_str().ends_with("READY")).await?;
    let serial = vmaas_model::volume::disk_serial(&v.id);
    let dev = format!("/dev/$(grep -l '^{serial}$' /sys/block/vd*/serial | cut -d/ -f4)");
    // The guest sees the disk a moment after QEMU has it.
    let has = format!("grep -qs '^{serial}$' /sys/block/vd*/serial");
    send(
        ws,
        &format!("until {has}; do usleep 2000; done; dd if=/dev/urandom of={dev} bs=1M count=256 2>/dev/null; sync; echo WRITTEN-$((6*7))"),
    )
    .await?;
    seen(ws, "WRITTEN-42", Duration::from_secs(600)).await?;
    Ok(v.id)
}

/// Export throughput of volume `id` (its VM stopped): the API's export
/// downloaded to a file against `qemu-img convert` of the same file to a
/// file, alternating, best of `rounds` each; `(export s, convert s, bytes)`.
async fn exports(srv: &QemuServer, id: &str, rounds: usize) -> anyhow::Result<(f64, f64, u64)> {
    let out = tempfile::tempdir_in(srv.dir.path())?;
    let source = srv.dir.path().join("volumes").join(format!("{id}.qcow2"));
    let (mut api, mut convert, mut bytes) = (f64::MAX, f64::MAX, 0);
    for i in 0..rounds {
        let dest = out.path().join(format!("api-{i}.qcow2"));
        let t = Instant::now();
        bytes = srv.client.download_export(&format!("/volumes/{id}/export"), &dest, |_, _| {}).await?.bytes;
        api = api.min(t.elapsed().as_secs_f64());
        std::fs::remove_file(&dest)?;
        let dest = out.path().join(format!("convert-{i}.qcow2"));
        let t = Instant::now();
        let st = std::process::Command::new("qemu-img").args(["convert", "-U", "-O", "qcow2"]).arg(&source).arg(&dest).status()?;
        convert = convert.min(t.elapsed().as_secs_f64());
        if !st.success() {
            bail!("qemu-img convert failed");
        }
        std::fs::remove_file(&dest)?;
    }
    Ok((api, convert, bytes))
}

/// One round: `[snapshot create→READY s, disks held ms, bytes, restore copy s, restore→READY s, file systems frozen ms]`.
async fn round(srv: &QemuServer, vm: &str, i: usize) -> anyhow::Result<[f64; 6]> {
    let c = &srv.client;
    let t = Instant::now();
    let spec = ComputeInstanceSnapshotSpec { compute_instance: vm.to_owned() };
    let s: ComputeInstanceSnapshot = c.create_object("/compute_instance_snapshots", &named(format!("bench-{i}"), spec)).await?;
    let s = until::<ComputeInstanceSnapshot>(c, "/compute_instance_snapshots", &s.id, |s| {
        matches!(s.status.state, ComputeInstanceSnapshotState::Ready | ComputeInstanceSnapshotState::Failed)
    })
    .await?;
    let taken = t.elapsed().as_secs_f64();
    if s.status.state != ComputeInstanceSnapshotState::Ready {
        bail!("the snapshot failed: {:?}", s.status.message);
    }
    if s.status.size_bytes < 256 << 20 {
        bail!("the snapshot holds {} bytes: the guest's 256 MiB are not in it", s.status.size_bytes);
    }
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(srv.dir.path().join("disk-snapshots").join(&s.id).join("snapshot.json"))?)?;
    let held_ms = manifest["held_us"].as_f64().unwrap_or(f64::NAN) / 1000.0;
    let frozen_ms = manifest["frozen_us"].as_f64().context("the guest's agent froze nothing (no frozen_us in snapshot.json)")? / 1000.0;
    let t = Instant::now();
    c.restore_vm(vm, &s.id, true).await?;
    c.wait_vm(vm, WaitFor::Ready, Duration::from_secs(300), Duration::from_millis(20), |_| {}).await?;
    let back = t.elapsed().as_secs_f64();
    let state: serde_json::Value = serde_json::from_slice(&std::fs::read(srv.dir.path().join("vms").join(vm).join("vm.json"))?)?;
    let copy = state["restore_ms"].as_f64().context("the VM's state file has no restore_ms")? / 1000.0;
    c.delete_object::<ComputeInstanceSnapshot>("/compute_instance_snapshots", &s.id).await?;
    Ok([taken, held_ms, s.status.size_bytes as f64, copy, back, frozen_ms])
}

/// Create→READY of a VM cloned from snapshot `snap` against a plain VM of
/// the same template (a template-snapshot create), alternating; seconds each.
async fn clones(c: &Client, snap: &str, rounds: usize) -> anyhow::Result<(Vec<f64>, Vec<f64>)> {
    let (mut cloned, mut plain) = (Vec::new(), Vec::new());
    for i in 0..rounds {
        for clone in [true, false] {
            let mut req = crate::vms::tiny(format!("{}-{i}", if clone { "clone" } else { "plain" }));
            if clone {
                req.spec.clone_of = Some(vmaas_model::CloneOf { snapshot: Some(snap.to_owned()), compute_instance: None });
            }
            let t = Instant::now();
            let vm = c.create_vm(&req).await?;
            c.wait_vm(&vm.id, WaitFor::Ready, Duration::from_secs(300), Duration::from_millis(10), |_| {}).await?;
            if clone { &mut cloned } else { &mut plain }.push(t.elapsed().as_secs_f64());
            c.delete_vm(&vm.id).await?;
            c.wait_vm(&vm.id, WaitFor::Deleted, Duration::from_secs(120), Duration::from_millis(20), |_| {}).await?;
        }
    }
    cloned.sort_by(|a, b| a.total_cmp(b));
    plain.sort_by(|a, b| a.total_cmp(b));
    Ok((cloned, plain))
}

/// Runs `rounds` snapshot and restore rounds on one test guest.
pub async fn snapshots(rounds: usize, images: std::path::PathBuf) -> anyhow::Result<()> {
    let srv = start_qemu_server(images).await?;
    let c = &srv.client;
    let vm = ready_tiny(c, "snap").await?;
    let session = c.console_session(&vm.id).await?;
    let (mut ws, _) = tokio_tungstenite::connect_async(c.console_url(&session).as_str()).await?;
    send(&mut ws, "").await?;
    let volume = written_volume(c, &mut ws, &vm.id).await?;
    drop(ws);
    let mut figures = Vec::new();
    for i in 0..rounds {
        figures.push(round(&srv, &vm.id, i).await?);
    }
    let spec = ComputeInstanceSnapshotSpec { compute_instance: vm.id.clone() };
    let golden: ComputeInstanceSnapshot = c.create_object("/compute_instance_snapshots", &named("golden".into(), spec)).await?;
    until::<ComputeInstanceSnapshot>(c, "/compute_instance_snapshots", &golden.id, |s| {
        s.status.state == ComputeInstanceSnapshotState::Ready
    })
    .await?;
    let (cloned, plain) = clones(c, &golden.id, rounds).await?;
    let patch = vmaas_model::PatchVirtualMachine {
        spec: vmaas_model::vm::SpecPatch { state: Some(vmaas_model::PowerState::Stopped), ..Default::default() },
        ..Default::default()
    };
    c.patch_vm(&vm.id, &patch).await?;
    c.wait_vm(&vm.id, WaitFor::Stopped, Duration::from_secs(120), Duration::from_millis(50), |_| {}).await?;
    let (by_api, by_convert, bytes) = exports(&srv, &volume, rounds.max(3)).await?;
    c.delete_vm(&vm.id).await?;
    c.wait_vm(&vm.id, WaitFor::Deleted, Duration::from_secs(120), Duration::from_millis(50), |_| {}).await?;
    none_left(srv.dir.path())?;
    let col = |k: usize| {
        let mut v: Vec<f64> = figures.iter().map(|f| f[k]).collect();
        v.sort_by(|a, b| a.total_cmp(b));
        (percentile(&v, 0.5), percentile(&v, 1.0))
    };
    let mib = col(2).0 / 1048576.0;
    println!(
        "disk snapshots: {rounds} rounds on a running test guest with a 1 GiB volume, 256 MiB of it written ({mib:.0} MiB in each snapshot)"
    );
    let (p50, max) = col(1);
    let met = |ok: bool| if ok { "met" } else { "NOT MET" };
    println!(
        "online snapshot, the guest's disks held (QMP transaction; vCPUs run on) p50 {p50:.1} ms max {max:.1} ms (goal ≤ 50 ms: {})",
        met(max <= 50.0)
    );
    let (p50, max) = col(5);
    println!(
        "online snapshot, the guest's file systems frozen (agent freeze→thaw; writers wait) p50 {p50:.1} ms max {max:.1} ms (goal ≤ 50 ms: {})",
        met(max <= 50.0)
    );
    let (p50, max) = col(0);
    println!("online snapshot create→READY (API)             p50 {p50:.2} s max {max:.2} s (goal ≤ 1 s: {})", met(p50 <= 1.0));
    let (p50, max) = col(3);
    println!("restore, the disks copied back                 p50 {p50:.2} s max {max:.2} s (goal ≤ 1 s: {})", met(p50 <= 1.0));
    let (p50, max) = col(4);
    println!("restore with stop, request→READY again         p50 {p50:.2} s max {max:.2} s (stop, copy, start)");
    let (c50, p50) = (percentile(&cloned, 0.5), percentile(&plain, 0.5));
    println!(
        "clone of a snapshot create→READY p50 {c50:.2} s against a template-snapshot create {p50:.2} s: {:.2}x (goal within 1.5x: {})",
        c50 / p50.max(1e-9),
        met(c50 <= 1.5 * p50)
    );
    let mb = bytes as f64 / 1048576.0;
    println!(
        "export of the volume ({mb:.0} MiB qcow2), downloaded to a file: {:.0} MiB/s; qemu-img convert to a file {:.0} MiB/s; ratio {:.2} (goal ≥ 0.8: {}; best of {})",
        mb / by_api,
        mb / by_convert,
        by_convert / by_api,
        met(by_convert / by_api >= 0.8),
        rounds.max(3)
    );
    Ok(())
}
