//! Issue 57's goal 1, `vmaas-bench snapshots --export-only`: the export of
//! a stopped VM's boot disk (the test guest's disk grown by 1 GiB, that
//! GiB written with random bytes by `qemu-io` while the VM is stopped) as a
//! client receives and verifies it, against `qemu-img convert -O qcow2` of
//! the same disk to a file, side by side in one run, round after round:
//! - through `vmaas-client` (the digest as a trailer, hashed by the server
//!   as it sends and by the client on a thread of its own);
//! - the same with `?checksum=crc32` (CRC-32 instead of SHA-256 on both
//!   sides, a client's choice);
//! - asking for the digest first, as clients not saying `TE: trailers` do
//!   (the server hashes the file before its first byte; this client
//!   hashes inline as it writes): what every export was before.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::StreamExt;
use tokio::io::AsyncWriteExt;
use vmaas_client::WaitFor;

use crate::percentile;
use crate::vms::{QemuServer, none_left, ready_tiny, start_qemu_server};

/// Grown by this much, all of it written.
const GROWN: u64 = 1 << 30;

/// Runs `rounds` rounds of the four, on one VM's disk.
pub async fn report(rounds: usize, images: std::path::PathBuf) -> anyhow::Result<()> {
    let srv = start_qemu_server(images).await?;
    let c = &srv.client;
    let vm = ready_tiny(c, "export").await?;
    let patch = vmaas_model::PatchVirtualMachine {
        spec: vmaas_model::vm::SpecPatch { state: Some(vmaas_model::PowerState::Stopped), ..Default::default() },
        ..Default::default()
    };
    c.patch_vm(&vm.id, &patch).await?;
    c.wait_vm(&vm.id, WaitFor::Stopped, Duration::from_secs(120), Duration::from_millis(50), |_| {}).await?;
    let disk = srv.dir.path().join("vms").join(&vm.id).join("disk.qcow2");
    grow(&disk, srv.dir.path())?;
    let out = tempfile::tempdir_in(srv.dir.path())?;
    let (mut trailer, mut crc, mut first, mut convert, mut hashing, mut bytes) = (vec![], vec![], vec![], vec![], vec![], 0);
    let path = format!("/virtual_machines/{}/export", vm.id);
    for i in 0..rounds {
        let dest = out.path().join(format!("{i}.qcow2"));
        let t = Instant::now();
        bytes = c.download_export(&path, &dest, |_, _| {}).await?.bytes;
        trailer.push(t.elapsed().as_secs_f64());
        hashing.push(sha256_alone(&dest).await?);
        std::fs::remove_file(&dest)?;
        let t = Instant::now();
        let got = c.download_export_checked(&path, &dest, vmaas_model::checksum::Checksum::Crc32, |_, _| {}).await?.bytes;
        crc.push(t.elapsed().as_secs_f64());
        if got != bytes {
            bail!("the CRC-32 export gave {got} bytes, the SHA-256 one {bytes}");
        }
        std::fs::remove_file(&dest)?;
        let t = Instant::now();
        digest_first(&srv, &vm.id, &dest).await?;
        first.push(t.elapsed().as_secs_f64());
        std::fs::remove_file(&dest)?;
        let t = Instant::now();
        let st = std::process::Command::new("qemu-img").args(["convert", "-U", "-O", "qcow2"]).arg(&disk).arg(&dest).status()?;
        convert.push(t.elapsed().as_secs_f64());
        if !st.success() {
            bail!("qemu-img convert failed");
        }
        std::fs::remove_file(&dest)?;
    }
    c.delete_vm(&vm.id).await?;
    c.wait_vm(&vm.id, WaitFor::Deleted, Duration::from_secs(120), Duration::from_millis(50), |_| {}).await?;
    none_left(srv.dir.path())?;
    let mib = bytes as f64 / f64::from(1 << 20);
    let p50 = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        (percentile(v, 0.5), v[0])
    };
    let ((t50, tmin), (f50, fmin), (c50, cmin)) = (p50(&mut trailer), p50(&mut first), p50(&mut convert));
    let (k50, kmin) = p50(&mut crc);
    let (h50, _) = p50(&mut hashing);
    println!("export of a stopped VM's disk grown by 1 GiB of random bytes ({mib:.0} MiB of qcow2), {rounds} rounds, p50 / best:");
    println!("  qemu-img convert -O qcow2 to a file: {c50:.3} / {cmin:.3} s ({:.0} MiB/s at p50)", mib / c50);
    println!(
        "  SHA-256 of the downloaded file alone (page cache, one thread): {h50:.3} s; a client checking it cannot beat that: ratio at most {:.2}",
        c50 / h50
    );
    let runs = [
        ("SHA-256 as a trailer (vmaas-client)", t50, tmin),
        ("CRC-32 as a trailer (vmaas-client, ?checksum=crc32)", k50, kmin),
        ("SHA-256 first (no TE: trailers)", f50, fmin),
    ];
    for (what, p, b) in runs {
        let ratio = c50 / p;
        let met = if ratio >= 0.8 { "met" } else { "NOT MET" };
        println!(
            "  export, {what}: {p:.3} / {b:.3} s ({:.0} MiB/s); ratio to convert at p50 {ratio:.2}, best {:.2} (goal ≥ 0.8: {met})",
            mib / p,
            cmin / b
        );
    }
    Ok(())
}

/// The seconds one SHA-256 pass over the file at `path` takes (read
/// from the page cache, on one thread): what a client's check costs at
/// the least.
async fn sha256_alone(path: &Path) -> anyhow::Result<f64> {
    let p = path.to_owned();
    tokio::task::spawn_blocking(move || -> anyhow::Result<f64> {
        use sha2::Digest;
        let t = Instant::now();
        std::io::copy(&mut std::fs::File::open(&p)?, &mut sha2::Sha256::new())?;
        Ok(t.elapsed().as_secs_f64())
    })
    .await?
}

/// Grows the qcow2 file `disk` by [`GROWN`] and writes that much of random
/// bytes (a file of them made in `scratch`) where it grew.
fn grow(disk: &Path, scratch: &Path) -> anyhow::Result<()> {
    let info = run("qemu-img", &["info".as_ref(), "--output=json".as_ref(), disk.as_os_str()])?;
    let info: serde_json::Value = serde_json::from_slice(&info)?;
    let end = info["virtual-size"].as_u64().context("the disk's virtual size")?;
    run("qemu-img", &["resize".as_ref(), disk.as_os_str(), format!("+{GROWN}").as_ref()])?;
    let random = scratch.join("random");
    run("head", &["-c".as_ref(), GROWN.to_string().as_ref(), "/dev/urandom".as_ref()]).and_then(|b| Ok(std::fs::write(&random, b)?))?;
    let write = format!("write -q -s {} {end} {GROWN}", random.display());
    run("qemu-io", &["-f".as_ref(), "qcow2".as_ref(), "-c".as_ref(), write.as_ref(), disk.as_os_str()])?;
    std::fs::remove_file(&random)?;
    Ok(())
}

/// Runs `cmd` with `args`: its output, or why it failed.
fn run(cmd: &str, args: &[&std::ffi::OsStr]) -> anyhow::Result<Vec<u8>> {
    let out = std::process::Command::new(cmd).args(args).output().with_context(|| format!("running {cmd}"))?;
    if !out.status.success() {
        bail!("{cmd} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(out.stdout)
}

/// The export of VM `id` into `dest` without `TE: trailers` (the digest
/// before the body), hashed inline as it is written, and checked.
async fn digest_first(srv: &QemuServer, id: &str, dest: &Path) -> anyhow::Result<()> {
    use sha2::Digest;
    let url = format!("{}/api/fulfillment/v1/virtual_machines/{id}/export", srv.endpoint);
    let rsp = reqwest::Client::new().get(url).bearer_auth(&srv.token).send().await?.error_for_status()?;
    let said = rsp.headers().get("x-checksum-sha256").and_then(|v| v.to_str().ok()).context("no X-Checksum-Sha256")?.to_owned();
    let mut out = tokio::fs::File::create(dest).await?;
    let mut hash = sha2::Sha256::new();
    let mut body = rsp.bytes_stream();
    while let Some(chunk) = body.next().await {
        let chunk = chunk?;
        hash.update(&chunk);
        out.write_all(&chunk).await?;
    }
    out.flush().await?;
    if format!("{:x}", hash.finalize()) != said {
        bail!("the export's digest is not the one announced");
    }
    Ok(())
}
