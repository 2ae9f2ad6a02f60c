//! Moving a VM between clusters: a VM whose placement no longer admits the
//! cluster it is on, and which is to be stopped, moves to one it admits
//! (chosen as a first placement is, with room for it). Stopped where it
//! is, its boot disk is exported there, taken in where it goes (the
//! cluster's [`vmaas_backend::Arrivals`]) and checked against the export's SHA-256; the
//! VM is made there with that disk, and its observation then names the
//! new cluster, which its status records. Only after that is it removed
//! from the cluster it left ([`leave_others`]), so a move that stops
//! halfway (an error, a restart) leaves the VM whole where its status
//! says it is; what the move made on the other side is removed before it
//! is tried again. A VM to be running stays where it is.

use std::collections::hash_map::Entry;
use std::time::{Duration, Instant};

use vmaas_backend::{BackendError, Cleanup, ExportSource, Requeue, VmObservation, VmTarget};
use vmaas_model::{ObjectKind, Phase, Reason};

use crate::Inner;
use crate::place::Choice;

/// How soon a VM left on a cluster it moved from is looked at again.
const LEAVING: Duration = Duration::from_secs(1);
/// The longest wait between two tries of a move that fails.
const MAX_WAIT: Duration = Duration::from_secs(60);

impl Inner {
    /// Whether VM `t`'s placement admits cluster `m`.
    pub(crate) fn admits(&self, t: &VmTarget, m: usize) -> bool {
        t.spec.placement.admits(&self.members[m].name, &self.members[m].labels)
    }
}

/// One step of moving VM `t` off cluster `from`.
pub(crate) async fn step(inner: &Inner, t: &VmTarget, from: usize) -> Result<(VmObservation, Requeue), BackendError> {
    let (mut seen, next) = inner.vms[from].ensure(t).await?;
    seen.observation.cluster = Some(inner.members[from].name.clone());
    if seen.observation.phase != Phase::Stopped {
        // Stopped where it is first.
        return Ok((seen, next));
    }
    let stays = |seen: VmObservation, why: Reason| Ok((with_degraded(seen, why), Requeue::after(Duration::from_secs(30))));
    if t.spec.machine.disks.len() > 1 || !t.spec.volumes.is_empty() {
        let why = "it has disks besides its boot disk (or volumes attached): a VM moves between clusters with its boot disk only";
        return stays(seen, Reason::new("NotMoved", why));
    }
    let to = match inner.choose_move(t, from)? {
        Choice::On(to) => to,
        Choice::Wait(why) | Choice::Refuse(why) => return stays(seen, Reason::new("NotMoved", why.message)),
    };
    let (from_name, to_name) = (&inner.members[from].name, &inner.members[to].name);
    let Some(exports) = &inner.exports[from] else {
        let why = format!("cluster {from_name} does not export disks (a KubeVirt cluster needs --cluster-kubevirt-export-proxy)");
        return stays(seen, Reason::new("NotMoved", why));
    };
    let Some(arrivals) = &inner.arrivals[to] else {
        let why = format!(
            "cluster {to_name} does not take moved VMs' disks (a KubeVirt cluster needs --cluster-cdi-upload-proxy; this host takes none)"
        );
        return stays(seen, Reason::new("NotMoved", why));
    };
    match inner.moving.lock().map_err(|_| poisoned())?.entry(t.id.clone()) {
        Entry::Vacant(v) => {
            // Reported before the disk is copied, which takes a while.
            v.insert(Tries::default());
            let why = Reason::new("Moving", format!("moving from cluster {from_name} to {to_name}: its boot disk is exported next"));
            seen.observation.phase = Phase::Starting(why);
            return Ok((seen, Requeue::after(Duration::ZERO)));
        }
        Entry::Occupied(o) => {
            if let Some((why, wait)) = o.get().waiting() {
                return Ok((with_degraded(seen, Reason::new("MoveFailed", why)), Requeue::after(wait)));
            }
        }
    }
    let mut target = t.clone();
    target.spec.cluster = Some(to_name.clone());
    let moved = async {
        crate::subnet::make_on(inner, to, &t.spec.attachments).await?;
        if arrivals.abandon(&t.id).await? == Cleanup::InProgress {
            let why = format!("an earlier move's half-made copy on cluster {to_name} is being removed");
            return Err(BackendError::transient(format!("moving VM {:?}", t.name), why));
        }
        let boot = ExportSource::VmDisk(t.id.clone());
        // A VM that never ran has no disk yet: it is made where it goes as it would have been.
        if exports.made(&boot).await? {
            let mut disk = exports.export(&boot).await?;
            let _removed = disk.temporary.then(|| vmaas_backend::export::Partial::new(&disk.path));
            // Hashed before it goes: the target checks what it was sent against it.
            disk.hash().await?;
            arrivals.arrive(&target, &disk).await?;
        }
        inner.vms[to].ensure(&target).await
    }
    .await;
    match moved {
        Ok((mut moved, _)) => {
            tracing::info!(vm = %t.id, from = %from_name, to = %to_name, "moved");
            done(inner, &t.id);
            inner.moved(&t.id, to);
            moved.observation.cluster = Some(to_name.clone());
            // Looked at again soon: the cluster it left still holds it.
            Ok((moved, Requeue::after(LEAVING)))
        }
        Err(e) => {
            tracing::warn!(vm = %t.id, from = %from_name, to = %to_name, error = %e, "the move failed; what it made is removed");
            // Nothing half-made stays where it was going.
            let _ = arrivals.abandon(&t.id).await;
            let why = format!("moving to cluster {to_name} failed: {e}");
            let wait = inner.moving.lock().map_err(|_| poisoned())?.entry(t.id.clone()).or_default().failed(why.clone());
            let why = Reason::new("MoveFailed", format!("{why}; tried again in {} s", wait.as_secs()));
            Ok((with_degraded(seen, why), Requeue::after(wait)))
        }
    }
}

/// VM `id` is not moving (any more).
pub(crate) fn done(inner: &Inner, id: &str) {
    if let Ok(mut m) = inner.moving.lock() {
        m.remove(id);
    }
}

/// The tries of one VM's move.
#[derive(Debug, Default)]
pub(crate) struct Tries {
    /// How many failed.
    failures: u32,
    /// The last one's error, and when the next may be made.
    last: Option<(String, Instant)>,
}

impl Tries {
    /// A try failed with `why`: how long until the next (doubling from
    /// 2 s, at most [`MAX_WAIT`]).
    fn failed(&mut self, why: String) -> Duration {
        self.failures = self.failures.saturating_add(1);
        let wait = Duration::from_secs(1u64 << self.failures.min(6)).min(MAX_WAIT);
        self.last = Some((why, Instant::now() + wait));
        wait
    }

    /// The last failure and how long until the next try, while it is not due.
    fn waiting(&self) -> Option<(String, Duration)> {
        let (why, at) = self.last.as_ref()?;
        let left = at.checked_duration_since(Instant::now()).filter(|d| !d.is_zero())?;
        Some((format!("{why}; tried again in {} s", left.as_secs().max(1)), left))
    }
}

/// `seen`, DEGRADED for `why`.
fn with_degraded(mut seen: VmObservation, why: Reason) -> VmObservation {
    seen.observation.degraded = Some(why);
    seen
}

fn poisoned() -> BackendError {
    BackendError::transient("moving a VM", "a lock was poisoned by a panic")
}

/// Removes VM `id` from every cluster but `home` (the one it moved from):
/// whether any still holds it.
pub(crate) async fn leave_others(inner: &Inner, id: &str, home: usize) -> Result<Option<Requeue>, BackendError> {
    let others: Vec<usize> = inner.holders(ObjectKind::VirtualMachine, id).filter(|&m| m != home).collect();
    let mut left = false;
    for m in others {
        left |= inner.vms[m].delete(id).await? == Cleanup::InProgress;
        tracing::info!(vm = %id, cluster = %inner.members[m].name, "removed from the cluster it moved from");
    }
    Ok(left.then(|| Requeue::after(LEAVING)))
}
