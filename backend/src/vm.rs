//! What a VM driver is given and what it reports.

use vmaas_model::{MachineSpec, Observation, PowerState};

use crate::driver::{Driver, Target};

/// Requests that are acted on once each, by generation: a request whose
/// generation is above the one the driver has acted on is pending.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Requests {
    /// Restart generation: each restart request raises it by one.
    #[serde(default)]
    pub restart: u64,
}

/// The desired state of one VM.
#[derive(Debug, Clone, PartialEq)]
pub struct VmSpec {
    /// Run or stay off.
    pub power: PowerState,
    /// The machine to build.
    pub machine: MachineSpec,
    /// One-off requests, by generation.
    pub requests: Requests,
}

/// One VM as a driver sees it.
pub type VmTarget = Target<VmSpec>;

/// What a VM driver reports.
#[derive(Debug, Clone, PartialEq)]
pub struct VmObservation {
    /// Where the VM is.
    pub observation: Observation,
    /// The request generations acted on so far.
    pub acted: Requests,
}

/// The driver of virtual machines.
pub type VmDriver = dyn Driver<VmSpec, VmObservation>;
