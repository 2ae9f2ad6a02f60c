//! VMs: placed once (their status's cluster, else the cluster found holding
//! them, else [`crate::place::choose`]), the placement recorded in their
//! status before anything is made, then routed to their cluster's own
//! driver, whose observation gains the cluster's name. A VM that fits
//! nowhere yet waits (PROGRESSING, with the reason for each cluster); one no
//! cluster admits fails until it is changed.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tracing::info;
use vmaas_backend::{BackendError, Cleanup, CloneFrom, Demand, Driver, Requeue, Room, VmObservation, VmSpec, VmTarget};
use vmaas_model::{ObjectKind, Observation, Phase, PowerState, Reason};

use crate::Inner;
use crate::place::{Candidate, Choice, choose};

/// How long a placement counts against its cluster's room on its own,
/// before that cluster's view of its VMs has surely caught up.
const RECENT: Duration = Duration::from_secs(5);

/// How soon a VM that fits nowhere yet is looked at again.
const WAIT: Duration = Duration::from_secs(5);

/// A placement just made.
pub(crate) struct Recent {
    member: usize,
    id: String,
    demand: Demand,
    at: Instant,
}

/// The driver of VMs.
pub struct Vms(pub(crate) Arc<Inner>);

/// Where a VM cannot go yet, as it is reported.
struct Unplaced(Observation, Requeue);

impl Inner {
    /// The cluster of VM `t`, placing it if it has none.
    fn place(&self, t: &VmTarget) -> Result<Result<usize, Unplaced>, BackendError> {
        if let Some(name) = &t.spec.cluster {
            let m = self.index(name).ok_or_else(|| {
                BackendError::transient(
                    format!("VM {:?}", t.name),
                    format!("it runs on cluster {name:?}, which this server does not drive"),
                )
            })?;
            self.homes.lock().map_err(poisoned)?.insert(t.id.clone(), m);
            return Ok(Ok(m));
        }
        let mut homes = self.homes.lock().map_err(poisoned)?;
        if let Some(&m) = homes.get(&t.id) {
            return Ok(Ok(m));
        }
        let mut recent = self.recent.lock().map_err(poisoned)?;
        recent.retain(|r| r.at.elapsed() < RECENT);
        let demand = Room::demand(&t.spec.machine);
        if let Some(from) = &t.spec.clone_from {
            // A clone is made from its source's disks: on the source's cluster.
            let source = match from {
                CloneFrom::Vm(id) => homes.get(id).copied(),
                CloneFrom::Snapshot(id) => self.holders(ObjectKind::ComputeInstanceSnapshot, id).next(),
            };
            let Some(m) = source else {
                let why = Reason::new("Unplaced", "waiting for the clone's source to be on a cluster");
                return Ok(Err(Unplaced(Observation::new(Phase::Starting(why)), Requeue::after(WAIT))));
            };
            info!(vm = %t.id, cluster = %self.members[m].name, "placed beside its clone source");
            homes.insert(t.id.clone(), m);
            recent.push(Recent { member: m, id: t.id.clone(), demand, at: Instant::now() });
            return Ok(Ok(m));
        }
        Ok(match choose(&self.candidates(&recent), &t.spec.placement, &demand) {
            Choice::On(m) => {
                info!(vm = %t.id, cluster = %self.members[m].name, "placed");
                homes.insert(t.id.clone(), m);
                recent.push(Recent { member: m, id: t.id.clone(), demand, at: Instant::now() });
                Ok(m)
            }
            Choice::Wait(why) => Err(Unplaced(Observation::new(Phase::Starting(why)), Requeue::after(WAIT))),
            Choice::Refuse(why) => Err(Unplaced(Observation::new(Phase::Failed(why)), Requeue::AwaitChange)),
        })
    }

    /// Every cluster as placement sees it, the `recent` placements counted.
    fn candidates(&self, recent: &[Recent]) -> Vec<Candidate<'_>> {
        self.members
            .iter()
            .enumerate()
            .map(|(i, m)| Candidate {
                name: &m.name,
                labels: &m.labels,
                reachable: m.backend.reachable(),
                room: self.room_of(i).map(|mut room| {
                    recent.iter().filter(|r| r.member == i).for_each(|r| room.take(&r.demand));
                    room
                }),
            })
            .collect()
    }

    /// Where VM `t`, on cluster `from` that its placement no longer
    /// admits, moves to: the choice among the others, placed there (its
    /// room taken) when one is chosen.
    pub(crate) fn choose_move(&self, t: &VmTarget, from: usize) -> Result<Choice, BackendError> {
        let mut recent = self.recent.lock().map_err(poisoned)?;
        // Places taken long ago, and an earlier try of this move, count no more.
        recent.retain(|r| r.at.elapsed() < RECENT && r.id != t.id);
        let demand = Room::demand(&t.spec.machine);
        let mut candidates = self.candidates(&recent);
        candidates[from].reachable = false;
        let choice = choose(&candidates, &t.spec.placement, &demand);
        if let Choice::On(m) = choice {
            recent.push(Recent { member: m, id: t.id.clone(), demand, at: Instant::now() });
        }
        Ok(choice)
    }

    /// VM `id` is now on cluster `m` (moved there).
    pub(crate) fn moved(&self, id: &str, m: usize) {
        if let Ok(mut h) = self.homes.lock() {
            h.insert(id.to_owned(), m);
        }
    }

    /// What cluster `m` has: as it reports it, else (this host) its
    /// capacity less what the VMs placed on it ask.
    pub(crate) fn room_of(&self, m: usize) -> Option<Room> {
        let b = &self.members[m].backend;
        b.room().or_else(|| {
            let c = b.capacity()?;
            let mut room = Room {
                cpu_millis: vmaas_backend::Usage { total: u64::from(c.cpus) * 1000, used: 0 },
                memory_bytes: vmaas_backend::Usage { total: c.memory_bytes, used: 0 },
                devices: Default::default(),
            };
            let demands = self.demands.lock().ok()?;
            demands.values().filter(|(on, _)| *on == m).for_each(|(_, d)| room.take(d));
            Some(room)
        })
    }

    /// Notes what VM `id` on cluster `m` asks.
    fn note_demand(&self, id: &str, m: usize, d: Demand) {
        if let Ok(mut demands) = self.demands.lock() {
            demands.insert(id.to_owned(), (m, d));
        }
    }

    /// Forgets VM `id`'s placement.
    fn unplace(&self, id: &str) {
        if let Ok(mut d) = self.demands.lock() {
            d.remove(id);
        }
        if let Ok(mut h) = self.homes.lock() {
            h.remove(id);
        }
        if let Ok(mut r) = self.recent.lock() {
            r.retain(|r| r.id != id);
        }
    }
}

/// VM just placed on cluster `name`: recorded before it is made there.
fn placed(name: &str) -> (VmObservation, Requeue) {
    let why = vmaas_model::Reason::new("Placed", format!("placed on cluster {name}; it is made there next"));
    let mut observation = Observation::new(Phase::Starting(why));
    observation.cluster = Some(name.to_owned());
    (VmObservation { observation, acted: Default::default(), volumes: Default::default() }, Requeue::after(Duration::ZERO))
}

fn poisoned<T>(_: std::sync::PoisonError<T>) -> BackendError {
    BackendError::transient("placing a VM", "a lock was poisoned by a panic")
}

#[async_trait]
impl Driver<VmSpec, VmObservation> for Vms {
    async fn ensure(&self, t: &VmTarget) -> Result<(VmObservation, Requeue), BackendError> {
        let m = match self.0.place(t)? {
            Ok(m) => m,
            // Never placed: nothing was acted on, and no volume is on it.
            Err(Unplaced(observation, next)) => {
                return Ok((VmObservation { observation, acted: Default::default(), volumes: Default::default() }, next));
            }
        };
        if t.spec.cluster.is_none() {
            // The placement is recorded (the VM's status) before anything is
            // made for it, so no VM is ever made on a cluster its status does
            // not name (one not listed at a restart could hold it unseen).
            return Ok(placed(&self.0.members[m].name));
        }
        if t.spec.power == PowerState::Stopped && !self.0.admits(t, m) {
            return crate::moving::step(&self.0, t, m).await;
        }
        crate::moving::done(&self.0, &t.id);
        self.0.note_demand(&t.id, m, Room::demand(&t.spec.machine));
        crate::subnet::make_on(&self.0, m, &t.spec.attachments).await?;
        let (mut seen, next) = self.0.vms[m].ensure(t).await?;
        seen.observation.cluster = Some(self.0.members[m].name.clone());
        let next = crate::moving::leave_others(&self.0, &t.id, m).await?.unwrap_or(next);
        Ok((seen, next))
    }

    async fn delete(&self, id: &str) -> Result<Cleanup, BackendError> {
        let Some(m) = self.0.home(id).or_else(|| self.0.holders(vmaas_model::ObjectKind::VirtualMachine, id).next()) else {
            // A cluster not listed yet may hold it.
            if let Some(unlisted) = self.0.members.iter().find(|m| !m.backend.listed()) {
                let why = format!("cluster {:?} has not been listed since the server started, and may hold it", unlisted.name);
                return Err(BackendError::transient(format!("deleting VM {id}"), why));
            }
            // Never placed: nothing to remove.
            return Ok(Cleanup::Done);
        };
        let mut done = self.0.vms[m].delete(id).await?;
        // A VM just moved may still be on the cluster it left.
        if crate::moving::leave_others(&self.0, id, m).await?.is_some() {
            done = Cleanup::InProgress;
        }
        if done == Cleanup::Done {
            self.0.unplace(id);
            crate::moving::done(&self.0, id);
        }
        Ok(done)
    }

    async fn retain(&self, known: &[String]) -> Result<(), BackendError> {
        let mut first = None;
        for d in &self.0.vms {
            if let Err(e) = d.retain(known).await {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }
}

/// The consoles of VMs, each on its cluster's.
pub struct Consoles(pub(crate) Arc<Inner>, pub(crate) Vec<Option<Arc<dyn vmaas_backend::Consoles>>>);

impl Consoles {
    fn of(&self, id: &str) -> Result<&Arc<dyn vmaas_backend::Consoles>, BackendError> {
        let m = self.0.home(id).ok_or_else(|| BackendError::unsupported("opening the console", "the VM is on no cluster yet"))?;
        self.1[m].as_ref().ok_or_else(|| {
            BackendError::unsupported("opening the console", format!("cluster {:?} has no serial consoles", self.0.members[m].name))
        })
    }
}

#[async_trait]
impl vmaas_backend::Consoles for Consoles {
    async fn open(&self, id: &str) -> Result<vmaas_backend::Console, BackendError> {
        self.of(id)?.open(id).await
    }

    async fn log(&self, id: &str) -> Result<Vec<u8>, BackendError> {
        self.of(id)?.log(id).await
    }

    async fn display(&self, id: &str) -> Result<vmaas_backend::Display, BackendError> {
        self.of(id)?.display(id).await
    }
}
