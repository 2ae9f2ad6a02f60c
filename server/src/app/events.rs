//! The event log as callers read it (OSAC's `Events.Watch`): one page of
//! the events after a point, or a stream of every event from a point on,
//! each only if the caller may see its object and it passes the caller's
//! filter.

use std::sync::Arc;

use futures::Stream;
use tracing::{debug, warn};

use crate::error::ApiError;
use crate::events::{Audience, Published, start_point};
use crate::state::AppState;
use crate::watches::Slot;

/// Events a page holds at most.
const PAGE: i64 = 1000;

/// The JSON of the events after `after` (absent: from now) that `sees`
/// admits, at most a page.
pub(crate) async fn page(s: &AppState, sees: &Audience, after: Option<i64>) -> Result<Vec<String>, ApiError> {
    let after = start_point(&s.store, after).await?;
    let rows = s.store.events_after(after, PAGE).await?;
    Ok(rows.into_iter().map(Published::new).filter(|e| sees.sees(&e.row.tenant, &e.value)).map(|e| e.json.clone()).collect())
}

/// What a watch yields: an event, or why it ended.
pub(crate) enum Followed {
    /// The next event of the log (each front shows it only to whom it may).
    Event(Arc<Published>),
    /// The stream's slot was taken for another stream.
    Displaced,
    /// The log cannot be read.
    Failed(String),
}

/// Every event after `after` (absent: from now), until the log fails or
/// `slot` is taken for another stream (the last item says which).
pub(crate) async fn watch(s: &AppState, after: Option<i64>, slot: Slot) -> Result<impl Stream<Item = Followed> + Send + use<>, ApiError> {
    let after = start_point(&s.store, after).await?;
    let mut watch = s.events.watch(s.store.clone(), after);
    watch.start().await?;
    Ok(futures::stream::unfold(Some((watch, slot)), |state| async move {
        let (mut watch, slot) = state?;
        let next = tokio::select! {
            e = watch.next() => e,
            () = slot.ended() => {
                debug!("event stream ended to make room for another");
                return Some((Followed::Displaced, None));
            }
        };
        Some(match next {
            Ok(e) => (Followed::Event(e), Some((watch, slot))),
            Err(err) => {
                warn!(error = %err, "event stream ended");
                (Followed::Failed(err.to_string()), None)
            }
        })
    }))
}
