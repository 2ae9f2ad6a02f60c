//! What a volume driver is given and reports, and what a VM driver is
//! given and reports about the volumes on a VM.
//!
//! A volume is a disk file the volume driver makes (blank, or a
//! copy-on-write overlay of an image) and removes; the VM driver puts the
//! volumes its spec lists on the VM: in its command line at boot, by
//! hotplug while it runs, and takes away those no longer listed by a
//! hot-unplug the guest acknowledges.

use std::collections::BTreeMap;

use crate::driver::{Driver, Target};

/// The desired state of one volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeSpec {
    /// Its size in bytes; it only grows.
    pub size_bytes: u64,
    /// The catalog image it starts as, by name; none: blank.
    pub source_image: Option<String>,
    /// The imported image (its id) it starts as instead, when
    /// `source_image` names one rather than one of the catalog's.
    pub imported_image: Option<String>,
    /// The VM it is on now, if any (a driver may grow it in place).
    pub attached_to: Option<String>,
}

/// One volume as a driver sees it.
pub type VolumeTarget = Target<VolumeSpec>;

/// What a volume driver reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VolumeObservation {
    /// The disk exists with at least the size asked.
    Ready,
    /// Being made; the message says how far.
    Pending(String),
    /// Cannot be made as asked; the message says why.
    Failed(String),
}

/// The driver of volumes.
pub type VolumeDriver = dyn Driver<VolumeSpec, VolumeObservation>;

/// One volume a VM should have, resolved by the server.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct VolumeDisk {
    /// The volume's id.
    pub volume: String,
    /// The disk's serial in the guest (`vmaas_model::volume::disk_serial`).
    pub serial: String,
    /// Its size in bytes (a running guest is told when it grows).
    pub size_bytes: u64,
}

/// Where one volume is on a VM, as the VM driver sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiskPresence {
    /// The VM has it: the running guest has the disk, or a stopped VM
    /// gets it at its next start.
    Attached,
    /// Being unplugged: the guest has not let go of it yet.
    Detaching,
    /// It could not be put on the VM; the message says why.
    Failed(String),
}

/// The volumes on a VM, by volume id.
pub type VolumePresence = BTreeMap<String, DiskPresence>;
