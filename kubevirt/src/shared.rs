//! What the drivers share: the client, the watched objects, what was
//! applied, and the cluster's health. Every driver module takes it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use vmaas_backend::BackendError;

use crate::cluster::Cluster;
use crate::config::KubevirtConfig;
use crate::turns::Look;
use crate::watch::{Waker, Watched};
use crate::{health, homes};

/// How long the first list of each watched kind may take at start.
pub(crate) const FIRST_LIST: Duration = Duration::from_secs(60);

/// What the drivers share: the client, the watched objects and what was applied.
pub struct Shared {
    pub(crate) cluster: Cluster,
    pub(crate) cfg: KubevirtConfig,
    pub(crate) vms: Watched,
    pub(crate) vmis: Watched,
    pub(crate) services: Watched,
    pub(crate) migrations: Watched,
    /// The subnets' networks: UDNs, or CUDNs ([`crate::SubnetMode`]).
    pub(crate) udns: Watched,
    /// MultiNetworkPolicies, when subnets are secondary networks.
    pub(crate) multi_policies: Option<Watched>,
    /// EgressIPs (NAT gateways), when subnets are secondary networks.
    pub(crate) egress_ips: Option<Watched>,
    pub(crate) data_volumes: Watched,
    pub(crate) snapshots: Watched,
    pub(crate) restores: Watched,
    pub(crate) policies: Watched,
    pub(crate) data_sources: Watched,
    pub(crate) nodes: Watched,
    pub(crate) waker: Waker,
    /// Hash of the VM manifest last applied, by vmaas id.
    pub(crate) applied: Mutex<HashMap<String, u64>>,
    /// What was last applied for objects compared as text, by key.
    pub(crate) applied_text: Mutex<HashMap<String, String>>,
    /// Why the last migration request of a VM was refused, by vmaas id.
    pub(crate) refused: Mutex<HashMap<String, vmaas_model::Reason>>,
    /// The fields of a VM's KubeVirt VM another manager held at its last apply, by vmaas id.
    pub(crate) conflicts: Mutex<HashMap<String, vmaas_model::Reason>>,
    /// Namespaces made (or found) since start.
    pub(crate) namespaces: Mutex<HashSet<String>>,
    /// The turns of the namespaces being made (one apply per name at a time).
    pub(crate) making: crate::turns::Turns,
    /// Where each tenant's (and subnet's) objects live.
    pub(crate) homes: homes::Homes,
    /// Whether the cluster answers.
    pub(crate) health: health::Health,
}

impl Shared {
    /// Whether the API server answers now (within [`health::TIMEOUT`]).
    pub(crate) async fn answers(&self) -> bool {
        matches!(tokio::time::timeout(health::TIMEOUT, self.cluster.client().apiserver_version()).await, Ok(Ok(_)))
    }

    /// Waits for the first full list of every watched kind, each for at most `timeout`.
    pub(crate) async fn first_lists(&self, timeout: Duration) -> Result<(), BackendError> {
        let all = [
            &self.vms,
            &self.vmis,
            &self.services,
            &self.migrations,
            &self.udns,
            &self.data_volumes,
            &self.snapshots,
            &self.restores,
            &self.policies,
            &self.data_sources,
            &self.nodes,
        ];
        for w in all.into_iter().chain(self.multi_policies.as_ref()).chain(self.egress_ips.as_ref()) {
            w.ready(timeout).await?;
        }
        Ok(())
    }

    /// An error while the cluster is not listed yet (what it holds is not known).
    pub(crate) fn listed(&self) -> Result<(), BackendError> {
        match self.health.listed() {
            true => Ok(()),
            false => Err(BackendError::transient("reaching the cluster", self.health.unreachable().map(|r| r.message).unwrap_or_default())),
        }
    }

    /// Makes the tenant's namespace once per server run (callers making
    /// the same one meanwhile wait for that apply).
    pub(crate) async fn ensure_namespace(&self, ns: &str, tenant: &str) -> Result<(), BackendError> {
        self.ensure_namespace_as(ns, tenant, false, &BTreeMap::new()).await
    }

    /// Makes namespace `ns` of `tenant` once per server run, labelled for a
    /// primary UDN when `primary_udn` and with `labels` (those of the vmaas
    /// object it is made for): one apply per name at a time, callers making
    /// the same one meanwhile wait for it ([`Shared::ensure_namespace`]).
    pub(crate) async fn ensure_namespace_as(
        &self,
        ns: &str,
        tenant: &str,
        primary_udn: bool,
        labels: &BTreeMap<String, String>,
    ) -> Result<(), BackendError> {
        let made = || self.namespaces.lock().ok().filter(|n| n.contains(ns)).map(drop);
        let _turn = match self.making.look(ns, made).await {
            Look::Remembered(()) => return Ok(()),
            Look::Ask(turn) => turn,
        };
        self.cluster.namespace(ns, tenant, primary_udn, labels).await?;
        if let Ok(mut n) = self.namespaces.lock() {
            n.insert(ns.to_owned());
        }
        Ok(())
    }

    /// The namespace of `tenant`'s objects (of its subnet `subnet`, when
    /// given): [`homes::Homes::find`].
    /// With subnets as secondary networks, every object of a tenant is in
    /// its namespace.
    pub(crate) async fn home(&self, tenant: &str, subnet: Option<&str>) -> Result<String, BackendError> {
        let subnet = subnet.filter(|_| self.cfg.subnets == crate::SubnetMode::PrimaryUdn);
        self.homes.find(&self.cluster, &self.cfg.namespace_prefix, tenant, subnet).await
    }
}
