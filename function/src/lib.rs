//! # vmaas-function
//!
//! `function-vmaas`: a Crossplane composition function that renders the
//! vmaas model, through the same model crate as the server (its
//! `kubernetes` feature renders the objects), into the objects a KubeVirt
//! cluster with OVN-Kubernetes runs a VM with.
//!
//! - [`function`]: `RunFunction`: input, XR and observed state in; desired
//!   objects, readiness and XR status out.
//! - [`status`]: the XR status and the function's condition, in the shapes
//!   Crossplane accepts.
//! - [`xr`]: the function's input and XR specs, and how an XR becomes a
//!   machine spec plus rendering options for the shared model.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod function;
pub mod status;
pub mod xr;
