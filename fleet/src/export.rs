//! Exports in a fleet: made by the cluster that holds what is exported
//! (the VM's home, or the cluster whose cache holds the volume or snapshot).

use std::sync::Arc;

use async_trait::async_trait;
use vmaas_backend::{BackendError, ExportFile, ExportSource, Exports as ExportsApi};
use vmaas_model::ObjectKind;

use crate::Inner;

/// The exports of every cluster (each cluster's, if it makes them).
pub struct Exports(pub(crate) Arc<Inner>);

impl Exports {
    /// The exports of the cluster holding `what`.
    fn of(&self, what: &ExportSource) -> Result<&Arc<dyn ExportsApi>, BackendError> {
        let inner = &self.0;
        let at = match what {
            ExportSource::VmDisk(id) => inner.home(id),
            ExportSource::Volume(id) => inner.holders(ObjectKind::Volume, id).next(),
            ExportSource::Snapshot { id, .. } => inner.holders(ObjectKind::ComputeInstanceSnapshot, id).next(),
        };
        let m = at.ok_or_else(|| BackendError::invalid("exporting", "what is exported is on no cluster"))?;
        inner.exports[m]
            .as_ref()
            .ok_or_else(|| BackendError::unsupported("exporting", format!("cluster {:?} does not export disks", inner.members[m].name)))
    }
}

#[async_trait]
impl ExportsApi for Exports {
    async fn export(&self, what: &ExportSource) -> Result<ExportFile, BackendError> {
        self.of(what)?.export(what).await
    }

    async fn made(&self, what: &ExportSource) -> Result<bool, BackendError> {
        self.of(what)?.made(what).await
    }
}
