//! `vmaas-bench shapes`: machine shapes on real guests.
//! - create→READY of the test guest booting EFI (OVMF with Secure Boot,
//!   from its EFI system partition; and the same with a TPM) beside the
//!   same guest booting BIOS, cold, and from a template snapshot (a TPM
//!   guest always boots cold: its TPM's identity is its own);
//! - a live resize (1 → 2 vCPUs and 256 → 512 MiB): from the PATCH sent to
//!   the guest seeing both, watched by a shell loop on its serial console.

use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::json;
use vmaas_client::{Client, WaitFor};
use vmaas_model::vm::SpecPatch;
use vmaas_model::{CreateVirtualMachine, ParameterValue, PatchVirtualMachine, VirtualMachineSpec, VirtualMachineTemplate};

use crate::percentile;
use crate::storage::{seen, send};
use crate::vms::{QemuServer, none_left, start_qemu_server_with};

/// The test guest by BIOS, by EFI with Secure Boot, and with a TPM too.
fn templates() -> anyhow::Result<Vec<VirtualMachineTemplate>> {
    let probe = json!({"http": {"port": 80, "path": "/"}, "period_seconds": 1, "timeout_seconds": 300});
    let t = |id: &str, defaults: serde_json::Value| -> anyhow::Result<VirtualMachineTemplate> {
        let mut d = json!({"disk_size": "256Mi", "memory": "512Mi", "readiness_probe": probe});
        for (k, v) in defaults.as_object().into_iter().flatten() {
            d[k] = v.clone();
        }
        Ok(serde_json::from_value(json!({"id": id, "spec_defaults": d}))?)
    };
    Ok(vec![
        t("bios", json!({"image": "test-guest"}))?,
        t("efi", json!({"image": "test-guest-efi", "firmware": "efi", "secure_boot": true}))?,
        t("efi-tpm", json!({"image": "test-guest-efi", "firmware": "efi", "secure_boot": true, "tpm": true}))?,
        serde_json::from_value(json!({"id": "resizable", "parameters": [
            {"name": "vm_cpu_cores", "type": "integer", "default": {"value": 1}},
            {"name": "vm_memory", "type": "quantity", "default": {"value": "256Mi"}}],
            "spec_defaults": {"image": "test-guest", "disk_size": "256Mi", "max_cpu_cores": 2, "max_memory": "1Gi", "readiness_probe": probe}}))?,
    ])
}

fn vm(name: String, template: &str) -> CreateVirtualMachine {
    CreateVirtualMachine { type_url: None, id: Some(name), metadata: None, spec: VirtualMachineSpec::new(template), status: None }
}

async fn server(images: std::path::PathBuf, snapshots: bool) -> anyhow::Result<QemuServer> {
    let srv = start_qemu_server_with(images, snapshots, false, 0).await?;
    let admin = Client::new(&srv.endpoint, Some(srv.admin.clone()))?;
    for t in templates()? {
        admin.create_template(&t).await?;
    }
    Ok(srv)
}

/// `n` VMs of `template` one after another: each one's create→READY (s).
async fn ready_times(c: &Client, template: &str, n: usize) -> anyhow::Result<Vec<f64>> {
    let mut out = Vec::new();
    for i in 0..n {
        let t = Instant::now();
        let v = c.create_vm(&vm(format!("{template}-{i}"), template)).await?;
        c.wait_vm(&v.id, WaitFor::Ready, Duration::from_secs(300), Duration::from_millis(20), |_| {}).await?.context("the VM went away")?;
        out.push(t.elapsed().as_secs_f64());
        gone(c, &v.id).await?;
    }
    Ok(out)
}

/// Deletes VM `id` and waits until it is gone.
async fn gone(c: &Client, id: &str) -> anyhow::Result<()> {
    c.delete_vm(id).await?;
    c.wait_vm(id, WaitFor::Deleted, Duration::from_secs(120), Duration::from_millis(20), |_| {}).await?;
    Ok(())
}

fn line(what: &str, mut secs: Vec<f64>) -> Option<f64> {
    secs.sort_by(f64::total_cmp);
    if secs.is_empty() {
        return None;
    }
    let p50 = percentile(&secs, 0.5);
    println!("  {what:<40} p50 {p50:6.2} s  max {:6.2} s  ({} VMs)", secs.last().copied().unwrap_or(0.0), secs.len());
    Some(p50)
}

/// One live resize of a new VM: PATCH sent → the guest sees 2 vCPUs and
/// 256 MiB more (s).
async fn one_resize(c: &Client, i: usize) -> anyhow::Result<f64> {
    let v = c.create_vm(&vm(format!("grow-{i}"), "resizable")).await?;
    c.wait_vm(&v.id, WaitFor::Ready, Duration::from_secs(300), Duration::from_millis(20), |_| {}).await?.context("the VM went away")?;
    let session = c.console_session(&v.id).await?;
    let (mut ws, _) = tokio_tungstenite::connect_async(c.console_url(&session).as_str()).await?;
    // The loop waits in the guest; its marker is built by the shell, so the echoed command never matches.
    let watch = "m0=$(sed -n 's/MemTotal: *\\([0-9]*\\).*/\\1/p' /proc/meminfo); echo WATCH-$((1+1)); \
        while [ $(nproc) -lt 2 ] || [ $(sed -n 's/MemTotal: *\\([0-9]*\\).*/\\1/p' /proc/meminfo) -lt $((m0 + 250000)) ]; do :; done; \
        echo GROWN-$((40+2))";
    send(&mut ws, &format!("\n{watch}")).await?;
    seen(&mut ws, "WATCH-2", Duration::from_secs(30)).await?;
    let params = [("vm_cpu_cores", json!(2)), ("vm_memory", json!("512Mi"))];
    let patch = PatchVirtualMachine {
        spec: SpecPatch {
            template_parameters: Some(params.into_iter().map(|(k, v)| (k.to_owned(), ParameterValue::new(v))).collect()),
            ..Default::default()
        },
        ..Default::default()
    };
    let t = Instant::now();
    c.patch_vm(&v.id, &patch).await?;
    let grown = seen(&mut ws, "GROWN-42", Duration::from_secs(60)).await?;
    drop(ws);
    gone(c, &v.id).await?;
    Ok(grown.duration_since(t).as_secs_f64())
}

/// Runs the benchmark: `vms` VMs per boot path, `resizes` live resizes.
pub async fn shapes(vms: usize, resizes: usize, images: std::path::PathBuf) -> anyhow::Result<()> {
    println!("vmaas-bench shapes: {vms} VMs per boot path, {resizes} live resizes");
    let cold = server(images.clone(), false).await?;
    println!("  accelerator {}, {} cores", cold.accel, std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1));
    let bios_cold = line("BIOS, cold: create→READY", ready_times(&cold.client, "bios", vms).await?);
    let efi_cold = line("EFI+SB, cold: create→READY", ready_times(&cold.client, "efi", vms).await?);
    line("EFI+SB+TPM, cold: create→READY", ready_times(&cold.client, "efi-tpm", vms).await?);
    none_left(cold.dir.path())?;
    drop(cold);
    let warm = server(images, true).await?;
    // The first VM of each makes its template's snapshot: not counted.
    ready_times(&warm.client, "bios", 1).await?;
    ready_times(&warm.client, "efi", 1).await?;
    let bios_snap = line("BIOS, from a snapshot: create→READY", ready_times(&warm.client, "bios", vms).await?);
    let efi_snap = line("EFI+SB, from a snapshot: create→READY", ready_times(&warm.client, "efi", vms).await?);
    line("EFI+SB+TPM, snapshots on (boots cold)", ready_times(&warm.client, "efi-tpm", vms).await?);
    let mut resized = Vec::new();
    for i in 0..resizes {
        resized.push(one_resize(&warm.client, i).await?);
    }
    let resize = line("live resize: PATCH→guest sees it", resized);
    none_left(warm.dir.path())?;
    if let (Some(b), Some(e)) = (bios_cold, efi_cold) {
        println!("  EFI cold / BIOS cold: {:.2}×", e / b);
    }
    if let (Some(b), Some(e)) = (bios_snap, efi_snap) {
        let met = if e <= 1.5 * b { "met" } else { "NOT MET" };
        println!("  EFI / BIOS from a snapshot: {:.2}× (goal ≤ 1.5×: {met})", e / b);
    }
    if let Some(r) = resize {
        println!("  live resize p50 {r:.2} s (goal ≤ 1 s: {})", if r <= 1.0 { "met" } else { "NOT MET" });
    }
    Ok(())
}
