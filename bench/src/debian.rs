//! `vmaas-bench qemu --image debian`: VMs of the `debian` example template
//! (Debian 12: systemd, cloud-init, OpenSSH) through the API, booted cold
//! and then from a template snapshot, one after another in one run:
//! create→READY (READY: cloud-init has finished, the template's probe says
//! so), and each VM's SSH host key, read on its serial console: every VM,
//! clone or not, must have its own.

use std::time::{Duration, Instant};

use anyhow::bail;
use vmaas_client::{Client, WaitFor};
use vmaas_model::VirtualMachineTemplate;

use crate::percentile;
use crate::storage::{read_until, send};
use crate::vms::{none_left, of_template, ready, start_qemu_server_with, timed_wait};

/// The template, as the examples publish it.
const DEBIAN: &str = include_str!("../../examples/templates/debian.yaml");
/// How long one Debian VM may take to be READY (a cold boot under TCG).
const READY_LIMIT: Duration = Duration::from_secs(400);

/// What one mode measured.
struct Figures {
    /// The first VM's create→READY (from snapshots: it makes the snapshot).
    first: f64,
    /// The other VMs' create→READY, sorted.
    ready: Vec<f64>,
    /// Every VM's ed25519 host key (its base64 part).
    keys: Vec<String>,
}

/// A `debian` VM named `name`, created and waited for until READY; its id and seconds.
async fn ready_debian(c: &Client, name: &str) -> anyhow::Result<(String, f64)> {
    let t = Instant::now();
    let vm = ready(c, &of_template("debian", name), READY_LIMIT).await?;
    Ok((vm.id, t.elapsed().as_secs_f64()))
}

/// VM `id`'s ed25519 host key, read on its serial console (root is logged in there).
async fn host_key(c: &Client, id: &str) -> anyhow::Result<String> {
    let session = c.console_session(id).await?;
    let (mut ws, _) = tokio_tungstenite::connect_async(c.console_url(&session).as_str()).await?;
    send(&mut ws, "").await?;
    // The marker is built by the shell, so the echoed command never matches.
    send(&mut ws, "echo \"HK$((1+1))=$(cut -d' ' -f2 /etc/ssh/ssh_host_ed25519_key.pub)\"").await?;
    let whole_line = |text: &str| text.split_once("HK2=").is_some_and(|(_, rest)| rest.contains('\n'));
    let text = read_until(&mut ws, "HK2=", Duration::from_secs(60), whole_line).await?;
    let key = text.split("HK2=").nth(1).and_then(|rest| rest.split_whitespace().next()).unwrap_or_default();
    if key.len() < 40 {
        bail!("VM {id} has no ed25519 host key: {text:?}");
    }
    Ok(key.to_owned())
}

/// One mode: a first VM, then `vms` more one after another; every one's
/// host key; all deleted.
async fn one_mode(images: std::path::PathBuf, snapshots: bool, vms: usize) -> anyhow::Result<Figures> {
    let srv = start_qemu_server_with(images, snapshots, false, 0).await?;
    let (dir, c) = (&srv.dir, &srv.client);
    let template: VirtualMachineTemplate = serde_norway::from_str(DEBIAN)?;
    Client::new(&srv.endpoint, Some(srv.admin.clone()))?.create_template(&template).await?;
    let (first_id, first) = ready_debian(c, "first").await?;
    let (mut ids, mut ready) = (vec![first_id], Vec::new());
    for i in 0..vms {
        let (id, secs) = ready_debian(c, &format!("seq-{i}")).await?;
        ids.push(id);
        ready.push(secs);
    }
    let mut keys = Vec::new();
    for id in &ids {
        keys.push(host_key(c, id).await?);
    }
    for id in &ids {
        c.delete_vm(id).await?;
    }
    for id in &ids {
        timed_wait(c, id, WaitFor::Deleted).await?;
    }
    none_left(dir.path())?;
    ready.sort_by(|a, b| a.total_cmp(b));
    Ok(Figures { first, ready, keys })
}

/// How many of `keys` no other one shares.
fn distinct(keys: &[String]) -> usize {
    keys.iter().filter(|k| keys.iter().filter(|o| o == k).count() == 1).count()
}

fn print(what: &str, f: &Figures, goal: f64) {
    let p50 = percentile(&f.ready, 0.5);
    println!("{what}:");
    println!("  first VM → READY {:.1} s", f.first);
    println!(
        "  create→READY p50 {p50:.1} s   p95 {:.1} s   (n={}; goal p50 ≤ {goal:.0} s: {})",
        percentile(&f.ready, 0.95),
        f.ready.len(),
        if p50 <= goal { "met" } else { "not met" }
    );
    println!("  host keys: {} of {} VMs have their own", distinct(&f.keys), f.keys.len());
}

/// Runs the benchmark: `vms` VMs after a first one, cold, then from a snapshot.
pub async fn debian(vms: usize, images: std::path::PathBuf) -> anyhow::Result<()> {
    if !images.join("debian-12/image.json").exists() {
        bail!("no debian-12 image in {}: build it with scripts/debian-image.sh", images.display());
    }
    println!(
        "vmaas-bench qemu --image debian: the debian template (512Mi, 1 core), {} cores, {vms} VMs one after another after a first; cold boots, then from a template snapshot",
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
    );
    let cold = one_mode(images.clone(), false, vms).await?;
    print("cold boot (--vm-snapshots=false)", &cold, 60.0);
    let snap = one_mode(images, true, vms).await?;
    print("from a template snapshot (the default; the first VM makes it)", &snap, 5.0);
    let (c, s) = (percentile(&cold.ready, 0.5), percentile(&snap.ready, 0.5));
    println!("snapshot / cold: create→READY p50 {:.2}x ({s:.1} s against {c:.1} s)", s / c.max(1e-9));
    Ok(())
}
