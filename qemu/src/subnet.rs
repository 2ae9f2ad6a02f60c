//! Subnets on this host: each is a running [`Segment`] of the user-space
//! switch (`vmaas-switch`), with its plan in `DATA_DIR/subnets/<id>/
//! subnet.json` and its NICs' sockets under `DATA_DIR/sw/`. The gateway is
//! the subnet's first address, and the switch's own. The segments of one
//! virtual network join its [`Router`]: their gateways route to each other.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tracing::info;
use vmaas_backend::{BackendError, Cleanup, Driver, NetworkObservation, Requeue, SubnetSpec, SubnetTarget};
use vmaas_switch::{Mac, Router, Segment, SubnetConfig, Uplink};

use crate::state::save_json;

/// Name of a subnet's state file.
const FILE: &str = "subnet.json";
/// DHCP lease time offered to guests.
const LEASE_SECONDS: u32 = 86_400;

/// What is kept on disk for a subnet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct SubnetFile {
    id: String,
    tenant: String,
    name: String,
    virtual_network: String,
    ipv4_cidr: String,
}

/// The switch configuration of a subnet: its network, prefix and gateway
/// (the first address), the gateway's MAC derived from the subnet's id.
pub fn switch_config(id: &str, cidr: &str) -> Option<SubnetConfig> {
    let (addr, len) = cidr.split_once('/')?;
    let network: Ipv4Addr = addr.parse().ok()?;
    let prefix: u8 = len.parse().ok().filter(|l| *l <= 30)?;
    let gateway = Ipv4Addr::from(u32::from(network) + 1);
    Some(SubnetConfig {
        network,
        prefix,
        gateway,
        gateway_mac: Mac::local(format!("gateway/{id}").as_bytes()),
        lease_seconds: LEASE_SECONDS,
    })
}

/// The subnet driver: the segments running in this process.
pub struct Subnets {
    dir: PathBuf,
    segments: Mutex<HashMap<String, Arc<Segment>>>,
    /// The administrator's uplinks: network id → host interface.
    uplink_ifaces: HashMap<String, String>,
    /// The uplinks opened, by network id.
    uplinks: Mutex<HashMap<String, Arc<Uplink>>>,
    /// The routers of the virtual networks, by network id.
    routers: Mutex<HashMap<String, Arc<Router>>>,
}

impl Subnets {
    /// Subnets kept under `dir`; the networks in `uplinks` (network id →
    /// host TAP or bridge) are joined to that interface.
    pub fn new(dir: PathBuf, uplinks: &[(String, String)]) -> Self {
        Self {
            dir,
            segments: Mutex::new(HashMap::new()),
            uplink_ifaces: uplinks.iter().cloned().collect(),
            uplinks: Mutex::new(HashMap::new()),
            routers: Mutex::new(HashMap::new()),
        }
    }

    /// The router of virtual network `network` (made on first use).
    pub(crate) fn router(&self, network: &str) -> Arc<Router> {
        let mut routers = self.routers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        routers.entry(network.to_owned()).or_default().clone()
    }

    /// The uplink interface the administrator gave network `id` (named
    /// `tenant/name` by its tenant), by its id or by that name.
    fn uplink_iface(&self, id: &str, tenant: &str, name: &str) -> Option<&String> {
        self.uplink_ifaces.get(id).or_else(|| self.uplink_ifaces.get(&format!("{tenant}/{name}")))
    }

    /// Joins `segment` of network `network` (of subnet `t`) to the network's
    /// uplink, if the administrator gave it one (opened on first use).
    fn join_uplink(&self, t: &SubnetTarget, segment: &Arc<Segment>) -> Result<(), BackendError> {
        let network = t.spec.virtual_network.as_str();
        let Some(iface) = self.uplink_iface(network, &t.tenant, &t.spec.network_name) else { return Ok(()) };
        let mut uplinks = self.uplinks.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let uplink = match uplinks.get(network) {
            Some(u) => u.clone(),
            None => {
                let context = format!("opening the uplink {iface} of network {network}");
                let tap = vmaas_tap::open(iface).map_err(|e| BackendError::transient(context.clone(), e))?;
                let bridge = tap.bridge.clone();
                let u = Arc::new(Uplink::start(tap).map_err(|e| BackendError::transient(context, e))?);
                info!(%network, %iface, tap = %u.tap, ?bridge, "uplink open");
                uplinks.insert(network.to_owned(), u.clone());
                u
            }
        };
        let before = uplink.segments();
        uplink.join(segment);
        if uplink.segments() > before {
            info!(%network, %iface, "uplink joined a subnet");
        }
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Arc<Segment>>> {
        self.segments.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The running segment of subnet `id`.
    pub fn segment(&self, id: &str) -> Option<Arc<Segment>> {
        self.lock().get(id).cloned()
    }

    /// Every running segment.
    pub fn all(&self) -> Vec<Arc<Segment>> {
        self.lock().values().cloned().collect()
    }

    async fn save(&self, file: &SubnetFile) -> Result<(), BackendError> {
        let dir = self.dir.join(&file.id);
        tokio::fs::create_dir_all(&dir).await.map_err(|e| BackendError::transient(format!("making {}", dir.display()), e))?;
        save_json(dir.join(FILE), file).await
    }
}

#[async_trait]
impl Driver<SubnetSpec, NetworkObservation> for Subnets {
    async fn ensure(&self, t: &SubnetTarget) -> Result<(NetworkObservation, Requeue), BackendError> {
        let Some(config) = switch_config(&t.id, &t.spec.ipv4_cidr) else {
            return Ok((
                NetworkObservation::Failed(format!("{:?} is not a subnet this host can serve", t.spec.ipv4_cidr)),
                Requeue::AwaitChange,
            ));
        };
        if self.segment(&t.id).is_none() {
            let file = SubnetFile {
                id: t.id.clone(),
                tenant: t.tenant.clone(),
                name: t.name.clone(),
                virtual_network: t.spec.virtual_network.clone(),
                ipv4_cidr: t.spec.ipv4_cidr.clone(),
            };
            self.save(&file).await?;
            let gateway = config.gateway;
            self.lock().entry(t.id.clone()).or_insert_with(|| Arc::new(Segment::start(config)));
            info!(subnet = %t.id, name = %t.name, cidr = %t.spec.ipv4_cidr, %gateway, "subnet segment running");
        }
        if let Some(segment) = self.segment(&t.id) {
            segment.join(&self.router(&t.spec.virtual_network));
            self.join_uplink(t, &segment)?;
        }
        Ok((NetworkObservation::Ready, Requeue::AwaitChange))
    }

    async fn delete(&self, id: &str) -> Result<Cleanup, BackendError> {
        if let Some(segment) = self.lock().remove(id) {
            segment.leave();
        }
        let dir = self.dir.join(id);
        match tokio::fs::remove_dir_all(&dir).await {
            Ok(()) => info!(subnet = %id, "subnet removed"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(BackendError::transient(format!("removing {}", dir.display()), e)),
        }
        Ok(Cleanup::Done)
    }

    async fn retain(&self, known: &[String]) -> Result<(), BackendError> {
        self.lock().retain(|id, segment| {
            let keep = known.contains(id);
            if !keep {
                segment.leave();
            }
            keep
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use vmaas_backend::Target;

    use super::*;

    #[test]
    fn the_gateway_is_the_first_address() {
        let c = switch_config("s1", "10.10.1.0/24").unwrap();
        assert_eq!((c.gateway, c.prefix), (Ipv4Addr::new(10, 10, 1, 1), 24));
        assert_eq!(c.gateway_mac, switch_config("s1", "10.10.1.0/24").unwrap().gateway_mac, "stable");
        assert!(switch_config("s1", "10.10.1.0/31").is_none() && switch_config("s1", "nope").is_none());
    }

    #[tokio::test]
    async fn the_subnets_of_one_network_share_its_router() {
        let d = tempfile::tempdir().unwrap();
        let s = Subnets::new(d.path().join("subnets"), &[]);
        for (id, net, cidr) in [("s1", "n1", "10.10.1.0/24"), ("s2", "n1", "10.10.2.0/24"), ("s3", "n2", "10.20.1.0/24")] {
            let spec =
                SubnetSpec { virtual_network: net.into(), network_name: net.into(), ipv4_cidr: cidr.into(), network_class: String::new() };
            let t = Target { id: id.into(), tenant: "acme".into(), name: id.into(), version: 1, spec };
            assert_eq!(s.ensure(&t).await.unwrap().0, NetworkObservation::Ready);
            s.ensure(&t).await.unwrap();
        }
        let mut n1 = s.router("n1").subnets();
        n1.sort();
        assert_eq!(n1, vec![(Ipv4Addr::new(10, 10, 1, 0), 24), (Ipv4Addr::new(10, 10, 2, 0), 24)], "joined once each");
        assert_eq!(s.router("n2").subnets(), vec![(Ipv4Addr::new(10, 20, 1, 0), 24)]);
        s.delete("s2").await.unwrap();
        assert_eq!(s.router("n1").subnets(), vec![(Ipv4Addr::new(10, 10, 1, 0), 24)], "a deleted subnet leaves");
    }

    #[tokio::test]
    async fn a_subnet_runs_a_segment_until_deleted() {
        let d = tempfile::tempdir().unwrap();
        let s = Subnets::new(d.path().join("subnets"), &[]);
        let spec = SubnetSpec {
            virtual_network: "n1".into(),
            network_name: "lab".into(),
            ipv4_cidr: "10.10.1.0/24".into(),
            network_class: String::new(),
        };
        let t = Target { id: "s1".into(), tenant: "acme".into(), name: "front".into(), version: 1, spec };
        assert_eq!(s.ensure(&t).await.unwrap().0, NetworkObservation::Ready);
        let seg = s.segment("s1").expect("a running segment");
        assert!(seg.stats().await.is_ok());
        assert!(d.path().join("subnets/s1/subnet.json").exists());
        assert_eq!(s.delete("s1").await.unwrap(), Cleanup::Done);
        assert!(s.segment("s1").is_none() && !d.path().join("subnets/s1").exists());
    }
}
