//! Kubernetes (feature `kubernetes`): what `function-vmaas` returns to
//! Crossplane, and what a KubeVirt backend applies and watches.
//!
//! - [`crd`]: typed subsets of KubeVirt, CDI and OVN-K UDN objects.
//! - [`render`]: a machine spec plus plain options into those objects;
//!   [`options`] what it takes besides the machine, [`devices`] the disks,
//!   interfaces, CPU and other devices, [`cloud_init`] the user data.
//! - [`observe`]: their reported status back into an observation.
//! - [`names`]: names of rendered objects that always fit.
//! - [`platform`]: a guest profile as KubeVirt's firmware, features, clock and TPM.
//! - [`policy`]: security groups as NetworkPolicies.
//! - [`balancer`]: a load balancer as a Service over its VMs' launcher pods.
//! - [`volume`]: a volume as a DataVolume of its own, hotplugged into VMs.
//! - [`snapshot`], [`restore`], [`clone`], [`export`]: VirtualMachineSnapshots, -Restores, -Clones and -Exports.

pub mod balancer;
pub mod clone;
pub mod cloud_init;
pub mod crd;
pub mod devices;
pub mod export;
pub mod names;
pub mod observe;
pub mod options;
pub mod platform;
pub mod policy;
pub mod render;
pub mod restore;
pub mod snapshot;
pub mod volume;
