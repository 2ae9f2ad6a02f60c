//! The state machine driven by a scripted test driver, over a real SQLite store.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use vmaas_backend::{BackendError, Capabilities, Cleanup, Driver, Requeue, VmDriver, VmObservation, VmSpec, VmTarget};
use vmaas_model::{ConditionStatus, ConditionType, MachineSpec, Observation, Phase, PowerState, Reason, VirtualMachineSpec, VmState};

use super::*;
use crate::store::Scope;

/// A scripted driver: a VM boots in `BOOT_STEPS` calls, stops at once, and
/// takes two calls to delete. GPUs are never available.
#[derive(Default)]
struct ScriptedVms {
    vms: Mutex<HashMap<String, (PowerState, u32)>>,
    deletions: Mutex<HashMap<String, u32>>,
    fail_next: Mutex<Option<BackendError>>,
}

const BOOT_STEPS: u32 = 2;

#[async_trait]
impl Driver<VmSpec, VmObservation> for ScriptedVms {
    async fn ensure(&self, t: &VmTarget) -> Result<(VmObservation, Requeue), BackendError> {
        if let Some(e) = self.fail_next.lock().unwrap().take() {
            return Err(e);
        }
        let seen =
            |observation| Ok((VmObservation { observation, acted: t.spec.requests, volumes: Default::default() }, Requeue::AwaitChange));
        if !t.spec.machine.gpus.is_empty() {
            return seen(Observation::new(Phase::Failed(Reason::new("NoGPUAvailable", "no GPU on this host"))));
        }
        let mut vms = self.vms.lock().unwrap();
        let entry = vms.entry(t.id.clone()).or_insert((PowerState::Stopped, 0));
        let phase = match t.spec.power {
            PowerState::Stopped => {
                *entry = (PowerState::Stopped, 0);
                Phase::Stopped
            }
            PowerState::Paused => Phase::Paused,
            PowerState::Started => {
                entry.0 = PowerState::Started;
                entry.1 += 1;
                if entry.1 > BOOT_STEPS { Phase::Ready } else { Phase::Starting(Reason::new("Booting", "the guest is booting")) }
            }
        };
        let mut obs = Observation::new(phase);
        if t.spec.power == PowerState::Started {
            obs.internal_ip = Some("10.0.2.15".into());
            obs.external_ip = Some("127.42.0.1".into());
        }
        seen(obs)
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

struct Scripted(Arc<ScriptedVms>);

impl Backend for Scripted {
    fn name(&self) -> &'static str {
        "scripted"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities { kinds: vec![ObjectKind::VirtualMachine], ..Default::default() }
    }
    fn vms(&self) -> Arc<VmDriver> {
        self.0.clone()
    }
}

async fn setup() -> (tempfile::TempDir, Store, Arc<ScriptedVms>, Reconciler) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_sqlite(dir.path()).await.unwrap();
    let tpl: vmaas_model::VirtualMachineTemplate = serde_json::from_value(serde_json::json!({"id": "tpl"})).unwrap();
    store.insert_template(&tpl, Utc::now()).await.unwrap();
    let vms = Arc::new(ScriptedVms::default());
    let r = Reconciler::new(
        store.clone(),
        Arc::new(Scripted(vms.clone())),
        Arc::new(Queue::default()),
        Arc::new(Metrics::new()),
        ReconcilerConfig::default(),
    );
    (dir, store, vms, r)
}

async fn add_vm(store: &Store, name: &str, power: PowerState, machine: MachineSpec) -> String {
    let spec = VirtualMachineSpec { state: power, ..VirtualMachineSpec::new("tpl") };
    let rec = VmRecord::new(uuid::Uuid::new_v4().to_string(), "t1", name, "t1", spec, machine, Utc::now());
    store.insert_vm(&rec).await.unwrap();
    rec.record.id
}

async fn state(store: &Store, id: &str) -> VmState {
    store.get_vm(id, &Scope::All).await.unwrap().status.state
}

#[tokio::test]
async fn boots_to_ready_then_stops_then_deletes() {
    let (_d, store, _b, r) = setup().await;
    let id = add_vm(&store, "a", PowerState::Started, MachineSpec::default()).await;
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

    store.mark_vm_deleted(&id, &Scope::All, Utc::now()).await.unwrap();
    let first = r.pass().await.unwrap();
    assert_eq!(first.removed, 0);
    assert_eq!(state(&store, &id).await, VmState::Deleting);
    let second = r.pass().await.unwrap();
    assert_eq!(second.removed, 1);
    assert!(matches!(store.get_vm(&id, &Scope::All).await, Err(StoreError::NotFound { .. })));
}

#[tokio::test]
async fn a_change_is_acknowledged_before_the_backend_acts() {
    let (_d, store, backend, r) = setup().await;
    let id = add_vm(&store, "a", PowerState::Started, MachineSpec::default()).await;
    for _ in 0..3 {
        r.pass().await.unwrap();
    }
    let vm = store.get_vm(&id, &Scope::All).await.unwrap();
    assert_eq!(vm.status.state, VmState::Ready);
    // A restart is a new generation of a named request; the backend fails
    // this once, so only the acknowledgement is written.
    let vm = store.request_restart(&id, &Scope::All).await.unwrap();
    assert!(vm.unacknowledged());
    *backend.fail_next.lock().unwrap() = Some(BackendError::transient("booting", "busy"));
    r.pass().await.unwrap();
    let vm = store.get_vm(&id, &Scope::All).await.unwrap();
    assert!(!vm.unacknowledged());
    assert_eq!(vm.status.state, VmState::Progressing);
    assert_eq!(vm.requests.restart, 1);
    assert_eq!(vm.acted.restart, 0, "the backend has not restarted it yet");
    r.pass().await.unwrap();
    assert_eq!(store.get_vm(&id, &Scope::All).await.unwrap().acted.restart, 1);
}

#[tokio::test]
async fn the_api_foresees_the_acknowledgement_the_reconciler_writes() {
    let (_d, store, backend, r) = setup().await;
    let id = add_vm(&store, "a", PowerState::Started, MachineSpec::default()).await;
    for _ in 0..3 {
        r.pass().await.unwrap();
    }
    let vm = store.request_migration(&id, &Scope::All, Some("node-b".into())).await.unwrap();
    let foreseen = acknowledged_status(&Scripted(backend.clone()), &vm);
    assert_eq!(foreseen.state, VmState::Migrating, "a requested migration shows at once: {foreseen:?}");
    let mut acked = vm.clone();
    vm::acknowledge(&r, &mut acked).await.unwrap();
    let written = store.get_vm(&id, &Scope::All).await.unwrap().status.clone();
    assert!(!acked.unacknowledged() && written == acked.status, "written: {written:?}");
    assert_eq!(written.state, foreseen.state);
    let ready = |s: &vmaas_model::VirtualMachineStatus| s.condition(ConditionType::Ready).map(|c| (c.status, c.message.clone()));
    assert_eq!(ready(&written), ready(&foreseen));
    assert_eq!(written.external_ip, foreseen.external_ip, "the addresses are kept");
}

#[tokio::test]
async fn failures_and_backend_errors_are_reported() {
    let (_d, store, backend, r) = setup().await;
    let mut gpu = MachineSpec::default();
    gpu.gpus.push(vmaas_model::Gpu { name: "gpu0".into(), device_name: "nvidia.com/A10".into(), pci_device_selector: None });
    let failing = add_vm(&store, "gpu", PowerState::Started, gpu).await;
    r.pass().await.unwrap();
    let vm = store.get_vm(&failing, &Scope::All).await.unwrap();
    assert_eq!(vm.status.state, VmState::Failed);
    assert_eq!(vm.status.condition(ConditionType::Failed).unwrap().reason.as_deref(), Some("NoGPUAvailable"));

    let ok = add_vm(&store, "ok", PowerState::Started, MachineSpec::default()).await;
    *backend.fail_next.lock().unwrap() = Some(BackendError::transient("talking to the hypervisor", "connection refused"));
    let report = r.pass().await.unwrap();
    assert_eq!(report.errors, 1);
    let statuses = [store.get_vm(&failing, &Scope::All).await.unwrap(), store.get_vm(&ok, &Scope::All).await.unwrap()];
    let errored = statuses.iter().find(|v| v.status.condition(ConditionType::Degraded).unwrap().status == ConditionStatus::True).unwrap();
    assert_eq!(errored.status.condition(ConditionType::Degraded).unwrap().reason.as_deref(), Some("BackendError"));
    assert!(errored.status.condition(ConditionType::Degraded).unwrap().message.contains("connection refused"));

    // A request the backend refuses fails the VM instead of retrying.
    *backend.fail_next.lock().unwrap() = Some(BackendError::unsupported("running a VM", "no such device"));
    let report = r.pass().await.unwrap();
    assert_eq!(report.errors, 1);
    let refused: Vec<_> = store
        .all_vms()
        .await
        .unwrap()
        .into_iter()
        .filter(|v| v.status.condition(ConditionType::Failed).unwrap().reason.as_deref() == Some("Unsupported"))
        .collect();
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].status.state, VmState::Failed);
    assert!(refused[0].status.condition(ConditionType::Failed).unwrap().message.contains("no such device"));
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
