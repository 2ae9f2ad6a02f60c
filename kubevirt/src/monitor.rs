//! The loops that keep [`crate::health`] true: the API server asked every
//! [`health::EVERY`], and a cluster that did not answer at start listed
//! until it does; every VM woken when its reachability changes.

use std::sync::Weak;

use tracing::{info, warn};

use crate::health;
use crate::shared::Shared;
use crate::watch::owner_of;

/// Checks the cluster of `shared` until it goes, waking every VM when its
/// reachability changes.
pub(crate) async fn watch(shared: Weak<Shared>) {
    loop {
        tokio::time::sleep(health::EVERY).await;
        let Some(s) = shared.upgrade() else { return };
        let answer = match tokio::time::timeout(health::TIMEOUT, s.cluster.client().apiserver_version()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("no answer in {:?}", health::TIMEOUT)),
        };
        if !s.health.record(answer) {
            continue;
        }
        match s.health.unreachable() {
            Some(why) => warn!(reason = %why.message, "the cluster is unreachable"),
            None => info!("the cluster answers again"),
        }
        s.wake_vms();
    }
}

/// Lists every watched kind of `shared` (a cluster that did not answer at
/// start), retrying until it is done, then wakes every VM.
pub(crate) async fn list(shared: Weak<Shared>) {
    loop {
        let Some(s) = shared.upgrade() else { return };
        match s.first_lists(crate::shared::FIRST_LIST).await {
            Ok(()) => {
                s.health.mark_listed();
                info!("the cluster is listed: what it holds is known");
                s.wake_vms();
                return;
            }
            Err(e) => s.health.listing_failed(e.to_string()),
        }
        drop(s);
        tokio::time::sleep(health::EVERY).await;
    }
}

impl Shared {
    /// Wakes every VM the watches hold.
    pub(crate) fn wake_vms(&self) {
        if let Some(w) = self.waker.get() {
            for vm in self.vms.all() {
                if let Some((kind, id)) = owner_of(&vm) {
                    w.wake(kind, id);
                }
            }
        }
    }
}
