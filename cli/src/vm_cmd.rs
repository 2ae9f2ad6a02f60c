//! The `vmaas vm` verbs and their arguments.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use vmaas_model::{NetworkAttachment, VmDisk};

use crate::{args, ssh};

#[derive(Subcommand, Debug)]
#[allow(clippy::large_enum_variant, reason = "parsed once per run: boxing `Create` saves nothing")]
pub(crate) enum VmCmd {
    /// Create a VM from a template.
    Create {
        /// Name, unique in your tenant.
        name: String,
        /// Template id (a clone takes its source's unless given).
        #[arg(short, long, required_unless_present_any = ["clone_of", "clone_of_snapshot", "catalog_item"])]
        template: Option<String>,
        /// Make it from this catalog item (name or id): its template and defaults, and the fields it fixes.
        #[arg(long, value_name = "ITEM", conflicts_with = "template")]
        catalog_item: Option<String>,
        /// Make it a clone of this VM (name or id): its disks copied, its own identity.
        #[arg(long, value_name = "VM", conflicts_with = "clone_of_snapshot")]
        clone_of: Option<String>,
        /// Make it a clone of this snapshot (name or id): its disks as taken, its own identity.
        #[arg(long, value_name = "SNAPSHOT")]
        clone_of_snapshot: Option<String>,
        /// Template parameter, as NAME=VALUE (typed by the template; lists are comma-separated).
        #[arg(short = 'p', long = "param", value_name = "NAME=VALUE")]
        params: Vec<String>,
        /// Create it powered off.
        #[arg(long)]
        stopped: bool,
        /// Give it an external IP from the default pool, attached as it is made, named as the VM and deleted with it.
        #[arg(long)]
        auto_external_ip: bool,
        /// A NIC on a subnet, as NAME[,ip=ADDR][,sg=GROUP…]; repeat for several NICs.
        #[arg(long = "subnet", value_name = "NAME[,ip=ADDR][,sg=GROUP]", value_parser = args::parse_attachment)]
        subnets: Vec<NetworkAttachment>,
        /// An SSH public key, or a file of them (e.g. ~/.ssh/id_ed25519.pub); repeat for several.
        #[arg(long = "ssh-key", value_name = "KEY|FILE")]
        ssh_keys: Vec<String>,
        /// A file of cloud-init user data (#cloud-config, a script…), in place of the template's.
        #[arg(long = "user-data", value_name = "FILE")]
        user_data: Option<PathBuf>,
        /// The image it boots, in place of the template's: a name or id from `vmaas image list`, or an http(s) URL imported on demand.
        #[arg(long, value_name = "NAME|URL")]
        image: Option<String>,
        /// Its instance type (`vmaas instance-type list`): its cores and memory replace the template's defaults.
        #[arg(long, value_name = "NAME")]
        instance_type: Option<String>,
        /// How long it lives (30m, 2h, 1d…): the server deletes it then, with its auto-delete volumes.
        #[arg(long, value_name = "DURATION")]
        ttl: Option<String>,
        /// The cluster it runs on, when the server drives several (`vmaas` places it otherwise).
        #[arg(long)]
        cluster: Option<String>,
        /// A label the cluster it runs on must have, as KEY=VALUE; repeat for several.
        #[arg(long = "placement-label", value_name = "KEY=VALUE", value_parser = args::parse_label)]
        placement_labels: Vec<(String, String)>,
        /// Its boot disk, when not the template's: SIZE_GIB[:TIER] (at least the template's size).
        #[arg(long, value_name = "SIZE_GIB[:TIER]", value_parser = args::parse_disk)]
        boot_disk: Option<VmDisk>,
        /// An empty disk beside the template's, as SIZE_GIB[:TIER]; repeat for several (disk1, disk2, …).
        #[arg(long = "disk", value_name = "SIZE_GIB[:TIER]", value_parser = args::parse_disk)]
        disks: Vec<VmDisk>,
        /// Wait until it is READY (or STOPPED with --stopped).
        #[arg(long)]
        wait: bool,
        /// How long --wait waits.
        #[arg(long, default_value = "10m", value_parser = humantime::parse_duration)]
        timeout: Duration,
    },
    /// List VMs.
    #[command(alias = "ls")]
    List {
        /// Only VMs in this state (READY, STOPPED, PROGRESSING, FAILED, DELETING).
        #[arg(long)]
        state: Option<String>,
        /// Only the VM with this name.
        #[arg(long)]
        name: Option<String>,
        /// Skip this many.
        #[arg(long)]
        offset: Option<u64>,
        /// Show at most this many.
        #[arg(long)]
        limit: Option<u64>,
        #[command(flatten)]
        list: crate::args::ListArgs,
    },
    /// Show a VM.
    Get {
        /// Name or id.
        vm: String,
        /// Then print each change as it happens, until the VM is deleted.
        #[arg(short, long)]
        watch: bool,
    },
    /// Power a VM on.
    Start(PowerArgs),
    /// Power a VM off.
    Stop(PowerArgs),
    /// Freeze a running VM: its vCPUs stop, its memory and devices are kept (qemu backend).
    Pause(PowerArgs),
    /// Let a paused VM go on where it was.
    Resume(PowerArgs),
    /// Restart a running VM (its guest is stopped and booted again).
    Restart(PowerArgs),
    /// Move a running VM to another host without stopping it (administrators).
    Migrate {
        /// The node to move to [default: the backend's choice].
        #[arg(long)]
        node: Option<String>,
        #[command(flatten)]
        power: PowerArgs,
    },
    /// Move a VM to another cluster, when the server drives several: it is
    /// stopped, its boot disk copied there, and it stays stopped there.
    Move {
        /// The cluster to move it to.
        #[arg(long, required_unless_present = "placement_labels")]
        cluster: Option<String>,
        /// A label the cluster must have, as KEY=VALUE; repeat for several.
        #[arg(long = "placement-label", value_name = "KEY=VALUE", value_parser = args::parse_label)]
        placement_labels: Vec<(String, String)>,
        #[command(flatten)]
        power: PowerArgs,
    },
    /// Delete a VM and everything it has.
    #[command(alias = "rm")]
    Delete {
        /// Name or id.
        vm: String,
        /// Keep its snapshots (they are deleted with it by default).
        #[arg(long)]
        retain_snapshots: bool,
        /// Wait until it is gone.
        #[arg(long)]
        wait: bool,
        /// How long --wait waits.
        #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
        timeout: Duration,
    },
    /// Attach to a VM's serial console (interactive on a terminal; Ctrl-] leaves).
    ///
    /// Without a terminal (or with --batch) it sends standard input and prints
    /// the output until the guest is quiet for --idle.
    Console {
        /// Name or id.
        vm: String,
        /// Non-interactive: send stdin, print the output.
        #[arg(long)]
        batch: bool,
        /// Batch mode: stop after this long without output.
        #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
        idle: Duration,
        /// Batch mode: print the buffered output first.
        #[arg(long)]
        history: bool,
    },
    /// Show a VM's screen to a VNC viewer on this machine: listens on
    /// --listen (loopback, a free port by default; the address is printed)
    /// and carries each viewer's RFB to the VM's graphical console.
    Vnc {
        /// Name or id.
        vm: String,
        /// Where viewers connect.
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: std::net::SocketAddr,
        /// Serve one viewer, then exit.
        #[arg(long)]
        once: bool,
    },
    /// SSH to a VM's external address (`-- COMMAND` runs one command).
    Ssh(ssh::SshArgs),
    /// Download a stopped VM's boot disk as one qcow2 file (its checksum checked); `vmaas image import` takes it back.
    Export {
        /// Name or id.
        vm: String,
        /// The file to write (`-o` is the output format, as everywhere).
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
        /// The checksum the download is checked against: sha256, or crc32 (a sixth of the cost, on both sides).
        #[arg(long, default_value = "sha256", value_parser = str::parse::<vmaas_model::checksum::Checksum>)]
        checksum: vmaas_model::checksum::Checksum,
    },
    /// Print a VM's buffered serial console output.
    Logs {
        /// Name or id.
        vm: String,
    },
    /// Wait until a VM is READY, STOPPED or deleted.
    Wait {
        /// Name or id.
        vm: String,
        /// What to wait for.
        #[arg(long = "for", value_enum, default_value = "ready")]
        target: WaitTarget,
        /// How long to wait.
        #[arg(long, default_value = "10m", value_parser = humantime::parse_duration)]
        timeout: Duration,
    },
}

#[derive(Args, Debug)]
pub(crate) struct PowerArgs {
    /// Name or id.
    pub(crate) vm: String,
    /// Wait until it gets there.
    #[arg(long)]
    pub(crate) wait: bool,
    /// How long --wait waits.
    #[arg(long, default_value = "10m", value_parser = humantime::parse_duration)]
    pub(crate) timeout: Duration,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum WaitTarget {
    Ready,
    Stopped,
    Deleted,
}
