//! The benchmarks on real VMs: the qemu backend through the API, and
//! `terraform apply`. Each deletes what it creates and checks that no QEMU
//! process is left behind.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::json;
use vmaas_server::app::{App, Config};
use vmaas_server::auth::Role;

/// How often a waiting client looks at a VM: 5 ms, so that a figure is the
/// VM's time plus at most that (looking every 50 ms added 25 ms to each,
/// on average).
const LOOK: Duration = Duration::from_millis(5);

pub(crate) async fn timed_wait(c: &vmaas_client::Client, id: &str, target: vmaas_client::WaitFor) -> anyhow::Result<f64> {
    let t = Instant::now();
    c.wait_vm(id, target, Duration::from_secs(300), LOOK, |_| {}).await?;
    Ok(t.elapsed().as_secs_f64())
}

/// Pids of the QEMU processes whose command line names `dir`.
pub fn guests_of(dir: &std::path::Path) -> Vec<i32> {
    let needle = dir.display().to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd);
            cmd.contains("qemu-system") && cmd.contains(&needle)
        })
        .collect()
}

/// Fails if a QEMU of `dir` still runs: a benchmark deletes what it creates.
pub fn none_left(dir: &std::path::Path) -> anyhow::Result<()> {
    let left = guests_of(dir);
    if !left.is_empty() {
        bail!("QEMU processes left behind in {}: {left:?}", dir.display());
    }
    Ok(())
}

/// A server with the qemu backend, in-process, with the `tiny` template published.
pub(crate) struct QemuServer {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) endpoint: String,
    pub(crate) token: String,
    /// An administrator's token.
    pub(crate) admin: String,
    pub(crate) client: vmaas_client::Client,
    pub(crate) accel: &'static str,
}

pub(crate) async fn start_qemu_server(images: std::path::PathBuf) -> anyhow::Result<QemuServer> {
    start_qemu_server_with(images, true, false, 0).await
}

/// A server on the qemu backend; `snapshots`: VMs of the test guest start
/// from template snapshots (else every VM boots); `dense`: idle VMs packed
/// (64 virtual CPUs per host CPU, disks promised 20 times the file system:
/// they are copy-on-write), else the server's default overcommit.
pub(crate) async fn start_qemu_server_with(
    images: std::path::PathBuf,
    snapshots: bool,
    dense: bool,
    clone_tcg_cache_mib: u32,
) -> anyhow::Result<QemuServer> {
    let dir = tempfile::tempdir()?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let cfg = vmaas_qemu::QemuConfig {
        state_dir: dir.path().join("vms"),
        images: vmaas_qemu::images::Catalog::new(images, "test-guest".into()),
        pool: "127.43.0.0/24".parse().map_err(anyhow::Error::msg)?,
        accel: vmaas_qemu::accel::AccelChoice::Auto,
        qemu: "qemu-system-x86_64".into(),
        qemu_img: "qemu-img".into(),
        stop_grace: Duration::from_secs(30),
        egress: Vec::new(),
        uplinks: Vec::new(),
        image_sources: Default::default(),
        sysfs: "/sys".into(),
        gpu_aliases: Default::default(),
        snapshots,
        clone_tcg_cache_mib,
        platform: Default::default(),
    };
    let backend = Arc::new(vmaas_qemu::QemuBackend::new(cfg).await?);
    let accel = backend.accel().accel.as_str();
    let mut config = Config::new(format!("127.0.0.1:{port}").parse()?, dir.path().to_owned());
    if dense {
        (config.overcommit.cpu, config.overcommit.disk) = (64.0, 20.0);
    }
    let app = App::open(config, backend).await?;
    let admin = app.state.keys.issue("ops", "ops", Role::Admin, Duration::from_secs(3600))?;
    let token = app.state.keys.issue("bench", "bench", Role::Tenant, Duration::from_secs(3600))?;
    tokio::spawn(app.serve(std::future::pending()));
    let endpoint = format!("http://127.0.0.1:{port}");
    let adm = vmaas_client::Client::new(&endpoint, Some(admin.clone()))?;
    for _ in 0..100 {
        if adm.all_templates().await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let tiny: vmaas_model::VirtualMachineTemplate = serde_json::from_value(tiny_template())?;
    adm.create_template(&tiny).await?;
    let mut pick = tiny_template();
    pick["id"] = json!("pick");
    if let Some(p) = pick["parameters"].as_array_mut() {
        p.push(json!({"name": "vm_image", "type": "string", "default": {"value": "test-guest"}}));
    }
    let pick: vmaas_model::VirtualMachineTemplate = serde_json::from_value(pick)?;
    adm.create_template(&pick).await?;
    let client = vmaas_client::Client::new(&endpoint, Some(token.clone()))?;
    Ok(QemuServer { dir, endpoint, token, admin, client, accel })
}

/// A request for a VM of the `tiny` template named `name`.
pub(crate) fn tiny(name: impl Into<String>) -> vmaas_model::CreateVirtualMachine {
    vmaas_model::CreateVirtualMachine {
        type_url: None,
        id: Some(name.into()),
        metadata: None,
        spec: vmaas_model::VirtualMachineSpec::new("tiny"),
        status: None,
    }
}

/// A `tiny` VM named `name`, created and waited for until READY.
pub(crate) async fn ready_tiny(c: &vmaas_client::Client, name: &str) -> anyhow::Result<vmaas_model::VirtualMachine> {
    let vm = c.create_vm(&tiny(name)).await?;
    c.wait_vm(&vm.id, vmaas_client::WaitFor::Ready, Duration::from_secs(300), LOOK, |_| {}).await?.context("the VM went away")
}

/// The pid of VM `id`'s QEMU, from the server's data directory `dir`.
pub(crate) fn qemu_pid(dir: &std::path::Path, id: &str) -> Option<i32> {
    std::fs::read_to_string(dir.join("vms").join(id).join("qemu.pid")).ok()?.trim().parse().ok()
}

/// `terraform apply` of examples/terraform/ci-ephemeral with N VMs, against
/// the slowest VM's own create→READY, and the provider's overhead per VM
/// against the same N VMs made with direct API calls.
pub async fn terraform_bench(
    n: usize,
    images: std::path::PathBuf,
    tf: std::path::PathBuf,
    plugins: std::path::PathBuf,
) -> anyhow::Result<()> {
    use vmaas_client::WaitFor;
    let srv = start_qemu_server(images).await?;
    let work = tempfile::tempdir()?;
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/terraform/ci-ephemeral/main.tf");
    std::fs::copy(&example, work.path().join("main.tf"))?;
    let rc = work.path().join("tf.rc");
    std::fs::write(
        &rc,
        format!("provider_installation {{\n  dev_overrides {{\n    \"vmaas/vmaas\" = \"{}\"\n  }}\n  direct {{}}\n}}\n", plugins.display()),
    )?;
    let run = |args: &[&str]| -> anyhow::Result<f64> {
        let t = Instant::now();
        let out = std::process::Command::new(&tf)
            .args(args)
            .current_dir(work.path())
            .env("TF_CLI_CONFIG_FILE", &rc)
            .env("CHECKPOINT_DISABLE", "1")
            .env("VMAAS_ENDPOINT", &srv.endpoint)
            .env("VMAAS_TOKEN", &srv.token)
            .output()?;
        if !out.status.success() {
            bail!("terraform {args:?}: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        }
        Ok(t.elapsed().as_secs_f64())
    };
    let count = format!("count_vms={n}");
    // Warm-up: the first run pays for loading the plugin and reading the schema.
    run(&["plan", "-input=false", "-var", &count])?;
    let plan = run(&["plan", "-input=false", "-var", &count])?;
    let watcher = tokio::spawn(last_ready_seen(srv.client.clone(), n));
    let apply = tokio::task::block_in_place(|| run(&["apply", "-auto-approve", "-input=false", "-var", &count]))?;
    let ended = Instant::now();
    let lag = ended.saturating_duration_since(watcher.await??).as_secs_f64();
    let page = srv.client.list_vms(&vmaas_client::VmQuery::default()).await?;
    let mut slowest = 0f64;
    for vm in &page.items {
        let ready = vm.status.condition(vmaas_model::ConditionType::Ready).and_then(|c| c.last_transition_time).context("READY time")?;
        slowest = slowest.max((ready - vm.metadata.creation_timestamp).num_milliseconds() as f64 / 1000.0);
    }
    run(&["destroy", "-auto-approve", "-input=false", "-var", &count])?;

    let reqs: Vec<_> = (0..n).map(|i| tiny(format!("api-{i}"))).collect();
    let t = Instant::now();
    let c = &srv.client;
    let created = futures::future::try_join_all(reqs.iter().map(|r| c.create_vm(r))).await?;
    futures::future::try_join_all(created.iter().map(|vm| timed_wait(c, &vm.id, WaitFor::Ready))).await?;
    let direct = t.elapsed().as_secs_f64();
    futures::future::try_join_all(created.iter().map(|vm| c.delete_vm(&vm.id))).await?;
    futures::future::try_join_all(created.iter().map(|vm| timed_wait(c, &vm.id, WaitFor::Deleted))).await?;
    none_left(srv.dir.path())?;

    println!("vmaas-bench terraform: {} VMs from examples/terraform/ci-ephemeral, accelerator {}, {}", n, srv.accel, tf.display());
    println!("terraform apply                 {apply:.2} s");
    println!(
        "slowest VM create→READY         {slowest:.2} s   (apply − slowest = {:.2} s: terraform's own start and plan included)",
        apply - slowest
    );
    println!("terraform plan alone            {plan:.2} s   (its start, the provider's, the plan: in every apply before any create)");
    println!("last READY → apply done         {lag:.3} s  (goal ≤ 0.3 s; READY seen by a client looking every 5 ms)");
    println!("same {n} VMs by direct API calls {direct:.2} s   (provider overhead {:.2} s per VM)", (apply - direct) / n as f64);
    Ok(())
}

/// When this client first saw `n` VMs all READY, looking every 5 ms (at
/// most 10 minutes): the moment an apply waiting for them could end.
async fn last_ready_seen(c: vmaas_client::Client, n: usize) -> anyhow::Result<Instant> {
    let give_up = Instant::now() + Duration::from_secs(600);
    while Instant::now() < give_up {
        let page = c.list_vms(&vmaas_client::VmQuery::default()).await?;
        let ready = page.items.iter().filter(|v| v.status.state == vmaas_model::VmState::Ready).count();
        if ready >= n {
            return Ok(Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    bail!("the {n} VMs were not all READY in 10 minutes")
}

/// The `tiny` example template, as JSON.
pub fn tiny_template() -> serde_json::Value {
    json!({
        "id": "tiny",
        "parameters": [{"name": "vm_memory", "type": "quantity", "default": {"value": "256Mi"}}],
        "spec_defaults": {
            "image": "test-guest",
            "exposed_ports": [{"port": 80}],
            "readiness_probe": {"http": {"port": 80, "path": "/"}, "timeout_seconds": 120}
        }
    })
}
