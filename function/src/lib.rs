//! # vmaas-function
//!
//! `function-vmaas`: a Crossplane composition function that renders the
//! vmaas model, through the same model crate as the server (its
//! `kubernetes` feature renders the objects), into the objects a KubeVirt
//! cluster with OVN-Kubernetes runs a VM with.
//!
//! - [`function`]: `RunFunction`: decodes the XR and dispatches by kind.
//! - `call`: what the kinds' handlers share: the call, putting objects,
//!   failing, asking for the XRs of other kinds.
//! - `vm`, `network`, `balancer`, `volume`: what each kind of XR composes and reports.
//! - [`usage`]: the `ClusterUsage`s that keep a network while a VM or a volume
//!   is on it, and a volume while a VM uses it.
//! - [`render`]: an XR into Kubernetes objects, in the XR's scope.
//! - [`shape`]: a claim's instance type, from the input's catalog.
//! - [`status`]: the XR status and the function's conditions, in the
//!   shapes Crossplane accepts.
//! - [`xr`]: the function's input and the XR specs.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod balancer;
mod call;
pub mod function;
mod network;
pub mod render;
pub mod shape;
pub mod status;
pub mod usage;
mod vm;
mod volume;
pub mod xr;
