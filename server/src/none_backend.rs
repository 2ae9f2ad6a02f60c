//! The `none` backend: the API and the store without any hypervisor.
//!
//! VMs are recorded and validated but never run: they stay PROGRESSING with
//! reason `NoBackend`, stop at once, and are removed at once. For API-only
//! deployments and for the API's own tests; `qemu` runs real VMs.

use std::sync::Arc;

use async_trait::async_trait;
use vmaas_backend::{Backend, BackendError, Capabilities, Cleanup, Driver, Requeue, VmDriver, VmObservation, VmSpec, VmTarget};
use vmaas_model::{ObjectKind, Observation, Phase, PowerState, Reason};

/// A backend that runs nothing.
#[derive(Debug, Default)]
pub struct NoBackend;

/// Its VM driver: records, never runs.
#[derive(Debug, Default)]
pub struct NoVms;

impl Backend for NoBackend {
    fn name(&self) -> &'static str {
        "none"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities { kinds: vec![ObjectKind::VirtualMachine], ..Default::default() }
    }

    /// It runs nothing, so nothing changes unseen.
    fn resync(&self) -> Option<std::time::Duration> {
        None
    }

    fn vms(&self) -> Arc<VmDriver> {
        Arc::new(NoVms)
    }
}

#[async_trait]
impl Driver<VmSpec, VmObservation> for NoVms {
    async fn ensure(&self, target: &VmTarget) -> Result<(VmObservation, Requeue), BackendError> {
        let observation = Observation::new(match target.spec.power {
            PowerState::Stopped => Phase::Stopped,
            PowerState::Started | PowerState::Paused => {
                Phase::Starting(Reason::new("NoBackend", "this server runs with --backend none: VMs are recorded but never started"))
            }
        });
        Ok((VmObservation { observation, acted: target.spec.requests, volumes: Default::default() }, Requeue::AwaitChange))
    }

    async fn delete(&self, _id: &str) -> Result<Cleanup, BackendError> {
        Ok(Cleanup::Done)
    }
}
