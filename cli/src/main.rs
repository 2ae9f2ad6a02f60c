//! `vmaas`: the command line for tenants and administrators.

mod args;
mod catalog_items;
mod config;
mod console;
mod exit;
mod expose;
mod images;
mod instance_types;
mod login;
mod nat_gateways;
mod net;
mod output;
mod progress;
mod quota;
mod snapshots;
mod ssh;
mod sync;
mod vm_cmd;
mod vnc;
mod volumes;
mod watch;

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{CommandFactory, Parser, Subcommand};
use vmaas_client::{Client, VmQuery, WaitFor, describe_status};
use vmaas_model::vm::MetadataInput;
use vmaas_model::{
    ComputeInstanceCatalogItem, CreateVirtualMachine, ParameterValue, PatchVirtualMachine, PowerState, Template, VirtualMachine,
    VirtualMachineSpec, VirtualMachineTemplate,
};

use crate::output::Format;
use crate::vm_cmd::{PowerArgs, VmCmd, WaitTarget};

/// Manage vmaas virtual machines and templates.
#[derive(Parser, Debug)]
#[command(name = "vmaas", version, about)]
struct Cli {
    /// Server URL [default: from the config file, else http://127.0.0.1:8000].
    #[arg(long, global = true, env = "VMAAS_ENDPOINT")]
    endpoint: Option<String>,
    /// Bearer token [default: from the config file].
    #[arg(long, global = true, env = "VMAAS_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// PEM file of a CA (or of the server's self-signed certificate) to
    /// trust for an https endpoint [default: from the config file].
    #[arg(long, global = true, env = "VMAAS_CA_FILE")]
    ca_file: Option<PathBuf>,
    /// Skip the certificate check of an https endpoint (development only).
    #[arg(long, global = true, env = "VMAAS_INSECURE")]
    insecure: bool,
    /// Config file [default: ~/.config/vmaas/config.yaml].
    #[arg(long, global = true, env = "VMAAS_CONFIG")]
    config: Option<PathBuf>,
    /// The named profile of the config file to use (its `profiles:`)
    /// [default: the file's top-level settings].
    #[arg(long, global = true, env = "VMAAS_PROFILE")]
    profile: Option<String>,
    /// Output format.
    #[arg(short, long, global = true, value_enum, default_value = "table")]
    output: Format,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
#[allow(clippy::large_enum_variant, reason = "parsed once per run: boxing `Vm` saves nothing")]
enum Command {
    /// Virtual machines.
    #[command(subcommand, alias = "vms")]
    Vm(VmCmd),
    /// Virtual machine templates.
    #[command(subcommand, alias = "templates")]
    Template(TemplateCmd),
    /// Virtual networks.
    #[command(subcommand, alias = "networks")]
    Network(net::NetworkCmd),
    /// Subnets of virtual networks.
    #[command(subcommand, alias = "subnets")]
    Subnet(net::SubnetCmd),
    /// Security groups of virtual networks.
    #[command(subcommand, name = "security-group", alias = "security-groups")]
    SecurityGroup(net::SecurityGroupCmd),
    /// Addresses from external IP pools, and their attachments to VMs.
    #[command(subcommand, name = "external-ip", alias = "external-ips")]
    ExternalIp(expose::ExternalIpCmd),
    /// OS images VMs boot from.
    #[command(subcommand, alias = "images")]
    Image(images::ImageCmd),
    /// NAT gateways: a virtual network's way out, from one external IP.
    #[command(subcommand, name = "nat-gateway", alias = "nat-gateways")]
    NatGateway(nat_gateways::NatGatewayCmd),
    /// Load balancers over VMs of one subnet.
    #[command(subcommand, name = "load-balancer", alias = "load-balancers")]
    LoadBalancer(expose::LoadBalancerCmd),
    /// Volumes: block storage that outlives VMs.
    #[command(subcommand, alias = "volumes")]
    Volume(volumes::VolumeCmd),
    /// Snapshots of a VM's disks, and restores from them.
    #[command(subcommand, alias = "snapshots")]
    Snapshot(snapshots::SnapshotCmd),
    /// Instance types: named machine shapes.
    #[command(subcommand, name = "instance-type", alias = "instance-types")]
    InstanceType(instance_types::InstanceTypeCmd),
    /// Catalog items: curated offerings over a template.
    #[command(subcommand, name = "catalog-item", alias = "catalog-items")]
    CatalogItem(catalog_items::CatalogItemCmd),
    /// A tenant's quota: limits (set by administrators) and usage.
    #[command(subcommand, alias = "quotas")]
    Quota(quota::QuotaCmd),
    /// Save the endpoint, token, CA file and --insecure in the config
    /// file; with --device, sign in at an OIDC provider for the token.
    Login {
        /// Server URL.
        #[arg(long = "server")]
        server: Option<String>,
        /// Signing in at an OIDC provider.
        #[command(flatten)]
        device: login::DeviceArgs,
    },
    /// Print a shell completion script.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

#[derive(Subcommand, Debug)]
enum TemplateCmd {
    /// List templates.
    #[command(alias = "ls")]
    List(args::ListArgs),
    /// Show a template and its parameters.
    Get {
        /// Template id.
        id: String,
    },
    /// Publish a template from a YAML or JSON file (administrators).
    Create {
        /// The file.
        #[arg(short, long)]
        file: PathBuf,
    },
    /// Replace a template from a YAML or JSON file (administrators).
    Update {
        /// The file.
        #[arg(short, long)]
        file: PathBuf,
    },
    /// Delete a template no VM uses (administrators).
    Delete {
        /// Template id.
        id: String,
    },
    /// Make the server's templates match a directory of files (administrators).
    Sync {
        /// Directory of *.yaml, *.yml and *.json template files.
        dir: PathBuf,
        /// Do not delete templates that have no file.
        #[arg(long)]
        no_prune: bool,
        /// Show what would change, change nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

/// Reports progress of a wait on stderr, one line per change.
fn progress_printer(quiet: bool) -> impl FnMut(&VirtualMachine) {
    let started = Instant::now();
    move |vm: &VirtualMachine| {
        if !quiet {
            eprintln!("[{:>5.1}s] {}: {}", started.elapsed().as_secs_f64(), vm.metadata.name, describe_status(vm));
        }
    }
}

async fn wait(client: &Client, vm: &VirtualMachine, target: WaitFor, timeout: Duration) -> anyhow::Result<Option<VirtualMachine>> {
    let quiet = !std::io::stderr().is_terminal() && std::env::var_os("VMAAS_PROGRESS").is_none();
    Ok(client.wait_vm(&vm.id, target, timeout, Duration::from_millis(500), progress_printer(quiet)).await?)
}

fn read_template_file(path: &std::path::Path) -> anyhow::Result<VirtualMachineTemplate> {
    let dir_report = sync::read_dir_file(path)?;
    Ok(dir_report)
}

async fn typed_params(client: &Client, template: &str, params: &[String]) -> anyhow::Result<BTreeMap<String, ParameterValue>> {
    let wire = client.get_template(template).await.with_context(|| format!("looking up template {template:?}"))?;
    let t = Template::compile(wire.published()).map_err(|e| anyhow::anyhow!("template {template:?} is invalid: {e}"))?;
    let mut out = BTreeMap::new();
    let mut problems = Vec::new();
    for p in params {
        let Some((k, v)) = p.split_once('=') else {
            problems.push(format!("-p {p:?}: expected NAME=VALUE"));
            continue;
        };
        match t.value_from_text(k, v) {
            Ok(json) => {
                out.insert(k.to_owned(), ParameterValue::new(json));
            }
            Err(reason) => problems.push(format!("-p {k}: {reason}")),
        }
    }
    if !problems.is_empty() {
        return Err(exit::Usage(format!("bad parameters:\n  {}", problems.join("\n  "))).into());
    }
    Ok(out)
}

async fn set_power(client: &Client, args: &PowerArgs, state: PowerState, format: Format) -> anyhow::Result<()> {
    let vm = client.find_vm(&args.vm).await?;
    let patch = PatchVirtualMachine {
        metadata: Some(MetadataInput { version: Some(vm.metadata.version), ..Default::default() }),
        spec: vmaas_model::vm::SpecPatch { state: Some(state), ..Default::default() },
        ..Default::default()
    };
    let mut vm = client.patch_vm(&vm.id, &patch).await?;
    if args.wait
        && let Some(v) = wait(client, &vm, state.into(), args.timeout).await?
    {
        vm = v;
    }
    output::vm(format, &vm)
}

/// Stops VM `args.vm` with a new `placement`: the server moves it to a
/// cluster that placement admits (waited for with `--wait`: STOPPED there).
async fn move_vm(client: &Client, args: &PowerArgs, placement: vmaas_model::Placement, format: Format) -> anyhow::Result<()> {
    let vm = client.find_vm(&args.vm).await?;
    let spec = vmaas_model::vm::SpecPatch { state: Some(PowerState::Stopped), placement: Some(placement), ..Default::default() };
    let metadata = Some(MetadataInput { version: Some(vm.metadata.version), ..Default::default() });
    let to = spec.placement.as_ref().and_then(|p| p.cluster.clone());
    let mut vm = client.patch_vm(&vm.id, &PatchVirtualMachine { metadata, spec, ..Default::default() }).await?;
    if args.wait {
        vm = moved(client, vm, to, args.timeout).await?;
    }
    output::vm(format, &vm)
}

/// VM `vm` once STOPPED, and on cluster `to` when the move named one (a
/// move acknowledged late still shows the VM STOPPED where it was).
async fn moved(client: &Client, mut vm: VirtualMachine, to: Option<String>, timeout: Duration) -> anyhow::Result<VirtualMachine> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if let Some(v) = wait(client, &vm, WaitFor::Stopped, deadline.saturating_duration_since(std::time::Instant::now())).await? {
            vm = v;
        }
        if to.is_none() || vm.status.cluster == to {
            return Ok(vm);
        }
        if std::time::Instant::now() >= deadline {
            let on = vm.status.cluster.as_deref().unwrap_or("none");
            anyhow::bail!("virtual machine {:?} is still on cluster {on} after {timeout:?}", vm.metadata.name);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let cfg_path = cli.config.clone().unwrap_or_else(config::default_path);
    let format = cli.output;
    if let Command::Completions { shell } = cli.command {
        clap_complete::generate(shell, &mut Cli::command(), "vmaas", &mut std::io::stdout());
        return Ok(());
    }
    if let Command::Login { server, device } = &cli.command {
        let given = login::Given {
            server: server.clone().or(cli.endpoint.clone()),
            token: cli.token.clone(),
            ca_file: cli.ca_file.clone(),
            insecure: cli.insecure,
            profile: cli.profile.clone(),
        };
        return login::run(&cfg_path, given, device).await;
    }
    let flags =
        config::Flags { endpoint: cli.endpoint, token: cli.token, ca_file: cli.ca_file, insecure: cli.insecure, profile: cli.profile };
    let client = config::client(flags, &cfg_path)?;
    match cli.command {
        Command::Completions { .. } | Command::Login { .. } => unreachable!("handled above"),
        Command::Template(cmd) => match cmd {
            TemplateCmd::List(l) => {
                let ts = client.all_templates_where(l.filter()?.as_deref()).await?;
                output::templates(format, &ts, ts.len() as u64)
            }
            TemplateCmd::Get { id } => output::template(format, &client.get_template(&id).await?),
            TemplateCmd::Create { file } => output::template(format, &client.create_template(&read_template_file(&file)?).await?),
            TemplateCmd::Update { file } => {
                let t = read_template_file(&file)?;
                output::template(format, &client.update_template(&t).await?)
            }
            TemplateCmd::Delete { id } => {
                client.delete_template(&id).await?;
                eprintln!("template {id:?} deleted");
                Ok(())
            }
            TemplateCmd::Sync { dir, no_prune, dry_run } => {
                let r = sync::sync(&client, &dir, !no_prune, dry_run).await?;
                if format == Format::Table {
                    let verb = if dry_run { "would be " } else { "" };
                    for (what, ids) in [
                        ("created", &r.created),
                        ("updated", &r.updated),
                        ("deleted", &r.deleted),
                        ("unchanged", &r.unchanged),
                        ("kept (in use)", &r.kept),
                    ] {
                        if !ids.is_empty() {
                            println!("{verb}{what}: {}", ids.join(", "));
                        }
                    }
                    Ok(())
                } else {
                    output::structured(format, &r)
                }
            }
        },
        Command::Network(cmd) => net::network(&client, cmd, format).await,
        Command::Subnet(cmd) => net::subnet(&client, cmd, format).await,
        Command::SecurityGroup(cmd) => net::security_group(&client, cmd, format).await,
        Command::ExternalIp(cmd) => expose::external_ip(&client, cmd, format).await,
        Command::NatGateway(cmd) => nat_gateways::nat_gateway(&client, cmd, format).await,
        Command::Image(cmd) => images::image(&client, cmd, format).await,
        Command::LoadBalancer(cmd) => expose::load_balancer(&client, cmd, format).await,
        Command::Volume(cmd) => volumes::volume(&client, cmd, format).await,
        Command::Snapshot(cmd) => snapshots::snapshot(&client, cmd, format).await,
        Command::InstanceType(cmd) => instance_types::instance_type(&client, cmd, format).await,
        Command::CatalogItem(cmd) => catalog_items::catalog_item(&client, cmd, format).await,
        Command::Quota(cmd) => quota::quota(&client, cmd, format).await,
        Command::Vm(cmd) => match cmd {
            VmCmd::Create {
                name,
                template,
                catalog_item,
                clone_of,
                clone_of_snapshot,
                params,
                stopped,
                auto_external_ip,
                subnets,
                ssh_keys,
                user_data,
                image,
                instance_type,
                ttl,
                cluster,
                placement_labels,
                boot_disk,
                disks,
                wait: do_wait,
                timeout,
            } => {
                let placement = vmaas_model::Placement { cluster, labels: placement_labels.into_iter().collect() };
                let item = match &catalog_item {
                    Some(i) => Some(client.find_object::<ComputeInstanceCatalogItem>(catalog_items::PATH, i).await?),
                    None => None,
                };
                let template_parameters = match item.as_ref().map(|i| &i.spec.template).or(template.as_ref()) {
                    Some(t) => typed_params(&client, t, &params).await?,
                    None if params.is_empty() => BTreeMap::new(),
                    None => {
                        return Err(exit::Usage(
                            "--param needs --template: a clone takes its source's parameters, or all of them with its template".into(),
                        )
                        .into());
                    }
                };
                let clone_of = (clone_of.is_some() || clone_of_snapshot.is_some())
                    .then_some(vmaas_model::CloneOf { compute_instance: clone_of, snapshot: clone_of_snapshot });
                let (ssh_public_key, user_data) = args::guest_config(&ssh_keys, user_data.as_deref())?;
                let req = CreateVirtualMachine {
                    type_url: None,
                    id: None,
                    metadata: Some(MetadataInput { name: Some(name), ..Default::default() }),
                    spec: VirtualMachineSpec {
                        template: template.unwrap_or_default(),
                        catalog_item: item.map(|i| i.id),
                        template_parameters,
                        state: if stopped { PowerState::Stopped } else { PowerState::Started },
                        network_attachments: subnets,
                        user_data,
                        ssh_public_key,
                        image: image.map(|source_ref| vmaas_model::vm::VmImage { source_type: String::new(), source_ref }),
                        placement: Some(placement).filter(|p| !p.is_empty()),
                        instance_type: instance_type.map(|name| vmaas_model::InstanceTypeReference { id: String::new(), name }),
                        ttl,
                        expires_at: None,
                        clone_of,
                        boot_disk,
                        additional_disks: disks,
                        auto_external_ip_attachment: auto_external_ip,
                    },
                    status: None,
                };
                let mut vm = client.create_vm(&req).await?;
                if do_wait && let Some(v) = wait(&client, &vm, vm.spec.state.into(), timeout).await? {
                    vm = v;
                }
                output::vm(format, &vm)
            }
            VmCmd::List { state, name, offset, limit, list } => {
                let page = client.list_vms(&VmQuery { name, state, offset, limit, filter: list.filter()? }).await?;
                output::vms(format, &page.items, page.total)
            }
            VmCmd::Get { vm, watch: true } => watch::vm(&client, &vm, format).await,
            VmCmd::Get { vm, watch: false } => output::vm(format, &client.find_vm(&vm).await?),
            VmCmd::Start(args) => set_power(&client, &args, PowerState::Started, format).await,
            VmCmd::Stop(args) => set_power(&client, &args, PowerState::Stopped, format).await,
            VmCmd::Pause(args) => set_power(&client, &args, PowerState::Paused, format).await,
            VmCmd::Resume(args) => set_power(&client, &args, PowerState::Started, format).await,
            VmCmd::Restart(args) => {
                let vm = client.find_vm(&args.vm).await?;
                let mut vm = client.restart_vm(&vm.id).await?;
                if args.wait
                    && let Some(v) = wait(&client, &vm, WaitFor::Ready, args.timeout).await?
                {
                    vm = v;
                }
                output::vm(format, &vm)
            }
            VmCmd::Migrate { node, power: args } => {
                let vm = client.find_vm(&args.vm).await?;
                let mut vm = client.migrate_vm(&vm.id, node.as_deref()).await?;
                if args.wait
                    && let Some(v) = wait(&client, &vm, WaitFor::Ready, args.timeout).await?
                {
                    vm = v;
                }
                output::vm(format, &vm)
            }
            VmCmd::Move { cluster, placement_labels, power: args } => {
                let placement = vmaas_model::Placement { cluster, labels: placement_labels.into_iter().collect() };
                move_vm(&client, &args, placement, format).await
            }
            VmCmd::Delete { vm, retain_snapshots, wait: do_wait, timeout } => {
                let vm = client.find_vm(&vm).await?;
                let deleting =
                    if retain_snapshots { client.delete_vm_keeping_snapshots(&vm.id).await? } else { client.delete_vm(&vm.id).await? };
                if do_wait {
                    wait(&client, &deleting, WaitFor::Deleted, timeout).await?;
                    eprintln!("virtual machine {:?} deleted", vm.metadata.name);
                    Ok(())
                } else {
                    output::vm(format, &deleting)
                }
            }
            VmCmd::Console { vm, batch, idle, history } => {
                let vm = client.find_vm(&vm).await?;
                console::run(&client, &vm.id, &vm.metadata.name, console::Options { batch, idle, history }).await
            }
            VmCmd::Vnc { vm, listen, once } => {
                let vm = client.find_vm(&vm).await?;
                vnc::run(&client, &vm.id, &vm.metadata.name, listen, once).await
            }
            VmCmd::Ssh(args) => ssh::run(&client, args).await,
            VmCmd::Export { vm, file, checksum } => {
                let vm = client.find_vm(&vm).await?;
                snapshots::download(&client, &format!("/virtual_machines/{}/export", vm.id), &file, checksum).await
            }
            VmCmd::Logs { vm } => {
                let vm = client.find_vm(&vm).await?;
                let log = client.console_log(&vm.id).await?;
                use std::io::Write;
                std::io::stdout().write_all(&log)?;
                Ok(())
            }
            VmCmd::Wait { vm, target, timeout } => {
                let vm = match client.find_vm(&vm).await {
                    // Already gone is what --for deleted waits for.
                    Err(e) if e.is_not_found() && matches!(target, WaitTarget::Deleted) => {
                        eprintln!("virtual machine {vm:?} deleted");
                        return Ok(());
                    }
                    other => other?,
                };
                let target = match target {
                    WaitTarget::Ready => WaitFor::Ready,
                    WaitTarget::Stopped => WaitFor::Stopped,
                    WaitTarget::Deleted => WaitFor::Deleted,
                };
                match wait(&client, &vm, target, timeout).await? {
                    Some(vm) => output::vm(format, &vm),
                    None => {
                        eprintln!("virtual machine {:?} deleted", vm.metadata.name);
                        Ok(())
                    }
                }
            }
        },
    }
}

fn main() {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            std::process::exit(exit::FAILED);
        }
    };
    if let Err(e) = rt.block_on(run(cli)) {
        eprintln!("error: {e:#}");
        if let Some(vmaas_client::Error::Api { details, .. }) = e.downcast_ref::<vmaas_client::Error>() {
            for d in details {
                eprintln!("  {}: {}", d.field, d.reason);
            }
        }
        std::process::exit(exit::code(&e));
    }
}
