//! What a snapshot driver is given and reports.
//!
//! A snapshot is every disk of one VM at one instant: the machine's disks
//! and the volumes on it. The driver takes it once (at the same instant for
//! every disk of a running guest, without stopping it), reports it READY
//! with what it holds, and removes it when it is deleted. A VM is restored
//! from one through the VM driver ([`crate::vm::VmSpec::restore_from`]).

use vmaas_model::SnapshotDisk;
use vmaas_model::snapshot::SnapshotConsistency;

use crate::driver::{Driver, Target};
use crate::volume::VolumeDisk;

/// The desired state of one snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotSpec {
    /// The VM whose disks it holds, by id.
    pub vm: String,
    /// The VM's own disks (its machine's).
    pub disks: Vec<vmaas_model::Disk>,
    /// The volumes on the VM now (they are in the snapshot with its own disks).
    pub volumes: Vec<VolumeDisk>,
}

/// One snapshot as a driver sees it.
pub type SnapshotTarget = Target<SnapshotSpec>;

/// A snapshot as taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    /// Whether the guest was running.
    pub online: bool,
    /// How consistent its disks are.
    pub consistency: SnapshotConsistency,
    /// Its disks.
    pub disks: Vec<SnapshotDisk>,
    /// When it was taken.
    pub taken_at: chrono::DateTime<chrono::Utc>,
}

impl Taken {
    /// The bytes it holds, all disks together.
    pub fn size_bytes(&self) -> u64 {
        self.disks.iter().map(|d| d.size_bytes).fold(0, u64::saturating_add)
    }
}

/// What a snapshot driver reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SnapshotObservation {
    /// Taken.
    Ready(Taken),
    /// Being taken, or waiting for its VM; the message says why.
    Pending(String),
    /// Cannot be taken; the message says why.
    Failed(String),
}

/// The driver of snapshots.
pub type SnapshotDriver = dyn Driver<SnapshotSpec, SnapshotObservation>;
