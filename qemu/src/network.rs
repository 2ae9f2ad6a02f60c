//! Virtual networks on this host. Each network has a directory
//! `DATA_DIR/networks/<id>/` holding `network.json` (its address plan,
//! written atomically), which the user-space switch of its subnets and the
//! IPAM of its attachments build on.

use std::path::PathBuf;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tracing::info;
use vmaas_backend::{BackendError, Cleanup, Driver, NetworkObservation, NetworkSpec, NetworkTarget, Requeue};

use crate::state::save_json;

/// Name of a network's state file.
const FILE: &str = "network.json";

/// What is kept on disk for a network.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct NetworkFile {
    id: String,
    tenant: String,
    name: String,
    ipv4_cidr: Option<String>,
    ipv6_cidr: Option<String>,
}

/// The virtual network driver.
pub struct Networks {
    dir: PathBuf,
}

impl Networks {
    /// Networks kept under `dir`.
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    async fn save(&self, file: &NetworkFile) -> Result<(), BackendError> {
        let dir = self.dir.join(&file.id);
        tokio::fs::create_dir_all(&dir).await.map_err(|e| BackendError::transient(format!("making {}", dir.display()), e))?;
        save_json(dir.join(FILE), file).await
    }

    async fn load(&self, id: &str) -> Option<NetworkFile> {
        let text = tokio::fs::read(self.dir.join(id).join(FILE)).await.ok()?;
        serde_json::from_slice(&text).ok()
    }
}

#[async_trait]
impl Driver<NetworkSpec, NetworkObservation> for Networks {
    async fn ensure(&self, t: &NetworkTarget) -> Result<(NetworkObservation, Requeue), BackendError> {
        let want = NetworkFile {
            id: t.id.clone(),
            tenant: t.tenant.clone(),
            name: t.name.clone(),
            ipv4_cidr: t.spec.ipv4_cidr.clone(),
            ipv6_cidr: t.spec.ipv6_cidr.clone(),
        };
        if self.load(&t.id).await.as_ref() != Some(&want) {
            self.save(&want).await?;
            info!(network = %t.id, name = %t.name, ipv4 = ?want.ipv4_cidr, ipv6 = ?want.ipv6_cidr, "virtual network ready");
        }
        Ok((NetworkObservation::Ready, Requeue::AwaitChange))
    }

    async fn delete(&self, id: &str) -> Result<Cleanup, BackendError> {
        let dir = self.dir.join(id);
        match tokio::fs::remove_dir_all(&dir).await {
            Ok(()) => info!(network = %id, "virtual network removed"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(BackendError::transient(format!("removing {}", dir.display()), e)),
        }
        Ok(Cleanup::Done)
    }
}

#[cfg(test)]
mod tests {
    use vmaas_backend::Target;

    use super::*;

    #[tokio::test]
    async fn keeps_the_address_plan_and_removes_it() {
        let d = tempfile::tempdir().unwrap();
        let n = Networks::new(d.path().join("networks"));
        let spec = NetworkSpec { ipv4_cidr: Some("10.10.0.0/16".into()), ipv6_cidr: None };
        let t = Target { id: "n1".into(), tenant: "acme".into(), name: "net".into(), version: 1, spec };
        assert_eq!(n.ensure(&t).await.unwrap().0, NetworkObservation::Ready);
        let saved = n.load("n1").await.unwrap();
        assert_eq!(saved.ipv4_cidr.as_deref(), Some("10.10.0.0/16"));
        assert_eq!(n.delete("n1").await.unwrap(), Cleanup::Done);
        assert!(!d.path().join("networks/n1").exists());
        assert_eq!(n.delete("n1").await.unwrap(), Cleanup::Done, "deleting twice is fine");
    }
}
