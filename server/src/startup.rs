//! Wiring: configuration in, a running API and reconciler out.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tracing::info;

use crate::api::router;
use crate::audit::{AuditConfig, AuditLog};
use crate::auth::{KEY_FILE, KeyError, Keys};
use crate::capacity::Overcommit;
use crate::identity::IdentityError;
use crate::metrics::Metrics;
use crate::oidc::{OidcConfig, OidcError, Verifier};
use crate::pools::Pools;
use crate::reconciler::{Queue, Reconciler, ReconcilerConfig};
use crate::serve::HttpLimits;
use crate::state::{AppState, Services};
use crate::store::{Store, StoreError};
use crate::tls::{Tls, TlsError, TlsSource};
use vmaas_backend::Backend;

/// How to run the server.
#[derive(Debug, Clone)]
pub struct Config {
    /// Address the API listens on.
    pub listen: SocketAddr,
    /// Directory for the SQLite database, the token key and backend state.
    pub data_dir: PathBuf,
    /// `postgres://…` to share state between replicas; SQLite in `data_dir` when absent.
    pub database_url: Option<String>,
    /// Token signing key; `data_dir/jwt-hs256.key` when absent. Replicas must share it.
    pub key_file: Option<PathBuf>,
    /// Time between reconcile passes when nothing changes.
    pub reconcile_interval: Duration,
    /// Objects reconciled at once; the backend's choice when absent.
    pub reconcile_workers: Option<usize>,
    /// Accept a database other than the one the host state records (or an
    /// empty one while the host holds VMs); unknown VMs are quarantined.
    pub adopt_store: bool,
    /// Limits of the HTTP server.
    pub http: HttpLimits,
    /// How far VMs may overcommit the host.
    pub overcommit: Overcommit,
    /// The external IP pools, the default first.
    pub pools: Pools,
    /// The largest image file imported or uploaded.
    pub image_max_bytes: u64,
    /// Image imports from a URL one tenant may have under way at once.
    pub image_imports_per_tenant: usize,
    /// Disk exports one tenant may have under way at once.
    pub exports_per_tenant: usize,
    /// The longest a disk export waits for its client to take more of it.
    pub export_stall: Duration,
    /// How many event streams may be open.
    pub watches: crate::watches::WatchLimits,
    /// Requests per second each tenant may make, and in what bursts; none: unlimited.
    pub tenant_rate: Option<crate::rate::RateConfig>,
    /// How long an imported image may go unused before it is pruned.
    pub image_retention: Option<Duration>,
    /// TLS; plain HTTP when absent (on loopback only, unless `insecure_listen`).
    pub tls: Option<TlsSource>,
    /// Serve plain HTTP on an address other than loopback.
    pub insecure_listen: bool,
    /// Identity providers whose tokens are accepted beside the server's own.
    pub oidc: Option<OidcConfig>,
    /// Where mutating requests are recorded; nowhere when absent.
    pub audit: Option<AuditConfig>,
    /// An address of its own serving `/metrics` with every figure (tenants'
    /// too) and no token; none when absent.
    pub metrics_listen: Option<SocketAddr>,
    /// The sockets the server listens on, set once it listens (for the
    /// backend, which never fetches images from them).
    pub listening: Arc<std::sync::OnceLock<Vec<SocketAddr>>>,
}

/// Disk exports one tenant may have under way at once, by default.
pub const EXPORTS_PER_TENANT: usize = 4;

impl Config {
    /// A configuration listening on `listen` over `data_dir`, with SQLite,
    /// the default limits, and a reconcile pass every second.
    pub fn new(listen: SocketAddr, data_dir: PathBuf) -> Self {
        Self {
            listen,
            data_dir,
            database_url: None,
            key_file: None,
            reconcile_interval: Duration::from_secs(1),
            reconcile_workers: None,
            adopt_store: false,
            http: HttpLimits::default(),
            overcommit: Overcommit::default(),
            pools: Pools::loopback(),
            image_max_bytes: 64 << 30,
            image_imports_per_tenant: 4,
            exports_per_tenant: EXPORTS_PER_TENANT,
            export_stall: Duration::from_secs(300),
            watches: Default::default(),
            tenant_rate: crate::rate::RateConfig::new(crate::rate::DEFAULT_PER_SECOND, 0),
            image_retention: None,
            tls: None,
            insecure_listen: false,
            oidc: None,
            audit: None,
            metrics_listen: None,
            listening: Arc::default(),
        }
    }

    /// The signing key file in use.
    pub fn key_path(&self) -> PathBuf {
        self.key_file.clone().unwrap_or_else(|| self.data_dir.join(KEY_FILE))
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The data directory cannot be created.
    #[error("data directory {path}: {source}")]
    DataDir {
        /// The directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The key cannot be loaded.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// The database cannot be opened or migrated.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The database is not the one the host state belongs to.
    #[error(transparent)]
    Identity(#[from] IdentityError),
    /// Another server uses the data directory's SQLite database.
    #[error("another vmaas-server is using {0}: stop it, or give this one its own --data-dir")]
    Locked(PathBuf),
    /// The gRPC services cannot be built.
    #[error(transparent)]
    Grpc(#[from] crate::grpc::GrpcError),
    /// OIDC cannot be set up.
    #[error(transparent)]
    Oidc(#[from] OidcError),
    /// TLS cannot be set up.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// Plain HTTP asked for on an address others can reach.
    #[error(
        "refusing to serve plain HTTP on {0}: tokens would cross the network in clear; give --tls-cert and --tls-key (or --tls-self-signed), listen on loopback, or say --insecure-listen"
    )]
    PlainHttp(SocketAddr),
    /// The address cannot be bound.
    #[error("listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
}

/// An exclusive lock on a data directory: its database and its VMs have one
/// owner. Take it before anything touches the directory.
pub struct DataDirLock {
    _file: std::fs::File,
}

impl DataDirLock {
    /// Locks `dir` (creating it), or fails if another server holds it.
    pub fn acquire(dir: &std::path::Path) -> Result<Self, StartError> {
        std::fs::create_dir_all(dir).map_err(|source| StartError::DataDir { path: dir.to_owned(), source })?;
        let path = dir.join("vmaas.lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|source| StartError::DataDir { path: path.clone(), source })?;
        file.try_lock().map_err(|_| StartError::Locked(dir.to_owned()))?;
        Ok(Self { _file: file })
    }
}

/// Opens the store `config` names (PostgreSQL, or SQLite in the data directory).
pub async fn open_store(config: &Config) -> Result<Store, StoreError> {
    match &config.database_url {
        Some(url) => Store::connect(url).await,
        None => Store::open_sqlite(&config.data_dir).await,
    }
}

/// A configured server, not yet serving.
pub struct App {
    /// Shared by every handler.
    pub state: AppState,
    config: Config,
    /// Held while the server runs: a data directory has one owner.
    _lock: DataDirLock,
}

impl App {
    /// Locks the data directory, opens the store (migrating it) and the keys.
    pub async fn open(config: Config, backend: Arc<dyn Backend>) -> Result<Self, StartError> {
        let lock = DataDirLock::acquire(&config.data_dir)?;
        Self::open_locked(config, backend, lock).await
    }

    /// Like [`App::open`], with the data directory locked already.
    pub async fn open_locked(config: Config, backend: Arc<dyn Backend>, lock: DataDirLock) -> Result<Self, StartError> {
        std::fs::create_dir_all(&config.data_dir).map_err(|source| StartError::DataDir { path: config.data_dir.clone(), source })?;
        let store = open_store(&config).await?;
        crate::identity::check(&store, &config.data_dir, backend.as_ref(), config.adopt_store).await?;
        let mut keys = Keys::load_or_create(&config.key_path())?;
        if let Some(oidc) = &config.oidc {
            keys = keys.with_oidc(Arc::new(Verifier::new(oidc.clone())?));
        }
        let state = AppState::new(Services {
            events: crate::events::EventHub::start(store.clone()),
            console_clients: {
                let clients = Arc::new(crate::app::consoles::clients::ConsoleClients::default());
                clients.start_sweeping(store.clone());
                clients
            },
            store,
            keys,
            queue: Arc::new(Queue::default()),
            metrics: Arc::new(Metrics::new()),
            backend,
            overcommit: config.overcommit,
            progress: Default::default(),
            pools: Arc::new(config.pools.clone()),
            image_max_bytes: config.image_max_bytes,
            image_imports_per_tenant: config.image_imports_per_tenant,
            exports: crate::export_slots::ExportSlots::new(config.exports_per_tenant, config.export_stall),
            watches: crate::watches::Watches::new(config.watches),
            rate: config.tenant_rate.map(|c| {
                let rate = crate::rate::TenantRate::new(c);
                rate.spawn_pruning();
                rate
            }),
            audit: match &config.audit {
                Some(a) => Some(AuditLog::start(a.clone()).map_err(|source| StartError::DataDir { path: a.path.clone(), source })?),
                None => None,
            },
            catalog: Default::default(),
        });
        Ok(Self { state, config, _lock: lock })
    }

    /// The REST router, for serving or for in-process use, with the body limits.
    pub fn router(&self) -> axum::Router {
        router(self.state.clone(), &self.config.http)
    }

    /// REST and, beside it, gRPC.
    pub fn router_with_grpc(&self) -> Result<axum::Router, StartError> {
        let grpc = crate::grpc::routes(self.state.clone(), self.config.http.max_body_bytes)?;
        Ok(self.router().merge(grpc))
    }

    /// The TLS the configuration asks for, checked against the listen
    /// address: plain HTTP only on loopback unless `insecure_listen`.
    fn tls(&self) -> Result<Option<Tls>, StartError> {
        let Some(source) = &self.config.tls else {
            let addr = self.config.listen;
            return if addr.ip().is_loopback() || self.config.insecure_listen { Ok(None) } else { Err(StartError::PlainHttp(addr)) };
        };
        let tls = Tls::load(source)?;
        info!(cert = %tls.cert_path().display(), fingerprint = %tls.fingerprint(), "TLS certificate (SHA-256)");
        Ok(Some(tls))
    }

    /// Serves `/metrics` (every figure) on `at` until `stop`.
    async fn serve_metrics(&self, at: SocketAddr, mut stop: watch::Receiver<bool>) -> Result<tokio::task::JoinHandle<()>, StartError> {
        let listener = tokio::net::TcpListener::bind(at).await.map_err(|source| StartError::Listen { addr: at, source })?;
        info!(listen = %listener.local_addr().unwrap_or(at), "metrics with tenants' figures served");
        let app = crate::api::metrics_router(self.state.clone());
        let limits = self.config.http;
        Ok(tokio::spawn(async move {
            let stopped = async move {
                let _ = stop.changed().await;
            };
            if let Err(e) = crate::serve::serve(listener, app, limits, None, stopped).await {
                tracing::warn!(error = %e, "the metrics listener stopped");
            }
        }))
    }

    /// Serves the API and runs the reconciler until `shutdown` resolves.
    pub async fn serve(self, shutdown: impl std::future::Future<Output = ()> + Send + 'static) -> Result<(), StartError> {
        let addr = self.config.listen;
        let tls = self.tls()?;
        let listener = tokio::net::TcpListener::bind(addr).await.map_err(|source| StartError::Listen { addr, source })?;
        let local = listener.local_addr().map_err(|source| StartError::Listen { addr, source })?;
        let _ = self.config.listening.set(vec![local]);
        let (stop_tx, stop_rx) = watch::channel(false);
        let reconciler = Reconciler::new(
            self.state.store.clone(),
            self.state.backend.clone(),
            self.state.queue.clone(),
            self.state.metrics.clone(),
            ReconcilerConfig {
                interval: self.config.reconcile_interval,
                concurrency: self.config.reconcile_workers.unwrap_or_else(|| self.state.backend.workers()),
                image_max_bytes: self.config.image_max_bytes,
                image_retention: self.config.image_retention,
                sealer: Some(self.state.keys.sealer().clone()),
                ..Default::default()
            },
        )
        .with_progress(self.state.progress.clone())
        .with_kinds(crate::app::resources::reconcilers());
        let reaper = tokio::spawn(crate::expiry::run(self.state.clone(), stop_rx.clone()));
        let metrics_stop = stop_rx.clone();
        let rec_task = tokio::spawn(Arc::new(reconciler).run(stop_rx));
        if let Some(oidc) = self.state.keys.oidc().cloned() {
            tokio::spawn(async move { oidc.warm().await });
        }
        info!(
            listen = %local,
            scheme = %if tls.is_some() { "https" } else { "http" },
            database = self.state.store.dialect().as_str(),
            backend = self.state.backend.name(),
            data_dir = %self.config.data_dir.display(),
            "vmaas-server ready"
        );
        let metrics = match self.config.metrics_listen {
            Some(at) => Some(self.serve_metrics(at, metrics_stop).await?),
            None => None,
        };
        let app = self.router_with_grpc()?;
        let acceptor = tls.as_ref().map(|t| t.acceptor().clone());
        let reload = tls.map(|t| tokio::spawn(t.watch()));
        let served = crate::serve::serve(listener, app, self.config.http, acceptor, shutdown).await;
        reload.inspect(|r| r.abort());
        let _ = stop_tx.send(true);
        if let Some(m) = metrics {
            let _ = m.await;
        }
        let _ = rec_task.await;
        let _ = reaper.await;
        served.map_err(|source| StartError::Listen { addr, source })
    }
}
