//! The benchmarks on real VMs through the API (`terraform apply` is in
//! `terraform.rs`): a server with the qemu backend, the `tiny` template,
//! waits. Each deletes what it creates and checks that no QEMU process is
//! left behind.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::json;
use vmaas_server::auth::Role;
use vmaas_server::startup::{App, Config};

/// How often a waiting client looks at a VM: 5 ms, so that a figure is the
/// VM's time plus at most that (looking every 50 ms added 25 ms to each,
/// on average).
pub(crate) const LOOK: Duration = Duration::from_millis(5);

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
        // Images are imported only from the benchmarks' own file server on loopback.
        image_sources: vmaas_qemu::sources::SourcePolicy::parse(&["127.0.0.1".to_owned()]).map_err(anyhow::Error::msg)?,
        sysfs: "/sys".into(),
        gpu_aliases: Default::default(),
        snapshots,
        clone_tcg_cache_mib,
        platform: Default::default(),
        nat: Default::default(),
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
    of_template("tiny", name)
}

/// A request for a VM of `template` named `name`.
pub(crate) fn of_template(template: &str, name: impl Into<String>) -> vmaas_model::CreateVirtualMachine {
    vmaas_model::CreateVirtualMachine {
        type_url: None,
        id: Some(name.into()),
        metadata: None,
        spec: vmaas_model::VirtualMachineSpec::new(template),
        status: None,
    }
}

/// A `tiny` VM named `name`, created and waited for until READY.
pub(crate) async fn ready_tiny(c: &vmaas_client::Client, name: &str) -> anyhow::Result<vmaas_model::VirtualMachine> {
    ready(c, &tiny(name), Duration::from_secs(300)).await
}

/// The VM `req` asks for, created and waited for until READY (at most `limit`).
pub(crate) async fn ready(
    c: &vmaas_client::Client,
    req: &vmaas_model::CreateVirtualMachine,
    limit: Duration,
) -> anyhow::Result<vmaas_model::VirtualMachine> {
    let vm = c.create_vm(req).await?;
    c.wait_vm(&vm.id, vmaas_client::WaitFor::Ready, limit, LOOK, |_| {}).await?.context("the VM went away")
}

/// The pid of VM `id`'s QEMU, from the server's data directory `dir`.
pub(crate) fn qemu_pid(dir: &std::path::Path, id: &str) -> Option<i32> {
    std::fs::read_to_string(dir.join("vms").join(id).join("qemu.pid")).ok()?.trim().parse().ok()
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
