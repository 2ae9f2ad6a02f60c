//! The reaper of ephemeral VMs: a VM whose `spec.expires_at` has passed is
//! deleted as a tenant's DELETE would (its auto-delete volumes with it),
//! logged, written to the audit log and seen in the event stream.
//!
//! Every replica keeps the ends it knows in a heap: those of the stored
//! VMs, read once at start, then each one the event log shows set (any
//! replica's create or change), so no tick reads every VM. Only the
//! replica that holds the reconciler's lease deletes; a due VM is read
//! again first, and left alone if it was deleted or its end moved.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use tokio::sync::watch;
use tracing::{info, warn};
use vmaas_model::ObjectKind;

use crate::audit::Entry;
use crate::state::AppState;
use crate::store::{Scope, StoreError, VmRecord};

/// The longest sleep between looks (a lease taken over is acted on by then).
const NAP: Duration = Duration::from_secs(1);

/// Ends known, soonest first: one entry per VM and end (the many events
/// of one VM with the same end add nothing).
#[derive(Default)]
struct Ends {
    heap: BinaryHeap<Reverse<(DateTime<Utc>, String)>>,
    latest: HashMap<String, DateTime<Utc>>,
}

impl Ends {
    fn note(&mut self, id: &str, at: Option<DateTime<Utc>>) {
        let Some(at) = at else { return };
        if self.latest.insert(id.to_owned(), at) != Some(at) {
            self.heap.push(Reverse((at, id.to_owned())));
        }
    }

    /// The ids whose latest end is at or before `now` (an end since moved is dropped).
    fn due(&mut self, now: DateTime<Utc>) -> Vec<String> {
        let mut due = Vec::new();
        while self.heap.peek().is_some_and(|Reverse((at, _))| *at <= now) {
            let Some(Reverse((at, id))) = self.heap.pop() else { break };
            if self.latest.get(&id) == Some(&at) {
                self.latest.remove(&id);
                due.push(id);
            }
        }
        due
    }
}

/// The `expires_at` of the VM an event carries, if it has one.
fn end_of(event: &serde_json::Value) -> Option<(String, DateTime<Utc>)> {
    let vm = event.get("virtual_machine")?;
    let at = vm["spec"]["expires_at"].as_str()?.parse().ok()?;
    Some((vm["id"].as_str()?.to_owned(), at))
}

/// Runs until `stop` says so.
pub async fn run(s: AppState, mut stop: watch::Receiver<bool>) {
    let mut ends = Ends::default();
    let after = loop {
        match start(&s, &mut ends).await {
            Ok(after) => break after,
            Err(e) => warn!(error = %e, "reading the VMs that expire; trying again"),
        }
        tokio::select! {
            _ = tokio::time::sleep(NAP) => {}
            _ = stop.changed() => return,
        }
    };
    let mut events = s.events.watch(s.store.clone(), after);
    let mut tick = tokio::time::interval(NAP);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            e = events.next() => match e {
                Ok(e) => if let Some((id, at)) = end_of(&e.value) { ends.note(&id, Some(at)) },
                Err(e) => warn!(error = %e, "following the event log for VMs that expire"),
            },
            _ = tick.tick() => {
                if s.progress.is_leader() {
                    for id in ends.due(Utc::now()) {
                        reap(&s, &id, &mut ends).await;
                    }
                }
            }
            _ = stop.changed() => return,
        }
    }
}

/// Notes the end of every stored VM; the event log's place it read them at.
async fn start(s: &AppState, ends: &mut Ends) -> Result<i64, StoreError> {
    let after = s.store.last_event().await?;
    for row in s.store.all(ObjectKind::VirtualMachine).await? {
        let vm = VmRecord::from_row(&row)?;
        if vm.deleted_at.is_none() {
            ends.note(&vm.id, vm.spec.expires_at);
        }
    }
    Ok(after)
}

/// Deletes VM `id` if it is still due; a failure is tried again soon.
async fn reap(s: &AppState, id: &str, ends: &mut Ends) {
    let now = Utc::now();
    let vm = match s.store.get_vm(id, &Scope::All).await {
        Ok(vm) => vm,
        Err(StoreError::NotFound { .. }) => return,
        Err(e) => {
            warn!(vm = %id, error = %e, "reading an expired VM; trying again");
            ends.note(id, Some(now));
            return;
        }
    };
    let Some(at) = vm.spec.expires_at.filter(|at| *at <= now && vm.deleted_at.is_none()) else { return };
    match s.store.mark_vm_deleted(id, &Scope::All, now).await {
        Ok(_) => {
            s.queue.enqueue(ObjectKind::VirtualMachine, id);
            info!(vm = %id, name = %vm.name, tenant = %vm.tenant, expired_at = %at, "virtual machine expired: deletion requested");
            audit(s, &vm).await;
        }
        Err(StoreError::NotFound { .. }) => {}
        Err(e) => {
            warn!(vm = %id, error = %e, "deleting an expired VM; trying again");
            ends.note(id, Some(now));
        }
    }
}

/// The audit log's line for the server's own delete of an expired VM.
async fn audit(s: &AppState, vm: &VmRecord) {
    let Some(log) = &s.audit else { return };
    log.record(Entry {
        time: Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true),
        subject: Some("vmaas-server (expired)".into()),
        tenant: Some(vm.tenant.clone()),
        role: None,
        method: "DELETE".into(),
        path: format!("/api/fulfillment/v1/virtual_machines/{}", vm.id),
        status: 202,
        result: "ok",
        duration_ms: 0.0,
        remote: None,
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_come_due_soonest_first() {
        let now = Utc::now();
        let mut ends = Ends::default();
        ends.note("b", Some(now + chrono::Duration::seconds(5)));
        ends.note("a", Some(now - chrono::Duration::seconds(1)));
        ends.note("c", None);
        ends.note("d", Some(now - chrono::Duration::seconds(2)));
        ends.note("d", Some(now + chrono::Duration::seconds(60)));
        ends.note("b", Some(now + chrono::Duration::seconds(5)));
        assert_eq!(ends.due(now), ["a"], "d's end moved; b noted twice is one entry");
        assert_eq!(ends.heap.len(), 2);
        assert!(ends.due(now).is_empty());
        assert_eq!(ends.due(now + chrono::Duration::seconds(6)), ["b"]);
    }

    #[test]
    fn an_event_names_its_vms_end() {
        let e = serde_json::json!({"id": "7", "type": "EVENT_TYPE_OBJECT_CREATED",
            "virtual_machine": {"id": "vm1", "spec": {"expires_at": "2030-01-01T00:00:00Z"}}});
        assert_eq!(end_of(&e).map(|(id, at)| (id, at.to_rfc3339())), Some(("vm1".into(), "2030-01-01T00:00:00+00:00".into())));
        assert_eq!(end_of(&serde_json::json!({"virtual_machine": {"id": "vm2", "spec": {}}})), None);
    }
}
