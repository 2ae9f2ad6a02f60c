//! Whether the cluster answers. Its API server is asked for its version
//! every [`EVERY`]; after [`FAILURES`] failures in a row the cluster is
//! unreachable, and every VM the watches hold is woken to report itself
//! DEGRADED (`ClusterUnreachable`, since when and why) with the last state
//! the cluster showed; the first answer after that wakes them again. The
//! watches reconnect on their own. A cluster not listed yet since the
//! server started (it did not answer then) is unreachable too: what it
//! holds is not known, so nothing is made on it or taken to be gone. Addresses the cluster reports are data:
//! this only talks to its API server.

use std::sync::Mutex;
use std::time::Duration;

use chrono::{SecondsFormat, Utc};
use vmaas_model::Reason;

/// How often the API server is asked.
pub const EVERY: Duration = Duration::from_secs(2);
/// How long one answer may take.
pub const TIMEOUT: Duration = Duration::from_secs(3);
/// Failures in a row that make the cluster unreachable.
pub const FAILURES: u32 = 2;

/// The cluster's reachability, as last checked.
#[derive(Default)]
pub struct Health(Mutex<State>);

#[derive(Default)]
struct State {
    failures: u32,
    down: Option<Reason>,
    /// Every watched kind has been listed once.
    listed: bool,
    /// Why the last try to list them failed.
    listing: Option<String>,
}

impl Health {
    /// Why the cluster is unreachable, if it is (not listed yet counts).
    pub fn unreachable(&self) -> Option<Reason> {
        let s = self.0.lock().ok()?;
        if let Some(down) = &s.down {
            return Some(down.clone());
        }
        (!s.listed).then(|| {
            let why = s.listing.as_deref().map(|e| format!(" (last error: {e})")).unwrap_or_default();
            let message = format!("the cluster has not been listed since the server started, so what it holds is not known{why}");
            Reason::new("ClusterUnreachable", message)
        })
    }

    /// Whether what the cluster holds is known (listed since start).
    pub fn listed(&self) -> bool {
        self.0.lock().is_ok_and(|s| s.listed)
    }

    /// Records that every watched kind has been listed.
    pub(crate) fn mark_listed(&self) {
        if let Ok(mut s) = self.0.lock() {
            s.listed = true;
            s.listing = None;
        }
    }

    /// Records why listing failed.
    pub(crate) fn listing_failed(&self, why: String) {
        if let Ok(mut s) = self.0.lock() {
            s.listing = Some(why);
        }
    }

    /// Records one check; true if reachability changed.
    pub(crate) fn record(&self, answer: Result<(), impl std::fmt::Display>) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unreachable_after_failures_in_a_row_and_back_at_the_first_answer() {
        let h = Health::default();
        h.mark_listed();
        assert!(!h.record(Err("refused")) && h.unreachable().is_none(), "one failure is not an outage");
        assert!(!h.record(Ok::<(), &str>(())));
        assert!(!h.record(Err("refused")));
        assert!(h.record(Err("refused")), "two in a row: unreachable");
        let why = h.unreachable().unwrap();
        assert_eq!(why.reason, "ClusterUnreachable");
        assert!(why.message.contains("has not answered since") && why.message.ends_with("(last error: refused)"), "{}", why.message);
        assert!(!h.record(Err("timed out")), "still down: no change");
        assert!(h.unreachable().unwrap().message.ends_with("(last error: timed out)"));
        assert!(h.record(Ok::<(), &str>(())) && h.unreachable().is_none(), "the first answer: reachable");
    }

    #[test]
    fn unreachable_until_listed_with_the_listing_error() {
        let h = Health::default();
        assert!(!h.listed());
        assert_eq!(h.unreachable().unwrap().reason, "ClusterUnreachable");
        h.listing_failed("connection refused".into());
        let why = h.unreachable().unwrap().message;
        assert!(why.contains("not been listed since the server started") && why.ends_with("(last error: connection refused)"), "{why}");
        h.mark_listed();
        assert!(h.listed() && h.unreachable().is_none());
    }
}
