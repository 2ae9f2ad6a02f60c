//! Whether the cluster answers. Its API server is asked for its version
//! every [`EVERY`]; after [`FAILURES`] failures in a row the cluster is
//! unreachable, and every VM the watches hold is woken to report itself
//! DEGRADED (`ClusterUnreachable`, since when and why) with the last state
//! the cluster showed; the first answer after that wakes them again. The
//! watches reconnect on their own. Addresses the cluster reports are data:
//! this only talks to its API server.

use std::sync::{Mutex, Weak};
use std::time::Duration;

use chrono::{SecondsFormat, Utc};
use tracing::{info, warn};
use vmaas_model::Reason;

use crate::Shared;
use crate::watch::owner_of;

/// How often the API server is asked.
pub const EVERY: Duration = Duration::from_secs(2);
/// How long one answer may take.
const TIMEOUT: Duration = Duration::from_secs(3);
/// Failures in a row that make the cluster unreachable.
pub const FAILURES: u32 = 2;

/// The cluster's reachability, as last checked.
#[derive(Default)]
pub struct Health(Mutex<State>);

#[derive(Default)]
struct State {
    failures: u32,
    down: Option<Reason>,
}

impl Health {
    /// Why the cluster is unreachable, if it is.
    pub fn unreachable(&self) -> Option<Reason> {
        self.0.lock().ok().and_then(|s| s.down.clone())
    }

    /// Records one check; true if reachability changed.
    fn record(&self, answer: Result<(), String>) -> bool {
        let Ok(mut s) = self.0.lock() else { return false };
        match answer {
            Ok(()) => {
                s.failures = 0;
                s.down.take().is_some()
            }
            Err(e) => {
                s.failures += 1;
                if s.failures < FAILURES {
                    return false;
                }
                let since = Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true);
                match &mut s.down {
                    Some(r) => {
                        // Keep since when; the last error.
                        let at = r.message.split(" (last error").next().unwrap_or_default().to_owned();
                        r.message = format!("{at} (last error: {e})");
                        false
                    }
                    None => {
                        let message = format!(
                            "the cluster's API server has not answered since {since}; this is the last state it showed (last error: {e})"
                        );
                        s.down = Some(Reason::new("ClusterUnreachable", message));
                        true
                    }
                }
            }
        }
    }
}

/// Checks the cluster of `shared` until it goes, waking every VM when its
/// reachability changes.
pub(crate) async fn watch(shared: Weak<Shared>) {
    loop {
        tokio::time::sleep(EVERY).await;
        let Some(s) = shared.upgrade() else { return };
        let answer = match tokio::time::timeout(TIMEOUT, s.cluster.client().apiserver_version()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("no answer in {TIMEOUT:?}")),
        };
        if !s.health.record(answer) {
            continue;
        }
        match s.health.unreachable() {
            Some(why) => warn!(reason = %why.message, "the cluster is unreachable"),
            None => info!("the cluster answers again"),
        }
        if let Some(w) = s.waker.get() {
            for vm in s.vms.all() {
                if let Some((kind, id)) = owner_of(&vm) {
                    w.wake(kind, id);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unreachable_after_failures_in_a_row_and_back_at_the_first_answer() {
        let h = Health::default();
        assert!(!h.record(Err("refused".into())) && h.unreachable().is_none(), "one failure is not an outage");
        assert!(!h.record(Ok(())));
        assert!(!h.record(Err("refused".into())));
        assert!(h.record(Err("refused".into())), "two in a row: unreachable");
        let why = h.unreachable().unwrap();
        assert_eq!(why.reason, "ClusterUnreachable");
        assert!(why.message.contains("has not answered since") && why.message.ends_with("(last error: refused)"), "{}", why.message);
        assert!(!h.record(Err("timed out".into())), "still down: no change");
        assert!(h.unreachable().unwrap().message.ends_with("(last error: timed out)"));
        assert!(h.record(Ok(())) && h.unreachable().is_none(), "the first answer: reachable");
    }
}
