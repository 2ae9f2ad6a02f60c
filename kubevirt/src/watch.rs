//! Status comes from watches, not polling: one reflector per kind of
//! object, cluster-wide and label-selected, kept in memory; each change
//! wakes the reconciler for the vmaas object the changed object's labels
//! name. Beside each store, an [`Index`] of each vmaas object's objects
//! (and, for VMs, what they ask together), followed from the same events.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::StreamExt;
use kube::core::{ApiResource, DynamicObject};
use kube::runtime::reflector::{self, ObjectRef, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use tracing::{debug, warn};
use vmaas_backend::{BackendError, Wake};
use vmaas_model::ObjectKind;
use watcher::Event;

use crate::cluster::Cluster;
use crate::index::Index;
use crate::names::{ID_LABEL, KIND_LABEL};
use crate::room::Held;

/// Where the reconciler's waker will be once the server attaches it.
pub type Waker = Arc<OnceLock<Wake>>;

/// One kind of object, watched.
#[derive(Clone)]
pub struct Watched {
    store: Store<DynamicObject>,
    index: Arc<Mutex<Index>>,
    ar: ApiResource,
    task: Arc<tokio::task::AbortHandle>,
}

impl Drop for Watched {
    fn drop(&mut self) {
        if Arc::strong_count(&self.task) == 1 {
            self.task.abort();
        }
    }
}

/// The vmaas object `o` belongs to, by its labels.
pub fn owner_of(o: &DynamicObject) -> Option<(ObjectKind, &str)> {
    let labels = o.metadata.labels.as_ref()?;
    Some((ObjectKind::parse(labels.get(KIND_LABEL)?)?, labels.get(ID_LABEL)?.as_str()))
}

impl Watched {
    /// Starts watching `ar` objects (in namespace `ns`, or all when empty)
    /// that match `selector`, waking the owner of each one that changes.
    pub fn start(cluster: &Cluster, ar: &ApiResource, ns: &str, selector: Option<&str>, waker: Waker) -> Self {
        Self::tallying(cluster, ar, ns, selector, waker, None)
    }

    /// As [`Watched::start`], each object counted by `tally` (see [`Watched::held`]).
    pub fn tallying(
        cluster: &Cluster,
        ar: &ApiResource,
        ns: &str,
        selector: Option<&str>,
        waker: Waker,
        tally: Option<fn(&DynamicObject) -> Held>,
    ) -> Self {
        let writer = Writer::new(ar.clone());
        let store = writer.as_reader();
        let mut config = watcher::Config::default();
        if let Some(s) = selector {
            config = config.labels(s);
        }
        let kind = ar.kind.clone();
        let index = Arc::new(Mutex::new(Index::new(ar.clone(), tally)));
        // Who set which field is the API server's bookkeeping, never read
        // here: kept out of memory, and out of every object's JSON.
        let events = watcher(cluster.api(ar, ns), config).modify(crate::cluster::strip);
        let stream = reflector::reflector(writer, events).default_backoff();
        let follower = index.clone();
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(item) = stream.next().await {
                match item {
                    Ok(event) => {
                        if let Ok(mut i) = follower.lock() {
                            i.apply(&event);
                        }
                        let (Event::Apply(o) | Event::InitApply(o) | Event::Delete(o)) = &event else { continue };
                        if let (Some((k, id)), Some(w)) = (owner_of(o), waker.get()) {
                            debug!(kind = %kind, name = ?o.metadata.name, owner = id, "changed");
                            w.wake(k, id);
                        }
                    }
                    Err(e) => warn!(kind = %kind, error = %e, "watch failed; retrying"),
                }
            }
        });
        Self { store, index, ar: ar.clone(), task: Arc::new(task.abort_handle()) }
    }

    /// Waits until the first full list is in, for at most `timeout`.
    pub async fn ready(&self, timeout: Duration) -> Result<(), BackendError> {
        let what = || format!("listing every {} the server made", self.ar.kind);
        match tokio::time::timeout(timeout, self.store.wait_until_ready()).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(BackendError::transient(what(), e)),
            Err(_) => Err(BackendError::transient(what(), format!("no answer in {timeout:?} (is the CRD installed?)"))),
        }
    }

    /// The kind of object watched.
    pub fn resource(&self) -> &ApiResource {
        &self.ar
    }

    /// Object `ns/name`, as last seen.
    pub fn get(&self, ns: &str, name: &str) -> Option<Arc<DynamicObject>> {
        self.store.get(&ObjectRef::new_with(name, self.ar.clone()).within(ns))
    }

    /// Cluster-scoped object `name`, as last seen.
    pub fn get_cluster(&self, name: &str) -> Option<Arc<DynamicObject>> {
        self.store.get(&ObjectRef::new_with(name, self.ar.clone()))
    }

    /// The objects of vmaas object `id`, as last seen.
    pub fn of(&self, id: &str) -> Vec<Arc<DynamicObject>> {
        let refs = self.index.lock().map(|i| i.owned_by(&crate::names::label_value(id))).unwrap_or_default();
        refs.iter().filter_map(|r| self.store.get(r)).collect()
    }

    /// What the objects seen ask together, as the tally given at the
    /// start counts each (nothing without one).
    pub fn held(&self) -> Held {
        self.index.lock().map(|i| i.total().clone()).unwrap_or_default()
    }

    /// The objects of vmaas object `id`: as last seen or, when the watch
    /// has seen none yet (it can lag behind the cluster), as the API server
    /// lists them now. For requests, which are answered once and not retried.
    pub async fn of_or_listed(&self, cluster: &Cluster, id: &str) -> Result<Vec<Arc<DynamicObject>>, BackendError> {
        let seen = self.of(id);
        if !seen.is_empty() {
            return Ok(seen);
        }
        let listed = cluster.list(&self.ar, &crate::names::selector_of(id)).await?;
        Ok(listed.into_iter().map(Arc::new).collect())
    }

    /// Every object, as last seen.
    pub fn all(&self) -> Vec<Arc<DynamicObject>> {
        self.store.state()
    }
}
