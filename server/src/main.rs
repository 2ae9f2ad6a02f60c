//! `vmaas-server`: serve the API (the default), or print a token.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand, ValueEnum};
use vmaas_backend::Backend;
use vmaas_qemu::accel::{Accel, AccelChoice};
use vmaas_qemu::egress::EgressPolicy;
use vmaas_qemu::images::Catalog;
use vmaas_qemu::sources::FetchLimits;
use vmaas_qemu::{QemuBackend, QemuConfig};
use vmaas_server::auth::{KEY_FILE, Keys, Role};
use vmaas_server::capacity::Overcommit;
use vmaas_server::clusters;
use vmaas_server::flags::FlagError;
use vmaas_server::kubevirt_flags::KubevirtArgs;
use vmaas_server::none_backend::NoBackend;
use vmaas_server::pools::Pools;
use vmaas_server::serve::HttpLimits;
use vmaas_server::startup::{App, Config, DataDirLock};

/// mimalloc, not glibc's malloc: a buffer allocated on one runtime thread
/// and freed on another made glibc's threads wait on each other's arena locks.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The vmaas fulfillment server.
#[derive(Parser, Debug)]
#[command(name = "vmaas-server", version, about, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve the API and reconcile VMs (what runs without a subcommand).
    Serve(ServeArgs),
    /// Print a bearer token signed with the server's key.
    Token(TokenArgs),
    /// List (--dry-run) or remove what the host holds that no stored object
    /// owns (what the server quarantines). Run it with the server stopped.
    Gc(GcArgs),
}

#[derive(Args, Debug)]
struct GcArgs {
    #[command(flatten)]
    serve: ServeArgs,
    /// Only list what would be removed.
    #[arg(long)]
    dry_run: bool,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum BackendKind {
    /// Real VMs on this host under QEMU (KVM or TCG).
    Qemu,
    /// The same model on a Kubernetes cluster, through KubeVirt.
    Kubevirt,
    /// Record VMs without running them (API only).
    None,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum AccelArg {
    /// KVM if it really runs guests here, else TCG.
    Auto,
    /// Hardware virtualization.
    Kvm,
    /// Software emulation.
    Tcg,
}

#[derive(Args, Debug, Clone)]
struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "VMAAS_LISTEN", default_value = "127.0.0.1:8000")]
    listen: SocketAddr,
    /// Directory for the database, the token key and VM files.
    #[arg(long, env = "VMAAS_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// PostgreSQL URL (postgres://user@host/db) for several replicas; SQLite in the data directory otherwise.
    #[arg(long, env = "VMAAS_DATABASE_URL")]
    database_url: Option<String>,
    /// Token signing key file (default: DATA_DIR/jwt-hs256.key). Replicas must share it.
    #[arg(long, env = "VMAAS_JWT_KEY_FILE")]
    jwt_key_file: Option<PathBuf>,
    /// What runs the VMs.
    #[arg(long, env = "VMAAS_BACKEND", value_enum, default_value = "qemu")]
    backend: BackendKind,
    /// qemu: directory of base images [default: ~/.local/share/vmaas/images].
    #[arg(long, env = "VMAAS_IMAGES_DIR")]
    images_dir: Option<PathBuf>,
    /// The image (kubevirt: the DataSource) a template's `default` image means.
    #[arg(long, env = "VMAAS_DEFAULT_IMAGE", default_value = "test-guest")]
    default_image: String,
    /// qemu: loopback addresses each VM gets for its exposed ports and
    /// its load balancers (its `externalIP` while no external IP is attached).
    #[arg(long, env = "VMAAS_VM_ADDRESS_POOL", default_value = "127.42.0.0/16")]
    vm_address_pool: vmaas_qemu::pool::Cidr,
    /// External IP pools, `[NAME=]CIDR`, repeatable; the first is the
    /// default (named `default` unless named). Addresses the host serves.
    #[arg(long = "external-ip-pool", env = "VMAAS_EXTERNAL_IP_POOLS", value_delimiter = ',', default_value = vmaas_server::pools::DEFAULT_RANGE)]
    external_ip_pools: Vec<vmaas_server::pools::Pool>,
    /// qemu: accelerator.
    #[arg(long, env = "VMAAS_ACCEL", value_enum, default_value = "auto")]
    accel: AccelArg,
    /// qemu: the QEMU binary.
    #[arg(long, env = "VMAAS_QEMU", default_value = "qemu-system-x86_64")]
    qemu: PathBuf,
    /// qemu: time a guest gets to power off before it is stopped hard.
    #[arg(long, env = "VMAAS_STOP_GRACE", default_value = "30s", value_parser = humantime::parse_duration)]
    stop_grace: Duration,
    /// Time between reconcile passes when nothing changes (e.g. 1s, 500ms).
    #[arg(long, env = "VMAAS_RECONCILE_INTERVAL", default_value = "1s", value_parser = humantime::parse_duration)]
    reconcile_interval: Duration,
    /// Objects reconciled at once (one object never twice at once); by
    /// default the backend's: 8 for qemu, 32 per cluster for kubevirt.
    #[arg(long, env = "VMAAS_RECONCILE_WORKERS", value_parser = clap::value_parser!(u16).range(1..=1024))]
    reconcile_workers: Option<u16>,
    /// qemu: networks whose guests may open connections beyond them, as the
    /// host (`default` is the network every VM has). Closed unless listed.
    #[arg(long, env = "VMAAS_GUEST_EGRESS", value_delimiter = ',')]
    guest_egress: Vec<String>,
    /// qemu: physical L2 uplinks, `NETWORK=IFACE` (repeatable): the subnets
    /// of the virtual network NETWORK (its id, or `TENANT/NAME`) are joined
    /// to the host TAP device IFACE (or to a TAP of the server's own added
    /// to IFACE if it is a bridge). Needs CAP_NET_ADMIN.
    #[arg(long = "uplink", env = "VMAAS_UPLINKS", value_delimiter = ',', value_parser = parse_uplink)]
    uplinks: Vec<(String, String)>,
    /// qemu: where NAT gateways may take guests (comma-separated): `public`
    /// (any globally routable address), addresses and networks. Loopback,
    /// private, link-local, documentation and other special-purpose
    /// addresses, and the host's own, only when named here; the server's
    /// own listening sockets never.
    #[arg(long, env = "VMAAS_NAT_ALLOW", value_delimiter = ',', default_value = "public")]
    nat_allow: Vec<String>,
    /// qemu: the network namespace NAT gateways' flows leave from (e.g.
    /// /run/netns/egress); default: the server's own. Needs CAP_SYS_ADMIN.
    #[arg(long, env = "VMAAS_NAT_NETNS")]
    nat_netns: Option<PathBuf>,
    /// qemu: names of GPU models, `NAME=VENDOR:DEVICE` (repeatable), e.g.
    /// `nvidia.com/A10=10de:2236`: a template's GPU `device_name` is a
    /// name given here or the PCI ids themselves.
    #[arg(long = "gpu-alias", env = "VMAAS_GPU_ALIASES", value_delimiter = ',', value_parser = parse_gpu_alias)]
    gpu_aliases: Vec<(String, String)>,
    /// qemu: start VMs of images with the clone hook (the test guest) from
    /// a snapshot of a template booted once per image and shape, instead of
    /// booting them (`false`: every VM boots).
    #[arg(long, env = "VMAAS_VM_SNAPSHOTS", default_value_t = true, action = clap::ArgAction::Set)]
    vm_snapshots: bool,
    /// qemu, under TCG: the translation cache of each VM started from a
    /// snapshot, in MiB (QEMU's `tb-size`); 0 keeps QEMU's default. What
    /// it uses of the cache is the largest part of an idle clone's own
    /// memory (about 30 MiB of 64): 16 MiB holds a clone to about 48 MiB
    /// and takes it to READY in twice the time (a full cache is flushed
    /// and translated again).
    #[arg(long, env = "VMAAS_CLONE_TCG_CACHE_MIB", default_value_t = 0)]
    clone_tcg_cache_mib: u32,
    /// qemu: where OVMF's firmware files are (guests whose profile asks for EFI).
    #[arg(long, env = "VMAAS_OVMF_DIR", default_value = "/usr/share/OVMF")]
    ovmf_dir: PathBuf,
    /// qemu: the swtpm program (guests whose profile asks for a TPM).
    #[arg(long, env = "VMAAS_SWTPM", default_value = "swtpm")]
    swtpm: PathBuf,
    /// qemu: where the host's sysfs is mounted (GPUs bound to vfio-pci are found under it).
    #[arg(long, env = "VMAAS_SYSFS_ROOT", default_value = "/sys")]
    sysfs_root: PathBuf,
    /// Accept a database other than the one this data directory records (or
    /// an empty one while it holds VMs); VMs it does not know are quarantined.
    #[arg(long, env = "VMAAS_ADOPT_STORE")]
    adopt_store: bool,
    /// Time a client has to send a request's headers (and to start the next
    /// request on a kept-alive connection).
    #[arg(long, env = "VMAAS_HTTP_HEADER_TIMEOUT", default_value = "10s", value_parser = humantime::parse_duration)]
    http_header_timeout: Duration,
    /// Time a client has to send a request's whole body (an image upload:
    /// the longest wait for its next bytes).
    #[arg(long, env = "VMAAS_HTTP_BODY_TIMEOUT", default_value = "30s", value_parser = humantime::parse_duration)]
    http_body_timeout: Duration,
    /// How long an HTTP/2 connection with no request in flight stays open.
    #[arg(long, env = "VMAAS_HTTP_IDLE_TIMEOUT", default_value = "60s", value_parser = humantime::parse_duration)]
    http_idle_timeout: Duration,
    /// Connections served at once; when full, a new one takes the place of
    /// the oldest that was never answered, else it is answered 503.
    #[arg(long, env = "VMAAS_MAX_CONNECTIONS", default_value_t = 1024)]
    max_connections: usize,
    /// Connections one client address may have open at once; more are
    /// answered 503 (behind a proxy every client has the proxy's address:
    /// raise it to --max-connections there).
    #[arg(long, env = "VMAAS_MAX_CONNECTIONS_PER_CLIENT", default_value_t = 256)]
    max_connections_per_client: usize,
    /// Largest request body in bytes; larger ones are answered 413.
    #[arg(long, env = "VMAAS_MAX_BODY_BYTES", default_value_t = 1 << 20)]
    max_body_bytes: usize,
    /// Virtual CPUs of running VMs per host CPU.
    #[arg(long, env = "VMAAS_CPU_OVERCOMMIT", default_value_t = 16.0)]
    cpu_overcommit: f64,
    /// Memory of running VMs per byte of host memory.
    #[arg(long, env = "VMAAS_MEMORY_OVERCOMMIT", default_value_t = 1.5)]
    memory_overcommit: f64,
    /// Disk capacity of all VMs per byte of the file system holding the disks.
    #[arg(long, env = "VMAAS_DISK_OVERCOMMIT", default_value_t = 2.0)]
    disk_overcommit: f64,
    /// Prune an imported image once no VM or volume has used it for this long (e.g. 7d); none: keep them.
    #[arg(long, env = "VMAAS_IMAGE_RETENTION", value_parser = humantime::parse_duration)]
    image_retention: Option<Duration>,
    /// Largest image file imported or uploaded, e.g. 64Gi.
    #[arg(long, env = "VMAAS_IMAGE_MAX_SIZE", default_value = "64Gi")]
    image_max_size: vmaas_model::Quantity,
    /// Where images may be fetched from (comma-separated): `public` (any
    /// globally routable address), addresses and networks (e.g.
    /// public,10.20.0.0/16,fd00:1::/64). Loopback, private, link-local
    /// (cloud metadata), CGNAT and other special-purpose addresses are
    /// fetched from only when a network named here holds them; the
    /// server's own listening socket never.
    #[arg(long, env = "VMAAS_IMAGE_SOURCE_ALLOW", value_delimiter = ',', default_value = "public")]
    image_source_allow: Vec<String>,
    /// OCI registries (`HOST:PORT`, comma-separated) that `docker://`
    /// images are pulled from over plain HTTP rather than HTTPS; their
    /// addresses must still be allowed by --image-source-allow.
    #[arg(long, env = "VMAAS_IMAGE_REGISTRY_PLAIN_HTTP", value_delimiter = ',')]
    image_registry_plain_http: Vec<String>,
    /// The longest an image download waits for its next bytes.
    #[arg(long, env = "VMAAS_IMAGE_FETCH_READ_TIMEOUT", default_value = "30s", value_parser = humantime::parse_duration)]
    image_fetch_read_timeout: Duration,
    /// The longest an image download may take in all.
    #[arg(long, env = "VMAAS_IMAGE_FETCH_TIMEOUT", default_value = "1h", value_parser = humantime::parse_duration)]
    image_fetch_timeout: Duration,
    /// Image imports from a URL one tenant may have under way at once.
    #[arg(long, env = "VMAAS_IMAGE_IMPORTS_PER_TENANT", default_value_t = 4)]
    image_imports_per_tenant: usize,
    /// Log format.
    #[arg(long, env = "VMAAS_LOG_FORMAT", value_enum, default_value = "text")]
    log_format: LogFormat,
    #[command(flatten)]
    kubevirt: KubevirtArgs,
    #[command(flatten)]
    tls: vmaas_server::flags::TlsArgs,
    #[command(flatten)]
    oidc: vmaas_server::flags::OidcArgs,
    #[command(flatten)]
    audit: vmaas_server::flags::AuditArgs,
    #[command(flatten)]
    limits: vmaas_server::flags::TenantLimitArgs,
    #[command(flatten)]
    metrics: vmaas_server::flags::MetricsArgs,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Args, Debug)]
struct TokenArgs {
    /// Tenant the token acts in: 1 to 63 ASCII letters, digits, '-', '_'
    /// and '.', starting and ending with a letter or digit.
    #[arg(long, value_parser = tenant_name)]
    tenant: String,
    /// Make it an administrator's token.
    #[arg(long)]
    admin: bool,
    /// Subject (shown as the creator of VMs); defaults to the tenant.
    #[arg(long)]
    subject: Option<String>,
    /// Validity (e.g. 12h, 30d).
    #[arg(long, default_value = "30d", value_parser = humantime::parse_duration)]
    ttl: Duration,
    /// Data directory holding the signing key (created if absent).
    #[arg(long, env = "VMAAS_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Token signing key file (default: DATA_DIR/jwt-hs256.key).
    #[arg(long, env = "VMAAS_JWT_KEY_FILE")]
    jwt_key_file: Option<PathBuf>,
}

fn default_images_dir() -> PathBuf {
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(h) => PathBuf::from(h).join(".local/share/vmaas/images"),
        None => PathBuf::from("vmaas-images"),
    }
}

fn default_data_dir() -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_DATA_HOME").filter(|x| !x.is_empty()) {
        return PathBuf::from(x).join("vmaas");
    }
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(h) => PathBuf::from(h).join(".local/share/vmaas"),
        None => PathBuf::from("vmaas-data"),
    }
}

fn init_logs(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("VMAAS_LOG").unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
    tracing::info!("shutting down");
}

/// `NAME=VENDOR:DEVICE` of `--gpu-alias`.
fn parse_gpu_alias(s: &str) -> Result<(String, String), FlagError> {
    let ids = |i: &str| {
        i.split_once(':').is_some_and(|(v, d)| v.len() == 4 && d.len() == 4 && i.replace(':', "").chars().all(|c| c.is_ascii_hexdigit()))
    };
    match s.split_once('=') {
        Some((name, i)) if !name.is_empty() && ids(i) => Ok((name.to_owned(), i.to_ascii_lowercase())),
        _ => Err(FlagError::Form { given: s.to_owned(), expected: "NAME=VENDOR:DEVICE, e.g. nvidia.com/A10=10de:2236 (PCI ids in hex)" }),
    }
}

/// `NETWORK=IFACE` of `--uplink`.
fn parse_uplink(s: &str) -> Result<(String, String), FlagError> {
    match s.split_once('=') {
        Some((net, iface)) if !net.is_empty() && !iface.is_empty() && iface.len() < 16 => Ok((net.to_owned(), iface.to_owned())),
        _ => Err(FlagError::Form {
            given: s.to_owned(),
            expected: "NETWORK=IFACE (a virtual network's id or TENANT/NAME, a host interface of at most 15 characters)",
        }),
    }
}

/// The backend the arguments ask for, over `data_dir`.
/// The sockets the server listens on, once it does.
type Listening = Arc<std::sync::OnceLock<Vec<SocketAddr>>>;

async fn backend(args: &ServeArgs, data_dir: &std::path::Path, listening: &Listening) -> anyhow::Result<Arc<dyn Backend>> {
    Ok(match args.backend {
        BackendKind::None => Arc::new(NoBackend),
        BackendKind::Kubevirt if !args.kubevirt.clusters.is_empty() => fleet(args, data_dir, listening).await?,
        BackendKind::Kubevirt => Arc::new(kubevirt_backend(args, (None, args.kubevirt.kubeconfig.clone()), data_dir).await?),
        BackendKind::Qemu => Arc::new(qemu_backend(args, data_dir, listening).await?),
    })
}

/// The clusters of `--cluster`, each started in turn, as one backend.
async fn fleet(args: &ServeArgs, data_dir: &std::path::Path, listening: &Listening) -> anyhow::Result<Arc<dyn Backend>> {
    let k = &args.kubevirt;
    let mut labels = clusters::labels_by_cluster(&k.clusters, &k.cluster_labels)?;
    k.check_cluster_values()?;
    let mut members = Vec::new();
    for c in &k.clusters {
        let backend: Arc<dyn Backend> = match &c.source {
            clusters::ClusterSource::Kubeconfig(path) => {
                let on = (Some(c.name.as_str()), Some(path.clone()));
                Arc::new(kubevirt_backend(args, on, data_dir).await.with_context(|| format!("cluster {:?}", c.name))?)
            }
            clusters::ClusterSource::Host => {
                Arc::new(qemu_backend(args, data_dir, listening).await.with_context(|| format!("cluster {:?}", c.name))?)
            }
        };
        members.push(vmaas_fleet::Member { name: c.name.clone(), labels: labels.remove(&c.name).unwrap_or_default(), backend });
    }
    Ok(Arc::new(vmaas_fleet::Fleet::new(members)?.with_upload_spool(data_dir.join("uploads"))))
}

/// The kubevirt backend on the cluster of `kubeconfig` (named, among several).
async fn kubevirt_backend(
    args: &ServeArgs,
    on: (Option<&str>, Option<PathBuf>),
    data_dir: &std::path::Path,
) -> anyhow::Result<vmaas_kubevirt::KubevirtBackend> {
    let cfg = args.kubevirt.config(on, &args.default_image, data_dir)?;
    vmaas_kubevirt::KubevirtBackend::new(cfg).await.context("starting the kubevirt backend")
}

/// The qemu backend of this host.
async fn qemu_backend(args: &ServeArgs, data_dir: &std::path::Path, listening: &Listening) -> anyhow::Result<QemuBackend> {
    let accel = match args.accel {
        AccelArg::Auto => AccelChoice::Auto,
        AccelArg::Kvm => AccelChoice::Force(Accel::Kvm),
        AccelArg::Tcg => AccelChoice::Force(Accel::Tcg),
    };
    let cfg = QemuConfig {
        state_dir: data_dir.join("vms"),
        images: Catalog::new(args.images_dir.clone().unwrap_or_else(default_images_dir), args.default_image.clone()),
        pool: args.vm_address_pool,
        accel,
        qemu: args.qemu.clone(),
        qemu_img: PathBuf::from("qemu-img"),
        stop_grace: args.stop_grace,
        egress: args.guest_egress.clone(),
        uplinks: args.uplinks.clone(),
        sysfs: args.sysfs_root.clone(),
        gpu_aliases: args.gpu_aliases.iter().cloned().collect(),
        snapshots: args.vm_snapshots,
        clone_tcg_cache_mib: args.clone_tcg_cache_mib,
        platform: vmaas_qemu::platform::PlatformPaths { ovmf_dir: args.ovmf_dir.clone(), swtpm: args.swtpm.clone() },
        image_sources: vmaas_qemu::sources::SourcePolicy::parse(&args.image_source_allow)
            .context("--image-source-allow")?
            .with_listening(listening.clone())
            .with_plain_http(args.image_registry_plain_http.clone())
            .with_limits(FetchLimits { read: args.image_fetch_read_timeout, total: args.image_fetch_timeout }),
        nat: Arc::new(
            EgressPolicy::new(&args.nat_allow, args.nat_netns.as_deref())
                .context("--nat-allow / --nat-netns")?
                .with_listening(listening.clone()),
        ),
    };
    QemuBackend::new(cfg).await.context("starting the qemu backend")
}

fn config(args: &ServeArgs, data_dir: PathBuf, listening: Listening) -> anyhow::Result<Config> {
    Ok(Config {
        listen: args.listen,
        tls: args.tls.source(&data_dir),
        audit: Some(args.audit.config(&data_dir)?),
        data_dir,
        database_url: args.database_url.clone(),
        key_file: args.jwt_key_file.clone(),
        reconcile_interval: args.reconcile_interval,
        reconcile_workers: args.reconcile_workers.map(usize::from),
        adopt_store: args.adopt_store,
        http: HttpLimits {
            header_timeout: args.http_header_timeout,
            body_timeout: args.http_body_timeout,
            max_connections: args.max_connections.max(1),
            max_connections_per_client: args.max_connections_per_client.max(1),
            idle_timeout: args.http_idle_timeout.max(Duration::from_secs(1)),
            max_body_bytes: args.max_body_bytes,
        },
        overcommit: Overcommit { cpu: args.cpu_overcommit, memory: args.memory_overcommit, disk: args.disk_overcommit },
        pools: Pools::new(args.external_ip_pools.clone()).map_err(anyhow::Error::msg)?,
        image_max_bytes: args.image_max_size.to_units_ceil().context("--image-max-size")?,
        image_retention: args.image_retention,
        image_imports_per_tenant: args.image_imports_per_tenant.max(1),
        exports_per_tenant: args.limits.exports_per_tenant.max(1),
        export_stall: args.limits.export_stall_timeout.max(Duration::from_secs(1)),
        watches: args.limits.watches(),
        tenant_rate: args.limits.rate(),
        metrics_listen: args.metrics.metrics_listen,
        listening,
        insecure_listen: args.tls.insecure_listen,
        oidc: args.oidc.config().context("--oidc-ca-file")?,
    })
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    init_logs(args.log_format);
    let data_dir = args.data_dir.clone().unwrap_or_else(default_data_dir);
    // Before the backend looks at the VMs in the data directory.
    let early_lock = DataDirLock::acquire(&data_dir)?;
    let listening: Listening = Arc::default();
    let backend = backend(&args, &data_dir, &listening).await?;
    let app = App::open_locked(config(&args, data_dir, listening)?, backend, early_lock).await.context("starting vmaas-server")?;
    app.serve(shutdown_signal()).await.context("serving")?;
    Ok(())
}

async fn gc(args: GcArgs) -> anyhow::Result<()> {
    init_logs(args.serve.log_format);
    let data_dir = args.serve.data_dir.clone().unwrap_or_else(default_data_dir);
    let _lock = DataDirLock::acquire(&data_dir)?;
    let listening: Listening = Arc::default();
    let backend = backend(&args.serve, &data_dir, &listening).await?;
    let cfg = config(&args.serve, data_dir, listening)?;
    let store = vmaas_server::startup::open_store(&cfg).await?;
    vmaas_server::identity::check(&store, &cfg.data_dir, backend.as_ref(), cfg.adopt_store).await?;
    let found = vmaas_server::gc::collect(&store, backend.as_ref(), args.dry_run).await?;
    let verb = if args.dry_run { "would remove" } else { "removed" };
    for q in &found {
        let running = if q.running { "running" } else { "stopped" };
        let (name, tenant) = (q.name.as_deref().unwrap_or("?"), q.tenant.as_deref().unwrap_or("?"));
        println!("{verb} {} {} (name {name}, tenant {tenant}, {running}) at {}", q.kind.human(), q.id, q.path);
    }
    if found.is_empty() {
        println!("nothing on this host is unknown to the store");
    }
    Ok(())
}

/// `--tenant`, checked as the server checks a token's tenant claim.
fn tenant_name(s: &str) -> Result<String, vmaas_model::validation::NameError> {
    vmaas_model::validation::check_tenant_name(s).map(|()| s.to_owned())
}

fn token(args: TokenArgs) -> anyhow::Result<()> {
    let data_dir = args.data_dir.unwrap_or_else(default_data_dir);
    let path = args.jwt_key_file.unwrap_or_else(|| data_dir.join(KEY_FILE));
    let keys = Keys::load_or_create(&path)?;
    let role = if args.admin { Role::Admin } else { Role::Tenant };
    let subject = args.subject.unwrap_or_else(|| args.tenant.clone());
    let t = keys.issue(&subject, &args.tenant, role, args.ttl).context("signing the token")?;
    println!("{t}");
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Token(t)) => token(t),
        Some(Command::Serve(s)) => serve(s).await,
        Some(Command::Gc(g)) => gc(g).await,
        None => serve(cli.serve).await,
    }
}
