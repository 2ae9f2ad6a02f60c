//! # vmaas-backend
//!
//! The backend trait: what the reconciler needs from whatever runs the VMs.
//!
//! A backend is level-triggered and idempotent: [`Backend::ensure`] is called
//! again and again with the whole desired state and makes one cheap step
//! towards it, reporting what it sees. Slow work (booting, probing) happens in
//! the backend's own tasks between calls.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::{Notify, broadcast, mpsc};
use vmaas_model::{Observation, PowerState, ResolvedSpec};

/// Everything a backend needs to know about one VM.
#[derive(Debug, Clone, PartialEq)]
pub struct VmTarget {
    /// Server-assigned UUID; stable for the VM's whole life.
    pub id: String,
    /// Owner.
    pub tenant: String,
    /// Name, unique per tenant.
    pub name: String,
    /// Run or stay off.
    pub power: PowerState,
    /// The machine to build.
    pub spec: ResolvedSpec,
    /// Spec version: a change means the spec may have changed.
    pub version: i64,
    /// Restarts requested so far: a count the backend has not acted on yet
    /// asks for one more restart.
    pub restarts: i64,
}

/// How far a deletion has gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cleanup {
    /// Everything the VM had is gone; the record may be removed.
    Done,
    /// Still removing; ask again later.
    InProgress,
}

/// A failure talking to the backend. Failures the tenant must act on are not
/// errors but observations in `Phase::Failed`.
#[derive(Debug, thiserror::Error)]
#[error("{context}: {message}")]
pub struct BackendError {
    /// What was being done.
    pub context: String,
    /// What went wrong.
    pub message: String,
}

impl BackendError {
    /// An error while doing `context`.
    pub fn new(context: impl Into<String>, message: impl std::fmt::Display) -> Self {
        Self { context: context.into(), message: message.to_string() }
    }
}

/// A live serial console: what was printed so far, what is printed from
/// now on, and a way to type.
pub struct Console {
    /// The buffered output, oldest first.
    pub history: Vec<u8>,
    /// Output from now on.
    pub output: broadcast::Receiver<Bytes>,
    /// Input to the guest.
    pub input: mpsc::Sender<Bytes>,
}

/// Runs VMs.
#[async_trait]
pub trait Backend: Send + Sync + 'static {
    /// Short name, e.g. `qemu`.
    fn name(&self) -> &'static str;

    /// Gives the backend a way to wake the reconciler when something changes
    /// (a guest becomes ready, a process exits), so it need not wait for the
    /// next tick.
    fn attach(&self, _wake: Arc<Notify>) {}

    /// The serial console of VM `id`.
    async fn console(&self, _id: &str) -> Result<Console, BackendError> {
        Err(BackendError::new("opening the console", format!("the {} backend has no serial console", self.name())))
    }

    /// The buffered console output of VM `id`.
    async fn console_log(&self, id: &str) -> Result<Vec<u8>, BackendError> {
        Ok(self.console(id).await?.history)
    }

    /// Details for `/healthz`, e.g. the accelerator in use.
    fn health(&self) -> serde_json::Value {
        serde_json::Value::Object(Default::default())
    }

    /// Makes one step towards `target` and reports what the VM is now.
    async fn ensure(&self, target: &VmTarget) -> Result<Observation, BackendError>;

    /// Makes one step towards removing everything VM `id` has.
    async fn delete(&self, id: &str) -> Result<Cleanup, BackendError>;

    /// Called once per reconcile pass with the ids of every VM that exists, so
    /// the backend can clean up what belongs to none of them.
    async fn retain(&self, _known: &[String]) -> Result<(), BackendError> {
        Ok(())
    }
}
