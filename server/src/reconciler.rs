//! The reconciler: a level-triggered loop that drives every VM towards its
//! spec through a [`Backend`] and writes the status the API shows.
//!
//! Each pass reads every VM from the store, asks the backend to make one step
//! for it, derives the status with [`vmaas_model::derive_status`], and writes
//! it when it changed. Passes run on a timer and whenever the API changes a
//! VM. With several replicas on one PostgreSQL, a lease in the database makes
//! sure only one replica reconciles at a time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use futures::StreamExt;
use tokio::sync::{Notify, watch};
use tracing::{Instrument, debug, info, info_span, warn};
use vmaas_model::{Desired, Observation, Phase, Reason, derive_status};

use crate::metrics::Metrics;
use crate::store::{Store, StoreError, VmRecord};
use vmaas_backend::{Backend, Cleanup, VmTarget};

/// Name of the lease that elects the reconciling replica.
pub const LEASE: &str = "reconciler";

/// Tuning of the loop.
#[derive(Debug, Clone)]
pub struct ReconcilerConfig {
    /// Time between passes when nothing changes.
    pub interval: Duration,
    /// How long a lease lasts without renewal.
    pub lease_ttl: Duration,
    /// How many VMs are reconciled at once.
    pub concurrency: usize,
    /// This replica's identity in the lease.
    pub holder: String,
}

impl Default for ReconcilerConfig {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(1),
            lease_ttl: Duration::from_secs(15),
            concurrency: 8,
            holder: uuid::Uuid::new_v4().to_string(),
        }
    }
}

/// The reconciler.
pub struct Reconciler {
    store: Store,
    backend: Arc<dyn Backend>,
    wake: Arc<Notify>,
    metrics: Arc<Metrics>,
    config: ReconcilerConfig,
}

/// What one pass did, for tests and logs.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PassReport {
    /// VMs looked at.
    pub seen: usize,
    /// Statuses written.
    pub updated: usize,
    /// Records removed after cleanup.
    pub removed: usize,
    /// Backend errors.
    pub errors: usize,
}

impl Reconciler {
    /// A reconciler over `store` and `backend`, woken early by `wake`.
    pub fn new(store: Store, backend: Arc<dyn Backend>, wake: Arc<Notify>, metrics: Arc<Metrics>, config: ReconcilerConfig) -> Self {
        Self { store, backend, wake, metrics, config }
    }

    /// Runs passes until `shutdown` turns true.
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        info!(backend = self.backend.name(), holder = %self.config.holder, "reconciler started");
        let mut leader = false;
        loop {
            let now = Utc::now();
            match self.store.acquire_lease(LEASE, &self.config.holder, now, self.config.lease_ttl).await {
                Ok(held) => {
                    if held != leader {
                        info!(leader = held, "reconciler lease {}", if held { "acquired" } else { "lost" });
                    }
                    leader = held;
                }
                Err(e) => {
                    warn!(error = %e, "cannot renew the reconciler lease");
                    leader = false;
                }
            }
            if leader {
                match self.pass().await {
                    Ok(report) => debug!(?report, "reconcile pass"),
                    Err(e) => warn!(error = %e, "reconcile pass failed"),
                }
            }
            tokio::select! {
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(self.config.interval) => {}
                _ = shutdown.changed() => break,
            }
            if *shutdown.borrow() {
                break;
            }
        }
        if leader {
            let _ = self.store.release_lease(LEASE, &self.config.holder).await;
        }
        info!("reconciler stopped");
    }

    /// One pass over every VM.
    pub async fn pass(&self) -> Result<PassReport, StoreError> {
        let started = Instant::now();
        let vms = self.store.all_vms().await?;
        let ids: Vec<String> = vms.iter().map(|v| v.id.clone()).collect();
        let mut counts = std::collections::BTreeMap::new();
        for vm in &vms {
            *counts.entry(vm.status.state.short()).or_insert(0i64) += 1;
        }
        self.metrics.set_vm_counts(vmaas_model::VmState::ALL.iter().map(|s| (s.short(), counts.get(s.short()).copied().unwrap_or(0))));
        let seen = vms.len();
        let outcomes: Vec<Result<Outcome, StoreError>> = futures::stream::iter(vms)
            .map(|vm| {
                let span = info_span!("reconcile", vm = %vm.id, name = %vm.name, tenant = %vm.tenant);
                async move { self.reconcile(&vm).instrument(span).await }
            })
            .buffer_unordered(self.config.concurrency.max(1))
            .collect()
            .await;
        if let Err(e) = self.backend.retain(&ids).await {
            warn!(error = %e, "backend cleanup of unknown VMs failed");
        }
        let mut report = PassReport { seen, ..Default::default() };
        for o in outcomes {
            match o? {
                Outcome::Unchanged => {}
                Outcome::Updated => report.updated += 1,
                Outcome::Removed => report.removed += 1,
                Outcome::BackendError => report.errors += 1,
            }
        }
        self.metrics.observe_pass(started.elapsed(), report.errors);
        Ok(report)
    }

    async fn reconcile(&self, vm: &VmRecord) -> Result<Outcome, StoreError> {
        let now = Utc::now();
        if vm.deleted_at.is_some() {
            return match self.backend.delete(&vm.id).await {
                Ok(Cleanup::Done) => {
                    self.store.remove_vm(&vm.id).await?;
                    info!("virtual machine removed");
                    Ok(Outcome::Removed)
                }
                Ok(Cleanup::InProgress) => self.write(vm, Desired::Deleted, &Observation::new(Phase::Absent), now).await,
                Err(e) => {
                    warn!(error = %e, "cleanup failed; will retry");
                    let mut obs = Observation::new(Phase::Absent);
                    obs.degraded = Some(Reason::new("CleanupFailed", e.to_string()));
                    self.write(vm, Desired::Deleted, &obs, now).await?;
                    Ok(Outcome::BackendError)
                }
            };
        }
        let target = VmTarget {
            id: vm.id.clone(),
            tenant: vm.tenant.clone(),
            name: vm.name.clone(),
            power: vm.power(),
            spec: vm.resolved.clone(),
            version: vm.version,
            restarts: vm.restarts,
        };
        let desired = Desired::Power(vm.power());
        match self.backend.ensure(&target).await {
            Ok(obs) => self.write(vm, desired, &obs, now).await,
            Err(e) => {
                warn!(error = %e, "backend error; will retry");
                // Keep the last known phase, and say what is wrong.
                let mut obs = Observation::new(Phase::Starting(Reason::new("BackendError", e.to_string())));
                obs.internal_ip = vm.status.internal_ip.clone();
                obs.external_ip = vm.status.external_ip.clone();
                obs.degraded = Some(Reason::new("BackendError", e.to_string()));
                self.write(vm, desired, &obs, now).await?;
                Ok(Outcome::BackendError)
            }
        }
    }

    async fn write(&self, vm: &VmRecord, desired: Desired, obs: &Observation, now: chrono::DateTime<Utc>) -> Result<Outcome, StoreError> {
        let status = derive_status(desired, obs, &vm.status, now);
        if status == vm.status {
            return Ok(Outcome::Unchanged);
        }
        if !self.store.update_vm_status(vm, &status).await? {
            debug!("the VM changed while it was reconciled; the next pass takes it from there");
            return Ok(Outcome::Unchanged);
        }
        if status.state != vm.status.state {
            info!(from = vm.status.state.short(), to = status.state.short(), "state changed");
        }
        Ok(Outcome::Updated)
    }
}

enum Outcome {
    Unchanged,
    Updated,
    Removed,
    BackendError,
}

#[cfg(test)]
mod tests {
    //! The state machine driven by an in-memory backend, over a real SQLite store.

    use std::collections::HashMap;
    use std::sync::Mutex;

    use async_trait::async_trait;
    use vmaas_model::{ConditionStatus, ConditionType, PowerState, ResolvedSpec, VirtualMachineSpec, VmState, initial_status};

    use super::*;
    use crate::store::Scope;
    use vmaas_backend::BackendError;

    /// A test-only backend: a VM boots in `boot_steps` calls, stops at once,
    /// and takes two calls to delete. GPUs are never available.
    #[derive(Default)]
    struct MemoryBackend {
        vms: Mutex<HashMap<String, (PowerState, u32)>>,
        deletions: Mutex<HashMap<String, u32>>,
        fail_next: Mutex<bool>,
    }

    const BOOT_STEPS: u32 = 2;

    #[async_trait]
    impl Backend for MemoryBackend {
        fn name(&self) -> &'static str {
            "memory"
        }

        async fn ensure(&self, t: &VmTarget) -> Result<Observation, BackendError> {
            if std::mem::take(&mut *self.fail_next.lock().unwrap()) {
                return Err(BackendError::new("talking to the hypervisor", "connection refused"));
            }
            if !t.spec.gpus.is_empty() {
                return Ok(Observation::new(Phase::Failed(Reason::new("NoGPUAvailable", "no GPU on this host"))));
            }
            let mut vms = self.vms.lock().unwrap();
            let entry = vms.entry(t.id.clone()).or_insert((PowerState::Stopped, 0));
            let phase = match t.power {
                PowerState::Stopped => {
                    *entry = (PowerState::Stopped, 0);
                    Phase::Stopped
                }
                PowerState::Started => {
                    entry.0 = PowerState::Started;
                    entry.1 += 1;
                    if entry.1 > BOOT_STEPS { Phase::Ready } else { Phase::Starting(Reason::new("Booting", "the guest is booting")) }
                }
            };
            let mut obs = Observation::new(phase);
            if t.power == PowerState::Started {
                obs.internal_ip = Some("10.0.2.15".into());
                obs.external_ip = Some("127.42.0.1".into());
            }
            Ok(obs)
        }

        async fn delete(&self, id: &str) -> Result<Cleanup, BackendError> {
            let mut d = self.deletions.lock().unwrap();
            let n = d.entry(id.to_owned()).or_insert(0);
            *n += 1;
            if *n >= 2 {
                self.vms.lock().unwrap().remove(id);
                Ok(Cleanup::Done)
            } else {
                Ok(Cleanup::InProgress)
            }
        }
    }

    async fn setup() -> (tempfile::TempDir, Store, Arc<MemoryBackend>, Reconciler) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_sqlite(dir.path()).await.unwrap();
        let backend = Arc::new(MemoryBackend::default());
        let r =
            Reconciler::new(store.clone(), backend.clone(), Arc::new(Notify::new()), Arc::new(Metrics::new()), ReconcilerConfig::default());
        (dir, store, backend, r)
    }

    async fn add_vm(store: &Store, name: &str, power: PowerState, spec: ResolvedSpec) -> String {
        let now = Utc::now();
        let rec = VmRecord {
            id: uuid::Uuid::new_v4().to_string(),
            tenant: "t1".into(),
            name: name.into(),
            spec: VirtualMachineSpec { template: "tpl".into(), template_parameters: Default::default(), state: power },
            resolved: spec,
            status: initial_status(power, now),
            creators: vec!["t1".into()],
            version: 1,
            created_at: now,
            deleted_at: None,
            restarts: 0,
        };
        store.insert_vm(&rec).await.unwrap();
        rec.id
    }

    async fn state(store: &Store, id: &str) -> VmState {
        store.get_vm(id, &Scope::All).await.unwrap().status.state
    }

    #[tokio::test]
    async fn boots_to_ready_then_stops_then_deletes() {
        let (_d, store, _b, r) = setup().await;
        let id = add_vm(&store, "a", PowerState::Started, ResolvedSpec::default()).await;
        r.pass().await.unwrap();
        assert_eq!(state(&store, &id).await, VmState::Progressing);
        r.pass().await.unwrap();
        let report = r.pass().await.unwrap();
        assert_eq!(report, PassReport { seen: 1, updated: 1, removed: 0, errors: 0 });
        let vm = store.get_vm(&id, &Scope::All).await.unwrap();
        assert_eq!(vm.status.state, VmState::Ready);
        assert_eq!(vm.status.external_ip.as_deref(), Some("127.42.0.1"));
        assert_eq!(vm.status.condition(ConditionType::Ready).unwrap().status, ConditionStatus::True);
        // Steady state writes nothing.
        assert_eq!(r.pass().await.unwrap().updated, 0);

        let mut stopped = vm.clone();
        stopped.spec.state = PowerState::Stopped;
        store.update_vm_spec(&stopped, vm.version).await.unwrap();
        r.pass().await.unwrap();
        let vm = store.get_vm(&id, &Scope::All).await.unwrap();
        assert_eq!(vm.status.state, VmState::Stopped);
        assert_eq!(vm.status.external_ip, None);

        let del = derive_status(Desired::Deleted, &Observation::new(Phase::Absent), &vm.status, Utc::now());
        store.mark_vm_deleted(&id, &Scope::All, &del, Utc::now()).await.unwrap();
        let first = r.pass().await.unwrap();
        assert_eq!(first.removed, 0);
        assert_eq!(state(&store, &id).await, VmState::Deleting);
        let second = r.pass().await.unwrap();
        assert_eq!(second.removed, 1);
        assert!(matches!(store.get_vm(&id, &Scope::All).await, Err(StoreError::NotFound { .. })));
    }

    #[tokio::test]
    async fn failures_and_backend_errors_are_reported() {
        let (_d, store, backend, r) = setup().await;
        let mut gpu = ResolvedSpec::default();
        gpu.gpus.push(vmaas_model::Gpu { name: "gpu0".into(), device_name: "nvidia.com/A10".into() });
        let failing = add_vm(&store, "gpu", PowerState::Started, gpu).await;
        r.pass().await.unwrap();
        let vm = store.get_vm(&failing, &Scope::All).await.unwrap();
        assert_eq!(vm.status.state, VmState::Failed);
        assert_eq!(vm.status.condition(ConditionType::Failed).unwrap().reason.as_deref(), Some("NoGPUAvailable"));

        let ok = add_vm(&store, "ok", PowerState::Started, ResolvedSpec::default()).await;
        *backend.fail_next.lock().unwrap() = true;
        let report = r.pass().await.unwrap();
        assert_eq!(report.errors, 1);
        let statuses = [store.get_vm(&failing, &Scope::All).await.unwrap(), store.get_vm(&ok, &Scope::All).await.unwrap()];
        let errored =
            statuses.iter().find(|v| v.status.condition(ConditionType::Degraded).unwrap().status == ConditionStatus::True).unwrap();
        assert_eq!(errored.status.condition(ConditionType::Degraded).unwrap().reason.as_deref(), Some("BackendError"));
        assert!(errored.status.condition(ConditionType::Degraded).unwrap().message.contains("connection refused"));
    }

    #[tokio::test]
    async fn only_the_lease_holder_reconciles() {
        let (_d, store, _b, _r) = setup().await;
        let now = Utc::now();
        let ttl = Duration::from_secs(10);
        assert!(store.acquire_lease(LEASE, "a", now, ttl).await.unwrap());
        assert!(!store.acquire_lease(LEASE, "b", now, ttl).await.unwrap());
        assert!(store.acquire_lease(LEASE, "a", now, ttl).await.unwrap());
        // Expired: b takes over.
        assert!(store.acquire_lease(LEASE, "b", now + chrono::Duration::seconds(11), ttl).await.unwrap());
        assert!(!store.acquire_lease(LEASE, "a", now + chrono::Duration::seconds(12), ttl).await.unwrap());
    }
}
