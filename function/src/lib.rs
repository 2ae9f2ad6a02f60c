//! # vmaas-function
//!
//! `function-vmaas`: a Crossplane composition function that renders the
//! vmaas model, through the same model crate as the server, into the objects
//! a KubeVirt cluster with OVN-Kubernetes runs a VM with.
//!
//! - [`crd`]: typed subsets of KubeVirt, CDI and OVN-K UDN objects.
//! - [`render`]: the pure rendering of a VM or a private network.
//! - [`function`]: `RunFunction`: input, XR and observed state in; desired
//!   objects, readiness and XR status out.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod crd;
pub mod function;
pub mod render;
