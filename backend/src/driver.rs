//! The per-kind driver: a typed target in, a typed observation and a
//! requeue hint out; deletion one step at a time; and a sweep of what
//! belongs to no object.

use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::mpsc;
use vmaas_model::ObjectKind;

use crate::error::BackendError;

/// One object as a driver sees it: identity plus its kind's desired state.
#[derive(Debug, Clone, PartialEq)]
pub struct Target<S> {
    /// Server-assigned id; stable for the object's whole life.
    pub id: String,
    /// Owner.
    pub tenant: String,
    /// Name, unique per tenant and kind.
    pub name: String,
    /// Version of the desired state: a change means it may have changed.
    pub version: i64,
    /// The desired state, with every reference resolved.
    pub spec: S,
}

/// When to reconcile an object again, in the style of kube-runtime's `Action`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requeue {
    /// Look again after this long (something is under way).
    After(Duration),
    /// Nothing to do until the object changes or the backend wakes it.
    AwaitChange,
}

impl Requeue {
    /// Look again after `d`.
    pub fn after(d: Duration) -> Self {
        Self::After(d)
    }

    /// How long until the object is looked at again; none: not until it
    /// changes or the backend wakes it.
    pub fn delay(self) -> Option<Duration> {
        match self {
            Self::After(d) => Some(d),
            Self::AwaitChange => None,
        }
    }
}

/// How far a deletion has gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cleanup {
    /// Everything the object had is gone; the record may be removed.
    Done,
    /// Still removing; ask again later.
    InProgress,
}

/// Drives the objects of one kind.
#[async_trait]
pub trait Driver<S, O>: Send + Sync {
    /// Makes one step towards `target` and reports what the object is now.
    async fn ensure(&self, target: &Target<S>) -> Result<(O, Requeue), BackendError>;

    /// Makes one step towards removing everything object `id` has.
    async fn delete(&self, id: &str) -> Result<Cleanup, BackendError>;

    /// Called with the ids of every object of this kind that exists, so the
    /// driver can deal with what belongs to none of them.
    async fn retain(&self, _known: &[String]) -> Result<(), BackendError> {
        Ok(())
    }
}

/// Wakes the reconciler for one object, from the backend's own tasks.
#[derive(Debug, Clone)]
pub struct Wake(mpsc::UnboundedSender<(ObjectKind, String)>);

impl Wake {
    /// A waker and the receiving end the reconciler reads.
    pub fn channel() -> (Self, mpsc::UnboundedReceiver<(ObjectKind, String)>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self(tx), rx)
    }

    /// Asks for object `id` of `kind` to be reconciled soon.
    pub fn wake(&self, kind: ObjectKind, id: &str) {
        let _ = self.0.send((kind, id.to_owned()));
    }
}
