//! The `none` backend: the API and the store without any hypervisor.
//!
//! VMs are recorded and validated but never run: they stay PROGRESSING with
//! reason `NoBackend`, stop at once, and are removed at once. For API-only
//! deployments and for the API's own tests; `qemu` runs real VMs.

use async_trait::async_trait;
use vmaas_model::{Observation, Phase, PowerState, Reason};

use vmaas_backend::{Backend, BackendError, Cleanup, VmTarget};

/// A backend that runs nothing.
#[derive(Debug, Default)]
pub struct NoBackend;

#[async_trait]
impl Backend for NoBackend {
    fn name(&self) -> &'static str {
        "none"
    }

    async fn ensure(&self, target: &VmTarget) -> Result<Observation, BackendError> {
        Ok(Observation::new(match target.power {
            PowerState::Stopped => Phase::Stopped,
            PowerState::Started => {
                Phase::Starting(Reason::new("NoBackend", "this server runs with --backend none: VMs are recorded but never started"))
            }
        }))
    }

    async fn delete(&self, _id: &str) -> Result<Cleanup, BackendError> {
        Ok(Cleanup::Done)
    }
}
