//! `vmaas snapshot`: snapshots of a VM's disks (taken while it runs or
//! while it is stopped), and restoring a VM from one.

use std::time::Duration;

use clap::Subcommand;
use vmaas_client::Client;
use vmaas_model::checksum::Checksum;
use vmaas_model::{ComputeInstanceSnapshot, ComputeInstanceSnapshotSpec, ComputeInstanceSnapshotState, CreateObject};

use crate::Format;
use crate::net::{named, one, page};
use crate::volumes::wait_for;

const SNAPSHOTS: &str = "/compute_instance_snapshots";

/// `vmaas snapshot …`.
#[derive(Subcommand, Debug)]
pub enum SnapshotCmd {
    /// Take a snapshot of a VM's disks (its own and its volumes'), running or stopped.
    Create {
        /// Name, unique in your tenant.
        name: String,
        /// The VM, by name or id.
        #[arg(long)]
        vm: String,
        /// Wait until it is READY.
        #[arg(long)]
        wait: bool,
    },
    /// List your snapshots (of one VM with --vm).
    #[command(alias = "ls")]
    List {
        /// Only those of this VM, by name or id.
        #[arg(long)]
        vm: Option<String>,
        #[command(flatten)]
        list: crate::args::ListArgs,
    },
    /// Show one, by name or id.
    Get {
        /// Name or id.
        snapshot: String,
    },
    /// Bring its VM's disks back to it; a running VM needs --stop.
    Restore {
        /// The snapshot, by name or id.
        snapshot: String,
        /// Stop the VM for the restore if it runs (it starts again afterwards).
        #[arg(long)]
        stop: bool,
        /// Wait until the VM is READY again (or STOPPED, if it was).
        #[arg(long)]
        wait: bool,
        /// How long --wait waits.
        #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
        timeout: Duration,
    },
    /// Download one of its disks as one qcow2 file (its checksum checked); `vmaas image import` takes it back.
    Export {
        /// The snapshot, by name or id.
        snapshot: String,
        /// The file to write (`-o` is the output format, as everywhere).
        #[arg(short = 'f', long = "file")]
        file: std::path::PathBuf,
        /// The disk, as `vmaas snapshot get -o json` names it (default: the boot disk).
        #[arg(long)]
        disk: Option<String>,
        /// The checksum the download is checked against: sha256, or crc32 (a sixth of the cost, on both sides).
        #[arg(long, default_value = "sha256", value_parser = str::parse::<Checksum>)]
        checksum: Checksum,
    },
    /// Delete one and its data.
    #[command(alias = "rm")]
    Delete {
        /// Name or id.
        snapshot: String,
    },
}

const HEADER: [&str; 7] = ["NAME", "STATE", "VM", "ONLINE", "SIZE", "TAKEN", "ID"];

fn row(s: &ComputeInstanceSnapshot) -> Vec<String> {
    let taken = s.status.taken_at.map(|t| t.format("%Y-%m-%d %H:%M:%S").to_string()).unwrap_or_default();
    vec![
        s.metadata.name.clone(),
        state(s),
        s.spec.compute_instance.clone(),
        if s.status.online { "yes" } else { "no" }.into(),
        crate::output::bytes(s.status.size_bytes),
        taken,
        s.id.clone(),
    ]
}

fn state(s: &ComputeInstanceSnapshot) -> String {
    let mut out = s.status.state.as_str().trim_start_matches("COMPUTE_INSTANCE_SNAPSHOT_STATE_").to_owned();
    if let Some(m) = s.status.message.as_ref().filter(|_| s.status.state != ComputeInstanceSnapshotState::Ready) {
        out.push_str(&format!(": {m}"));
    }
    out
}

async fn create(client: &Client, name: String, vm: String, wait: bool) -> anyhow::Result<ComputeInstanceSnapshot> {
    let spec = ComputeInstanceSnapshotSpec { compute_instance: vm };
    let req = CreateObject { type_url: None, id: None, metadata: named(name), spec, status: None };
    let s: ComputeInstanceSnapshot = client.create_object(SNAPSHOTS, &req).await?;
    if !wait {
        return Ok(s);
    }
    let done = wait_for::<ComputeInstanceSnapshot>(client, SNAPSHOTS, &s.id, state, |s| match s.map(|s| s.status.state) {
        Some(ComputeInstanceSnapshotState::Ready) => Ok(true),
        Some(ComputeInstanceSnapshotState::Failed) => Err(format!("snapshot failed: {}", s.map(state).unwrap_or_default())),
        None => Err("the snapshot is gone".into()),
        _ => Ok(false),
    });
    Ok(done.await?.unwrap_or(s))
}

async fn restore(client: &Client, snapshot: &str, stop: bool, wait: bool, timeout: Duration, format: Format) -> anyhow::Result<()> {
    let s: ComputeInstanceSnapshot = client.find_object(SNAPSHOTS, snapshot).await?;
    let vm = client.restore_vm(&s.spec.compute_instance, &s.id, stop).await?;
    eprintln!("restoring virtual machine {:?} from snapshot {:?}", vm.metadata.name, s.metadata.name);
    if !wait {
        return crate::output::vm(format, &vm);
    }
    let done = crate::wait(client, &vm, vm.spec.state.into(), timeout).await?.unwrap_or(vm);
    crate::output::vm(format, &done)
}

/// Downloads the export at `path` into `output`, checked against its
/// checksum `c`, showing progress on a terminal.
pub(crate) async fn download(client: &Client, path: &str, output: &std::path::Path, c: Checksum) -> anyhow::Result<()> {
    let mut bar = crate::progress::Bar::new();
    eprintln!("exporting to {}", output.display());
    let done = client.download_export_checked(path, output, c, |n, total| bar.show(n, Some(total))).await?;
    bar.end();
    eprintln!("wrote {} ({}), {} {}", output.display(), crate::output::bytes(done.bytes), done.checksum, done.digest);
    Ok(())
}

/// Runs a `vmaas snapshot` command.
pub async fn snapshot(client: &Client, cmd: SnapshotCmd, format: Format) -> anyhow::Result<()> {
    match cmd {
        SnapshotCmd::Create { name, vm, wait } => {
            let s = create(client, name, vm, wait).await?;
            one(format, &s, row(&s), &HEADER)
        }
        SnapshotCmd::List { vm, list } => {
            let mut filter: Vec<String> = list.filter()?.into_iter().collect();
            if let Some(vm) = vm {
                let vm = client.find_vm(&vm).await?;
                filter.push(format!("this.spec.compute_instance == '{}'", vm.id));
            }
            let filter = (!filter.is_empty()).then(|| filter.join(" && "));
            page(format, &client.list_objects_where::<ComputeInstanceSnapshot>(SNAPSHOTS, filter.as_deref()).await?, row, &HEADER)
        }
        SnapshotCmd::Get { snapshot } => {
            let s: ComputeInstanceSnapshot = client.find_object(SNAPSHOTS, &snapshot).await?;
            one(format, &s, row(&s), &HEADER)
        }
        SnapshotCmd::Restore { snapshot, stop, wait, timeout } => restore(client, &snapshot, stop, wait, timeout, format).await,
        SnapshotCmd::Export { snapshot, file, disk, checksum } => {
            let s: ComputeInstanceSnapshot = client.find_object(SNAPSHOTS, &snapshot).await?;
            let query = disk.map(|d| format!("?disk={d}")).unwrap_or_default();
            download(client, &format!("{SNAPSHOTS}/{}/export{query}", s.id), &file, checksum).await
        }
        SnapshotCmd::Delete { snapshot } => {
            let s: ComputeInstanceSnapshot = client.find_object(SNAPSHOTS, &snapshot).await?;
            let s: ComputeInstanceSnapshot = client.delete_object(SNAPSHOTS, &s.id).await?;
            one(format, &s, row(&s), &HEADER)
        }
    }
}
