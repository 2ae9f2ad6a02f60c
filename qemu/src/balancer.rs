//! Load balancers on the qemu backend: one [`Proxy`] per port on the load
//! balancer's address, spreading connections over the targets that pass
//! their probe. A target is reached on its own address (each VM's loopback
//! address, where its VM reconcile forwards the balanced ports into the
//! guest), and passes while its guest is ready and its port answers: QEMU's
//! user network accepts for the guest and closes at once when the guest
//! refuses, so a connection that stays open means a listening guest.

use std::collections::{BTreeMap, HashMap};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tracing::info;
use vmaas_backend::{BackendError, BalancerObservation, BalancerProblem, BalancerSpec, BalancerTarget, Cleanup, Driver, Requeue, Wake};
use vmaas_model::ObjectKind;
use vmaas_model::load_balancer::LbProtocol;

use crate::proxy::{Backends, Proxy};

/// How often targets are probed.
const PROBE_EVERY: Duration = Duration::from_secs(1);
/// How long a probe waits to connect, and then for the guest to refuse.
const PROBE_WAIT: Duration = Duration::from_millis(500);

/// Where each VM is reached and whether its guest is ready, as its VM
/// driver last saw it.
#[derive(Debug, Default)]
pub struct Endpoints(Mutex<HashMap<String, (Ipv4Addr, Arc<AtomicBool>)>>);

impl Endpoints {
    /// Records VM `id`'s address and readiness flag.
    pub(crate) fn set(&self, id: &str, addr: Ipv4Addr, ready: Arc<AtomicBool>) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).insert(id.to_owned(), (addr, ready));
    }

    /// Forgets VM `id`.
    pub(crate) fn remove(&self, id: &str) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(id);
    }

    /// VM `id`'s address, if its guest is ready.
    fn ready(&self, id: &str) -> Option<Ipv4Addr> {
        let map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        map.get(id).filter(|(_, r)| r.load(Ordering::SeqCst)).map(|(a, _)| *a)
    }
}

/// One load balancer at work: its ports and its prober; stops when dropped.
struct Running {
    spec: BalancerSpec,
    _proxies: Vec<Proxy>,
    prober: JoinHandle<()>,
    healthy: Arc<Mutex<Vec<String>>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.prober.abort();
    }
}

/// The load balancer driver.
pub struct Balancers {
    endpoints: Arc<Endpoints>,
    wake: Arc<std::sync::OnceLock<Wake>>,
    running: tokio::sync::Mutex<BTreeMap<String, Running>>,
}

impl Balancers {
    /// A driver reaching VMs through `endpoints`, waking the reconciler through `wake`.
    pub fn new(endpoints: Arc<Endpoints>, wake: Arc<std::sync::OnceLock<Wake>>) -> Self {
        Self { endpoints, wake, running: Default::default() }
    }
}

/// Whether something listens behind `addr`: it connects, and is not closed
/// at once.
async fn answers(addr: SocketAddr) -> bool {
    let Ok(Ok(mut s)) = tokio::time::timeout(PROBE_WAIT, TcpStream::connect(addr)).await else { return false };
    let mut byte = [0u8; 1];
    match tokio::time::timeout(PROBE_WAIT, s.read(&mut byte)).await {
        Err(_) => true,
        Ok(Ok(n)) => n > 0,
        Ok(Err(_)) => false,
    }
}

/// One round of probes: each mapping's backends, and the targets healthy on every port.
async fn probe_round(spec: &BalancerSpec, endpoints: &Endpoints, backends: &[Arc<Backends>]) -> Vec<String> {
    let mut checks = tokio::task::JoinSet::new();
    for (t, id) in spec.targets.iter().enumerate() {
        let Some(addr) = endpoints.ready(id) else { continue };
        for (m, mapping) in spec.mappings.iter().enumerate() {
            let to = SocketAddr::from((addr, mapping.internal_port));
            checks.spawn(async move { (t, m, to, answers(to).await) });
        }
    }
    let mut per_port: Vec<Vec<(usize, SocketAddr)>> = vec![Vec::new(); spec.mappings.len()];
    let mut passes = vec![0usize; spec.targets.len()];
    while let Some(Ok((t, m, to, ok))) = checks.join_next().await {
        if ok {
            per_port[m].push((t, to));
            passes[t] += 1;
        }
    }
    for (m, mut list) in per_port.into_iter().enumerate() {
        list.sort();
        backends[m].set(list.into_iter().map(|(_, a)| a).collect());
    }
    spec.targets.iter().enumerate().filter(|(t, _)| passes[*t] == spec.mappings.len()).map(|(_, id)| id.clone()).collect()
}

/// A load balancer's port that cannot be listened on.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {listen}: {source}")]
pub struct ListenError {
    /// The address and port.
    pub listen: SocketAddr,
    /// Why.
    pub source: std::io::Error,
}

impl Balancers {
    async fn start(&self, t: &BalancerTarget) -> Result<Running, ListenError> {
        let mut proxies = Vec::new();
        let mut backends = Vec::new();
        for m in &t.spec.mappings {
            let b = Arc::new(Backends::default());
            let listen = SocketAddr::from((t.spec.address, m.external_port));
            proxies.push(Proxy::start(listen, b.clone()).await.map_err(|e| ListenError { listen, source: e })?);
            backends.push(b);
        }
        let healthy = Arc::new(Mutex::new(Vec::new()));
        let (spec, endpoints, wake, seen, id) = (t.spec.clone(), self.endpoints.clone(), self.wake.clone(), healthy.clone(), t.id.clone());
        let prober = tokio::spawn(async move {
            loop {
                let now = probe_round(&spec, &endpoints, &backends).await;
                let changed = {
                    let mut last = seen.lock().unwrap_or_else(|p| p.into_inner());
                    let changed = *last != now;
                    *last = now;
                    changed
                };
                if changed && let Some(w) = wake.get() {
                    w.wake(ObjectKind::LoadBalancer, &id);
                }
                tokio::time::sleep(PROBE_EVERY).await;
            }
        });
        info!(load_balancer = %t.id, address = %t.spec.address, ports = t.spec.mappings.len(), "load balancer listening");
        Ok(Running { spec: t.spec.clone(), _proxies: proxies, prober, healthy })
    }
}

fn observed(r: &Running) -> BalancerObservation {
    BalancerObservation { problem: None, healthy: r.healthy.lock().unwrap_or_else(|p| p.into_inner()).clone() }
}

#[async_trait]
impl Driver<BalancerSpec, BalancerObservation> for Balancers {
    async fn ensure(&self, t: &BalancerTarget) -> Result<(BalancerObservation, Requeue), BackendError> {
        let mut running = self.running.lock().await;
        if let Some(r) = running.get(&t.id).filter(|r| r.spec == t.spec) {
            return Ok((observed(r), Requeue::AwaitChange));
        }
        running.remove(&t.id);
        if t.spec.mappings.iter().any(|m| m.protocol == LbProtocol::Udp) {
            let message = "the qemu backend balances TCP only: remove the UDP mappings".to_owned();
            return Ok((
                BalancerObservation { problem: Some(BalancerProblem::Failed(message)), healthy: Vec::new() },
                Requeue::AwaitChange,
            ));
        }
        match self.start(t).await {
            Ok(r) => {
                let seen = observed(&r);
                running.insert(t.id.clone(), r);
                Ok((seen, Requeue::AwaitChange))
            }
            Err(message) => Ok((
                BalancerObservation { problem: Some(BalancerProblem::Pending(message.to_string())), healthy: Vec::new() },
                Requeue::after(Duration::from_secs(2)),
            )),
        }
    }

    async fn delete(&self, id: &str) -> Result<Cleanup, BackendError> {
        if self.running.lock().await.remove(id).is_some() {
            info!(load_balancer = %id, "load balancer stopped");
        }
        Ok(Cleanup::Done)
    }
}

#[cfg(test)]
mod tests {
    use tokio::net::TcpListener;

    use super::*;

    #[tokio::test]
    async fn a_port_answers_when_it_listens_and_not_when_it_is_closed() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let open = l.local_addr().unwrap();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((s, _)) = l.accept().await {
                held.push(s);
            }
        });
        assert!(answers(open).await);
        let closed = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap();
        assert!(!answers(closed).await);
        // Accepted then closed at once: what QEMU does for a guest that refuses.
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let refusing = l.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((s, _)) = l.accept().await {
                drop(s);
            }
        });
        assert!(!answers(refusing).await);
    }
}
