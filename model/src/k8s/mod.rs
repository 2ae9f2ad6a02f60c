//! The pure rendering of the model into Kubernetes objects (feature
//! `kubernetes`): what `function-vmaas` returns to Crossplane, and what a
//! KubeVirt backend applies.
//!
//! - [`crd`]: typed subsets of KubeVirt, CDI and OVN-K UDN objects.
//! - [`render`]: a VM or a private network into those objects.

pub mod crd;
pub mod render;
