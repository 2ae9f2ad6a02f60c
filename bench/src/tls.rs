//! The cost of TLS: the same vmaas GET by id through the server's own
//! HTTP loop, once in plain text and once over TLS (rustls, a self-signed
//! certificate the load clients trust; keep-alive connections, so the
//! handshake is paid once per connection and the cost measured is the
//! record layer's).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use vmaas_server::serve::{HttpLimits, serve};
use vmaas_server::tls::{SELF_SIGNED_CERT, Tls, TlsSource};

use crate::{Figures, load};

/// Serves `router` on a new loopback port, over TLS when `tls` is given.
async fn listen(router: Router, tls: Option<tokio_rustls::TlsAcceptor>) -> anyhow::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(serve(listener, router, HttpLimits::default(), tls, std::future::pending()));
    Ok(addr)
}

/// Plain and TLS figures of GET by id (the better of two alternating runs each).
pub async fn figures(router: Router, ids: &[String], token: &str, connections: usize, duration: Duration) -> anyhow::Result<Vec<Figures>> {
    let dir = tempfile::tempdir()?;
    let tls = Tls::load(&TlsSource::SelfSigned { dir: dir.path().to_owned(), names: Vec::new() })?;
    let ca = reqwest::Certificate::from_pem(&std::fs::read(dir.path().join(SELF_SIGNED_CERT))?)?;
    let plain = listen(router.clone(), None).await?;
    let secure = listen(router, Some(tls.acceptor().clone())).await?;
    let urls = |scheme: &str, addr: SocketAddr| -> Arc<Vec<String>> {
        Arc::new(ids.iter().map(|id| format!("{scheme}://{addr}/api/fulfillment/v1/virtual_machines/{id}")).collect())
    };
    let (mut best_plain, mut best_tls): (Option<Figures>, Option<Figures>) = (None, None);
    for _ in 0..2 {
        let p =
            load("vmaas GET by id, plain (server loop)", urls("http", plain), Some(token.to_owned()), None, connections, duration).await?;
        let t =
            load("vmaas GET by id, TLS (rustls)", urls("https", secure), Some(token.to_owned()), Some(&ca), connections, duration).await?;
        if best_plain.as_ref().is_none_or(|x| p.rps > x.rps) {
            best_plain = Some(p);
        }
        if best_tls.as_ref().is_none_or(|x| t.rps > x.rps) {
            best_tls = Some(t);
        }
    }
    Ok(best_plain.into_iter().chain(best_tls).collect())
}
