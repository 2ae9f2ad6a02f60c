//! One look at a time per key: the first caller to miss a remembered
//! answer (a namespace made or found) asks the API server; callers missing
//! the same key meanwhile wait for it and then find its answer remembered,
//! rather than each asking the same question at once (sixteen reconciles
//! of one tenant's first VMs made 60 namespace reads for 1 000 VMs).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::OwnedMutexGuard;

/// The turns taken so far, by key (one per namespace: as many as the
/// answers remembered beside them).
#[derive(Debug, Default)]
pub(crate) struct Turns(Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>);

/// What a [`Turns::look`] found: the answer remembered, or the turn to ask for it.
pub(crate) enum Look<T> {
    /// Remembered already (perhaps by the caller whose turn came first).
    Remembered(T),
    /// Not remembered: this caller asks, and remembers the answer before
    /// dropping the turn.
    Ask(OwnedMutexGuard<()>),
}

impl Turns {
    /// The answer `remembered` gives for `key`, looked at before and again
    /// after waiting for `key`'s turn (the caller before may have found
    /// it), or that turn, held, when there is still none.
    pub(crate) async fn look<T>(&self, key: &str, remembered: impl Fn() -> Option<T>) -> Look<T> {
        if let Some(found) = remembered() {
            return Look::Remembered(found);
        }
        let turn = self.take(key).await;
        match remembered() {
            Some(found) => Look::Remembered(found),
            None => Look::Ask(turn),
        }
    }

    /// Waits for the turn of `key`: held until dropped, while nobody else holds it.
    async fn take(&self, key: &str) -> OwnedMutexGuard<()> {
        let turn = {
            let mut all = self.0.lock().unwrap_or_else(|p| p.into_inner());
            all.entry(key.to_owned()).or_default().clone()
        };
        turn.lock_owned().await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn callers_of_one_key_take_turns_and_other_keys_do_not_wait() {
        let turns = Arc::new(Turns::default());
        let remembered = Arc::new(Mutex::new(None::<u32>));
        let asked = Arc::new(AtomicUsize::new(0));
        let callers = (0..16).map(|_| {
            let (turns, remembered, asked) = (turns.clone(), remembered.clone(), asked.clone());
            tokio::spawn(async move {
                let _turn = match turns.look("ns", || *remembered.lock().unwrap()).await {
                    Look::Remembered(v) => return v,
                    Look::Ask(turn) => turn,
                };
                asked.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                *remembered.lock().unwrap() = Some(7);
                7
            })
        });
        for c in callers.collect::<Vec<_>>() {
            assert_eq!(c.await.unwrap(), 7);
        }
        assert_eq!(asked.load(Ordering::SeqCst), 1, "one caller asked; the others found its answer");
        // Another key's turn is free while one is held.
        let _held = turns.take("ns").await;
        let other = tokio::time::timeout(std::time::Duration::from_secs(1), turns.take("other")).await;
        assert!(other.is_ok(), "a held key kept another key waiting");
    }
}
