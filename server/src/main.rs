//! `vmaas-server`: serve the API (the default), or print a token.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand, ValueEnum};
use vmaas_backend::Backend;
use vmaas_qemu::accel::{Accel, AccelChoice};
use vmaas_qemu::images::Catalog;
use vmaas_qemu::{QemuBackend, QemuConfig};
use vmaas_server::app::{App, Config, DataDirLock};
use vmaas_server::auth::{KEY_FILE, Keys, Role};
use vmaas_server::none_backend::NoBackend;

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
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum BackendKind {
    /// Real VMs on this host under QEMU (KVM or TCG).
    Qemu,
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
    /// qemu: the image a template's `default` image means.
    #[arg(long, env = "VMAAS_DEFAULT_IMAGE", default_value = "test-guest")]
    default_image: String,
    /// qemu: loopback addresses given to VMs as external IPs.
    #[arg(long, env = "VMAAS_EXTERNAL_IP_POOL", default_value = "127.42.0.0/16")]
    external_ip_pool: vmaas_qemu::pool::Cidr,
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
    /// Log format.
    #[arg(long, env = "VMAAS_LOG_FORMAT", value_enum, default_value = "text")]
    log_format: LogFormat,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Args, Debug)]
struct TokenArgs {
    /// Tenant the token acts in.
    #[arg(long)]
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

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    init_logs(args.log_format);
    let data_dir = args.data_dir.unwrap_or_else(default_data_dir);
    // Before the backend looks at the VMs in the data directory.
    let early_lock = DataDirLock::acquire(&data_dir)?;
    let backend: Arc<dyn Backend> = match args.backend {
        BackendKind::None => Arc::new(NoBackend),
        BackendKind::Qemu => {
            let accel = match args.accel {
                AccelArg::Auto => AccelChoice::Auto,
                AccelArg::Kvm => AccelChoice::Force(Accel::Kvm),
                AccelArg::Tcg => AccelChoice::Force(Accel::Tcg),
            };
            let cfg = QemuConfig {
                state_dir: data_dir.join("vms"),
                images: Catalog::new(args.images_dir.unwrap_or_else(default_images_dir), args.default_image),
                pool: args.external_ip_pool,
                accel,
                qemu: args.qemu,
                qemu_img: PathBuf::from("qemu-img"),
                stop_grace: args.stop_grace,
            };
            Arc::new(QemuBackend::new(cfg).await.context("starting the qemu backend")?)
        }
    };
    let config = Config {
        listen: args.listen,
        data_dir,
        database_url: args.database_url,
        key_file: args.jwt_key_file,
        reconcile_interval: args.reconcile_interval,
    };
    let app = App::open_locked(config, backend, early_lock).await.context("starting vmaas-server")?;
    app.serve(shutdown_signal()).await.context("serving")?;
    Ok(())
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
        None => serve(cli.serve).await,
    }
}
