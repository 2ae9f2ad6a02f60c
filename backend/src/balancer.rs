//! What a load balancer driver is given and what it reports.

use std::net::Ipv4Addr;

use vmaas_model::load_balancer::LbProtocol;

use crate::driver::{Driver, Target};

/// One port of a load balancer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mapping {
    /// TCP or UDP.
    pub protocol: LbProtocol,
    /// The port on the load balancer's address.
    pub external_port: u16,
    /// The port on each target.
    pub internal_port: u16,
}

/// The desired state of one load balancer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BalancerSpec {
    /// The address it answers on (allocated by the server).
    pub address: Ipv4Addr,
    /// Its ports.
    pub mappings: Vec<Mapping>,
    /// The ids of the VMs behind it.
    pub targets: Vec<String>,
    /// The subnet (its id) its targets are on.
    pub subnet: String,
}

/// One load balancer as a driver sees it.
pub type BalancerTarget = Target<BalancerSpec>;

/// Where a load balancer is, as its driver sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BalancerObservation {
    /// `None` when it answers on every port; else why not.
    pub problem: Option<BalancerProblem>,
    /// The targets that pass their probe now, in the order of the spec.
    pub healthy: Vec<String>,
}

/// Why a load balancer does not answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BalancerProblem {
    /// Being set up (e.g. its address is still held elsewhere).
    Pending(String),
    /// Cannot run as it is.
    Failed(String),
}

/// The driver of load balancers.
pub type BalancerDriver = dyn Driver<BalancerSpec, BalancerObservation>;
