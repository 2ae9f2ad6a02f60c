//! `terraform-provider-vmaas`: started by Terraform, never by hand.

use std::io::Write;
use std::sync::Arc;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::{Notify, mpsc};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::transport::Server;
use tonic::{Request, Response, Status};
use vmaas_provider::controller::Empty;
use vmaas_provider::controller::grpc_controller_server::{GrpcController, GrpcControllerServer};
use vmaas_provider::plugin::{MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE, auto_mtls};
use vmaas_provider::proto::provider_server::ProviderServer;
use vmaas_provider::provider::VmaasProvider;

/// go-plugin's controller: Terraform asks the plugin to exit.
struct Controller(Arc<Notify>);

#[tonic::async_trait]
impl GrpcController for Controller {
    async fn shutdown(&self, _r: Request<Empty>) -> Result<Response<Empty>, Status> {
        self.0.notify_one();
        Ok(Response::new(Empty {}))
    }
}

/// Ctrl-C reaches every process of the terminal's foreground group, this
/// plugin too; as go-plugin's plugins do, it lets Terraform handle it (a
/// `StopProvider` call, which ends the waits in flight and keeps the state)
/// instead of dying mid-apply.
fn ignore_interrupts() -> anyhow::Result<()> {
    let mut interrupts =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).context("taking SIGINT over from its default")?;
    tokio::spawn(async move {
        while interrupts.recv().await.is_some() {
            tracing::info!("interrupt: left to Terraform, which asks the provider to stop");
        }
    });
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    if std::env::var(MAGIC_COOKIE_KEY).as_deref() != Ok(MAGIC_COOKIE_VALUE) {
        eprintln!("This binary is a plugin: Terraform or OpenTofu start it. Configure it with a provider \"vmaas\" block.");
        std::process::exit(1);
    }
    let versions = std::env::var("PLUGIN_PROTOCOL_VERSIONS").unwrap_or_else(|_| "6".into());
    if !versions.split(',').any(|v| v.trim() == "6") {
        eprintln!("terraform-provider-vmaas speaks plugin protocol 6; this Terraform offers {versions}");
        std::process::exit(1);
    }
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("TF_LOG_PROVIDER_VMAAS").unwrap_or_else(|_| "warn".into()))
        .init();

    ignore_interrupts()?;
    let listener = TcpListener::bind("127.0.0.1:0").await.context("binding the plugin port")?;
    let addr = listener.local_addr()?;
    let shutdown = Arc::new(Notify::new());
    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_service_status("plugin", tonic_health::ServingStatus::Serving).await;
    let router = Server::builder()
        .add_service(ProviderServer::new(VmaasProvider::default()))
        .add_service(health_service)
        .add_service(GrpcControllerServer::new(Controller(shutdown.clone())));
    let stop = {
        let s = shutdown.clone();
        async move { s.notified().await }
    };

    match std::env::var("PLUGIN_CLIENT_CERT").ok().filter(|c| !c.is_empty()) {
        Some(pem) => {
            let (tls, cert) = auto_mtls(&pem)?;
            let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
            let (tx, rx) = mpsc::channel(16);
            tokio::spawn(async move {
                loop {
                    let Ok((tcp, _)) = listener.accept().await else { break };
                    no_delay(&tcp);
                    let acceptor = acceptor.clone();
                    let tx = tx.clone();
                    tokio::spawn(async move {
                        match acceptor.accept(tcp).await {
                            Ok(tls) => {
                                let _ = tx.send(Ok::<_, std::io::Error>(tls)).await;
                            }
                            Err(e) => tracing::warn!(error = %e, "TLS handshake with Terraform failed"),
                        }
                    });
                }
            });
            println!("1|6|tcp|{addr}|grpc|{cert}");
            std::io::stdout().flush()?;
            router.serve_with_incoming_shutdown(ReceiverStream::new(rx), stop).await?;
        }
        None => {
            println!("1|6|tcp|{addr}|grpc|");
            std::io::stdout().flush()?;
            let incoming = TcpListenerStream::new(listener).map(|tcp| {
                if let Ok(tcp) = &tcp {
                    no_delay(tcp);
                }
                tcp
            });
            router.serve_with_incoming_shutdown(incoming, stop).await?;
        }
    }
    Ok(())
}

/// Sends each answer at once: without it, Nagle's algorithm holds an
/// answer's last segment until Terraform acknowledges the first, which its
/// delayed ACK does after 40 ms, so every call of Terraform's cost 40 ms.
fn no_delay(tcp: &tokio::net::TcpStream) {
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::warn!(error = %e, "cannot set TCP_NODELAY on Terraform's connection");
    }
}
