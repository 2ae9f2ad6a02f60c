//! The work queue of the reconciler: objects due for a pass, each at most
//! once at a time (an object enqueued while its pass runs waits for it),
//! with a due time per object in the style of kube-runtime's requeue.
//! Every operation is O(log n) in the objects queued: the waiting objects
//! are kept ordered by due time, so the next one is the first.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use vmaas_model::ObjectKind;

/// An object to reconcile.
pub type Key = (ObjectKind, String);

#[derive(Default)]
struct State {
    /// When each waiting object (not running) is due.
    due: HashMap<Key, Instant>,
    /// The same, in due order.
    order: BTreeSet<(Instant, Key)>,
    /// Objects whose pass is running.
    running: HashSet<Key>,
    /// Objects enqueued while their pass runs: due once it ends.
    parked: HashMap<Key, Instant>,
}

impl State {
    /// Makes `key` (not running) due at `at`, or sooner if it is already.
    fn wait(&mut self, key: Key, at: Instant) {
        match self.due.get(&key) {
            Some(current) if *current <= at => {}
            Some(current) => {
                let current = *current;
                self.order.remove(&(current, key.clone()));
                self.order.insert((at, key.clone()));
                self.due.insert(key, at);
            }
            None => {
                self.order.insert((at, key.clone()));
                self.due.insert(key, at);
            }
        }
    }
}

/// Objects due for reconciling; shared by the API, the backend's wake-ups
/// and the reconciler's workers.
#[derive(Default)]
pub struct Queue {
    state: Mutex<State>,
    changed: Notify,
    /// Signalled whenever the reconciler writes a status.
    written: Notify,
}

impl Queue {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Asks for a pass over `kind`/`id` now.
    pub fn enqueue(&self, kind: ObjectKind, id: &str) {
        self.enqueue_at((kind, id.to_owned()), Instant::now());
    }

    /// Asks for a pass over `key` after `d` (or sooner, if asked already).
    pub fn enqueue_after(&self, key: Key, d: Duration) {
        self.enqueue_at(key, Instant::now() + d);
    }

    fn enqueue_at(&self, key: Key, at: Instant) {
        let mut s = self.lock();
        if s.running.contains(&key) {
            let parked = s.parked.entry(key).or_insert(at);
            *parked = (*parked).min(at);
            return;
        }
        s.wait(key, at);
        drop(s);
        self.changed.notify_one();
    }

    /// The next object due whose pass is not running; marks it running.
    pub async fn next(&self) -> Key {
        loop {
            let wait = {
                let mut s = self.lock();
                let now = Instant::now();
                match s.order.first().map(|(at, _)| *at) {
                    Some(at) if at <= now => {
                        if let Some((_, key)) = s.order.pop_first() {
                            s.due.remove(&key);
                            s.running.insert(key.clone());
                            return key;
                        }
                        now
                    }
                    Some(at) => at,
                    None => now + Duration::from_secs(3600),
                }
            };
            tokio::select! {
                _ = self.changed.notified() => {}
                _ = tokio::time::sleep_until(wait) => {}
            }
        }
    }

    /// Ends the pass over `key`, due again after `requeue` if given (or
    /// sooner, if it was enqueued meanwhile).
    pub fn done(&self, key: Key, requeue: Option<Duration>) {
        let mut s = self.lock();
        s.running.remove(&key);
        let parked = s.parked.remove(&key);
        let again = [parked, requeue.map(|d| Instant::now() + d)].into_iter().flatten().min();
        if let Some(at) = again {
            s.wait(key, at);
        }
        drop(s);
        self.changed.notify_one();
    }

    /// How many objects wait or run.
    pub fn len(&self) -> usize {
        let s = self.lock();
        s.due.len() + s.parked.len() + s.running.len()
    }

    /// Whether nothing waits or runs.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Tells waiters a status was written.
    pub fn status_written(&self) {
        self.written.notify_waiters();
    }

    /// Resolves at the next status write, or after `at_most`.
    pub async fn wait_status(&self, at_most: Duration) {
        let _ = tokio::time::timeout(at_most, self.written.notified()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_pass_at_a_time_per_object() {
        let q = Queue::default();
        let vm = ObjectKind::VirtualMachine;
        q.enqueue(vm, "a");
        let first = q.next().await;
        assert_eq!(first, (vm, "a".to_owned()));
        // Enqueued again while running: not handed out until done.
        q.enqueue(vm, "a");
        q.enqueue(vm, "b");
        assert_eq!(q.next().await, (vm, "b".to_owned()));
        assert!(tokio::time::timeout(Duration::from_millis(50), q.next()).await.is_err());
        q.done(first, None);
        assert_eq!(q.next().await, (vm, "a".to_owned()));
    }

    #[tokio::test]
    async fn the_earliest_due_comes_first_and_a_sooner_enqueue_wins() {
        let q = Queue::default();
        let vm = ObjectKind::VirtualMachine;
        let key = |id: &str| (vm, id.to_owned());
        q.enqueue_after(key("late"), Duration::from_millis(60));
        q.enqueue_after(key("soon"), Duration::from_millis(20));
        q.enqueue_after(key("later"), Duration::from_secs(3600));
        q.enqueue(vm, "later");
        assert_eq!(q.next().await, key("later"), "moved to now");
        assert_eq!(q.next().await, key("soon"));
        assert_eq!(q.next().await, key("late"));
        assert_eq!(q.len(), 3, "three running");
        // Enqueued while running and requeued at done: the sooner of the two.
        q.enqueue_after(key("soon"), Duration::from_millis(10));
        q.done(key("soon"), Some(Duration::from_secs(3600)));
        let started = Instant::now();
        assert_eq!(q.next().await, key("soon"));
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn requeue_waits_its_time() {
        let q = Queue::default();
        let key = (ObjectKind::VirtualMachine, "a".to_owned());
        let started = Instant::now();
        q.enqueue_after(key.clone(), Duration::from_millis(80));
        assert_eq!(q.next().await, key);
        assert!(started.elapsed() >= Duration::from_millis(80));
    }
}
