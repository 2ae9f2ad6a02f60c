//! Subnets are made on the clusters their VMs run on: a VM placed on a
//! cluster makes its subnets there first (from the subnet as last
//! reconciled), and a subnet is reconciled on every cluster that has it.
//! A subnet no VM uses yet is made nowhere, and READY: it is a range the
//! server hands addresses from until a VM runs on it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use vmaas_backend::{Attachment, BackendError, Cleanup, Driver, NetworkObservation, Requeue, SubnetDriver, SubnetSpec, SubnetTarget};
use vmaas_model::ObjectKind;

use crate::Inner;
use crate::fanout::{delete_on, merge_network, worst_requeue};
use crate::made::MadeOn;

/// Where each subnet is made, and what it is.
pub(crate) struct Spread {
    /// The clusters each subnet is made on.
    on: MadeOn,
    /// Each subnet as last reconciled, by id.
    targets: Mutex<HashMap<String, SubnetTarget>>,
    /// Each cluster's subnet driver, once the fleet hands them out.
    drivers: std::sync::OnceLock<Vec<Arc<SubnetDriver>>>,
}

impl Default for Spread {
    fn default() -> Self {
        Self { on: MadeOn::new(ObjectKind::Subnet), targets: Mutex::default(), drivers: std::sync::OnceLock::new() }
    }
}

/// Makes the subnets of `attachments` on cluster `m` if they are not yet.
pub(crate) async fn make_on(inner: &Inner, m: usize, attachments: &[Attachment]) -> Result<(), BackendError> {
    let Some(drivers) = inner.subnets.drivers.get() else { return Ok(()) };
    for a in attachments {
        if inner.subnets.on.has(inner, &a.subnet, m) {
            continue;
        }
        let target = inner.subnets.targets.lock().ok().and_then(|t| t.get(&a.subnet).cloned());
        let Some(target) = target else {
            return Err(BackendError::transient(format!("making subnet {} on a cluster", a.subnet), "the subnet is not reconciled yet"));
        };
        drivers[m].ensure(&target).await?;
        inner.subnets.on.mark(&a.subnet, m);
        inner.wake(ObjectKind::Subnet, &a.subnet);
    }
    Ok(())
}

/// The driver of subnets.
pub struct Subnets(Arc<Inner>);

impl Subnets {
    pub(crate) fn new(inner: Arc<Inner>, drivers: Vec<Arc<SubnetDriver>>) -> Self {
        let _ = inner.subnets.drivers.set(drivers);
        Self(inner)
    }

    fn drivers(&self) -> &[Arc<SubnetDriver>] {
        self.0.subnets.drivers.get().map(Vec::as_slice).unwrap_or_default()
    }
}

#[async_trait]
impl Driver<SubnetSpec, NetworkObservation> for Subnets {
    async fn ensure(&self, t: &SubnetTarget) -> Result<(NetworkObservation, Requeue), BackendError> {
        if let Ok(mut targets) = self.0.subnets.targets.lock() {
            targets.insert(t.id.clone(), t.clone());
        }
        let mut seen = Vec::new();
        for m in self.0.subnets.on.of(&self.0, &t.id) {
            let (o, next) = self.drivers()[m].ensure(t).await?;
            seen.push((self.0.members[m].name.as_str(), o, next));
        }
        Ok((merge_network(&seen), worst_requeue(seen.iter().map(|s| s.2))))
    }

    async fn delete(&self, id: &str) -> Result<Cleanup, BackendError> {
        let done = delete_on(self.drivers(), self.0.subnets.on.to_delete(&self.0, id), id).await?;
        if done == Cleanup::Done {
            self.0.subnets.on.forget(id);
            if let Ok(mut t) = self.0.subnets.targets.lock() {
                t.remove(id);
            }
        }
        Ok(done)
    }

    async fn retain(&self, known: &[String]) -> Result<(), BackendError> {
        crate::fanout::retain_all(self.drivers(), known).await
    }
}
