//! A TCP proxy that spreads connections round-robin over a changing set of
//! backends: the data path of a load balancer's port. A connection goes to
//! the next backend that accepts it; with none, it is closed at once.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tracing::debug;

/// How long a connection to a backend may take before the next is tried.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// The backends of one port, replaced as their health changes.
#[derive(Debug, Default)]
pub struct Backends {
    list: RwLock<Vec<SocketAddr>>,
    next: AtomicUsize,
}

impl Backends {
    /// Replaces the backends.
    pub fn set(&self, list: Vec<SocketAddr>) {
        *self.list.write().unwrap_or_else(|p| p.into_inner()) = list;
    }

    /// The backends, in order.
    pub fn get(&self) -> Vec<SocketAddr> {
        self.list.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The backends in the order to try them for the next connection.
    fn rotation(&self) -> Vec<SocketAddr> {
        let list = self.get();
        if list.is_empty() {
            return list;
        }
        let start = self.next.fetch_add(1, Ordering::Relaxed) % list.len();
        list[start..].iter().chain(&list[..start]).copied().collect()
    }
}

/// One listening port; stops when dropped.
#[derive(Debug)]
pub struct Proxy {
    task: JoinHandle<()>,
    local: SocketAddr,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Proxy {
    /// Listens on `listen` and forwards every connection to one of `backends`.
    pub async fn start(listen: SocketAddr, backends: Arc<Backends>) -> std::io::Result<Self> {
        let listener = TcpListener::bind(listen).await?;
        let local = listener.local_addr()?;
        let task = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else { continue };
                let _ = client.set_nodelay(true);
                tokio::spawn(forward(client, backends.clone()));
            }
        });
        Ok(Self { task, local })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }
}

async fn forward(mut client: TcpStream, backends: Arc<Backends>) {
    for addr in backends.rotation() {
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
            Ok(Ok(mut server)) => {
                let _ = server.set_nodelay(true);
                let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                return;
            }
            _ => debug!(%addr, "backend refused a connection; trying the next"),
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    async fn named_server(name: &'static str) -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                let _ = s.write_all(name.as_bytes()).await;
            }
        });
        addr
    }

    async fn ask(addr: SocketAddr) -> String {
        let mut s = TcpStream::connect(addr).await.unwrap();
        let mut out = String::new();
        let _ = tokio::time::timeout(Duration::from_secs(2), s.read_to_string(&mut out)).await;
        out
    }

    #[tokio::test]
    async fn spreads_connections_and_skips_what_is_gone() {
        let (a, b) = (named_server("a").await, named_server("b").await);
        let backends = Arc::new(Backends::default());
        backends.set(vec![a, b]);
        let p = Proxy::start("127.0.0.1:0".parse().unwrap(), backends.clone()).await.unwrap();
        let mut seen = Vec::new();
        for _ in 0..4 {
            seen.push(ask(p.local_addr()).await);
        }
        seen.sort();
        assert_eq!(seen, ["a", "a", "b", "b"]);
        // A backend that refuses is skipped; none at all closes the connection.
        let closed = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap();
        backends.set(vec![closed, b]);
        for _ in 0..3 {
            assert_eq!(ask(p.local_addr()).await, "b");
        }
        backends.set(Vec::new());
        assert_eq!(ask(p.local_addr()).await, "");
    }
}
