//! `vmaas-server`: serve the API (the default), or print a token.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand, ValueEnum};
use vmaas_server::app::{App, Config};
use vmaas_server::auth::{KEY_FILE, Keys, Role};
use vmaas_server::backend::Backend;
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
    /// Record VMs without running them (API only).
    None,
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
    #[arg(long, env = "VMAAS_BACKEND", value_enum, default_value = "none")]
    backend: BackendKind,
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
    let backend: Arc<dyn Backend> = match args.backend {
        BackendKind::None => Arc::new(NoBackend),
    };
    let config = Config {
        listen: args.listen,
        data_dir,
        database_url: args.database_url,
        key_file: args.jwt_key_file,
        reconcile_interval: args.reconcile_interval,
    };
    let app = App::open(config, backend).await.context("starting vmaas-server")?;
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
