//! `vmaas-bench terraform-plan` (issue 57, goal 6): OpenTofu's `plan` of N
//! `vmaas_virtual_machine` resources held in its state against the same
//! plan of N of Terraform's own `terraform_data`, and `apply` of M VMs
//! against M `terraform_data`, in one run. The server runs with
//! `--backend none` and the VMs are made `stopped`: recorded and STOPPED
//! at once, so what is timed is the tool, the provider and the API, not a
//! hypervisor (with a hypervisor the apply waits for the last READY, and
//! what it adds after that is `vmaas-bench terraform`'s figure).

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::scale::{Server, cpu_seconds_of, server_binary};
use crate::terraform::{TERRAFORM_DATA, Terraform, Workspace, apply_counted};
use crate::{percentile, verdict};

/// `vmaas-bench terraform-plan`'s arguments.
#[derive(clap::Args, Debug)]
pub struct PlanArgs {
    /// Resources in the state when planning.
    #[arg(long, default_value_t = 500)]
    pub vms: usize,
    /// Resources in the apply.
    #[arg(long, default_value_t = 100)]
    pub apply: usize,
    /// The OpenTofu binary (scripts/tools.sh prints VMAAS_TOFU).
    #[arg(long, env = "VMAAS_TOFU")]
    pub tofu: PathBuf,
    /// Directory holding terraform-provider-vmaas.
    #[arg(long)]
    pub plugins: PathBuf,
    /// The server binary [default: vmaas-server beside vmaas-bench].
    #[arg(long)]
    pub server: Option<PathBuf>,
}

/// N VMs, stopped, of the server's `simple_vm` template.
const VMS: &str = "terraform {\n  required_providers {\n    vmaas = { source = \"vmaas/vmaas\" }\n  }\n}\n\nvariable \"count_vms\" {\n  type = number\n}\n\nresource \"vmaas_virtual_machine\" \"vm\" {\n  count    = var.count_vms\n  name     = \"plan-${count.index}\"\n  template = \"simple_vm\"\n  state    = \"stopped\"\n}\n";

/// Plans timed per configuration (the median is the figure).
const PLANS: usize = 3;

/// The goal: each at most this many times `terraform_data`'s.
const GOAL: f64 = 1.5;

/// The median of `PLANS` timed `plan`s (after one untimed) of `n` resources in `w` (s). With
/// `held`, `w` holds them already and each plan must find nothing to do
/// (`-detailed-exitcode`: drift fails the run).
fn plans(w: &Workspace, api: (&str, &str), tf: &Terraform, n: usize, held: bool, server: &Server) -> anyhow::Result<Planned> {
    let count = format!("count_vms={n}");
    let mut args = vec!["plan", "-input=false", "-var", &count];
    if held {
        args.push("-detailed-exitcode");
    }
    w.run(tf, api, &args)?; // warm-up: not counted
    let pid = server.child.id().to_string();
    let (tool, served) = (children_cpu()?, cpu_seconds_of(&pid)?);
    let mut times = Vec::with_capacity(PLANS);
    for _ in 0..PLANS {
        times.push(w.run(tf, api, &args)?);
    }
    times.sort_by(f64::total_cmp);
    let per = |now: f64, before: f64| (now - before) / PLANS as f64;
    Ok(Planned { wall: percentile(&times, 0.5), tool: per(children_cpu()?, tool), server: per(cpu_seconds_of(&pid)?, served) })
}

/// CPU seconds of this process's waited-for children: the tool and,
/// through it, the provider.
fn children_cpu() -> anyhow::Result<f64> {
    vmaas_server::process_metrics::waited_children_cpu_seconds().context("reading /proc/self/stat")
}

/// A plan's time and the CPU it took, per plan.
struct Planned {
    wall: f64,
    tool: f64,
    server: f64,
}

/// Destroys what `w` holds (`n` resources).
fn destroy(w: &Workspace, api: (&str, &str), tf: &Terraform, n: usize) -> anyhow::Result<()> {
    let count = format!("count_vms={n}");
    tokio::task::block_in_place(|| w.run(tf, api, &["destroy", "-auto-approve", "-input=false", "-var", &count]))?;
    Ok(())
}

/// One line of the table: the figure, its baseline and the ratio.
fn line(what: &str, vmaas: f64, data: f64) {
    let ratio = vmaas / data;
    println!("  {what:<40} {vmaas:>7.2} s  {data:>7.2} s  {ratio:>5.2}×  (goal ≤ {GOAL}×: {})", verdict(ratio <= GOAL));
}

/// A plan's line, and below it the CPU each side took per plan.
fn plan_line(what: &str, vmaas: &Planned, data: &Planned) {
    line(what, vmaas.wall, data.wall);
    println!(
        "    CPU per plan: tool + provider {:.2} s, server {:.2} s   (terraform_data: tool {:.2} s, server {:.2} s)",
        vmaas.tool, vmaas.server, data.tool, data.server
    );
}

/// Runs the benchmark: `plan` of `plan_n` and `apply` of `apply_n`, by the
/// OpenTofu binary `tofu` with the provider in `plugins`, against `server`
/// (default: beside this binary) with `--backend none`.
pub async fn plan_bench(plan_n: usize, apply_n: usize, tofu: PathBuf, plugins: &Path, server: Option<PathBuf>) -> anyhow::Result<()> {
    let bin = server_binary(server)?;
    let dir = tempfile::tempdir()?;
    let srv = Server::start_on(&bin, dir.path(), None, None, &["--backend", "none"]).await?;
    let token = srv.token(&bin, "bench", false)?;
    let tpl = serde_json::json!({"object": {"id": "simple_vm", "parameters": [{"name": "vm_cpu_cores", "default": {"value": 2}}]}});
    let admin = srv.token(&bin, "ops", true)?;
    let url = format!("{}/api/fulfillment/v1/virtual_machine_templates", srv.base);
    srv.http.post(url).bearer_auth(admin).json(&tpl).send().await?.error_for_status()?;
    let api = (srv.base.as_str(), token.as_str());
    let tf = Terraform::binary("OpenTofu", tofu);
    println!("vmaas-bench terraform-plan: OpenTofu, --backend none, VMs `stopped`; vmaas_virtual_machine against terraform_data");
    println!("  {:<40} {:>9}  {:>9}  {:>6}", "", "vmaas", "t_data", "ratio");

    let (w, vm_apply) = apply_counted(VMS, api, &tf, apply_n, plugins)?;
    destroy(&w, api, &tf, apply_n)?;
    let (w, data_apply) = apply_counted(TERRAFORM_DATA, api, &tf, apply_n, plugins)?;
    destroy(&w, api, &tf, apply_n)?;
    line(&format!("apply of {apply_n}"), vm_apply, data_apply);

    let (fresh_vms, fresh_data) = (Workspace::new(VMS, plugins)?, Workspace::new(TERRAFORM_DATA, plugins)?);
    let (vm_plan, data_plan) = (plans(&fresh_vms, api, &tf, plan_n, false, &srv)?, plans(&fresh_data, api, &tf, plan_n, false, &srv)?);
    plan_line(&format!("plan of {plan_n} to create (median of {PLANS})"), &vm_plan, &data_plan);
    let (vms, _) = apply_counted(VMS, api, &tf, plan_n, plugins)?;
    let (data, _) = apply_counted(TERRAFORM_DATA, api, &tf, plan_n, plugins)?;
    let (vm_plan, data_plan) = (plans(&vms, api, &tf, plan_n, true, &srv)?, plans(&data, api, &tf, plan_n, true, &srv)?);
    plan_line(&format!("plan of {plan_n} in the state (median of {PLANS})"), &vm_plan, &data_plan);
    destroy(&vms, api, &tf, plan_n)?;
    destroy(&data, api, &tf, plan_n)?;
    Ok(())
}
