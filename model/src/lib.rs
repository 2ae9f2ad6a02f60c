//! # vmaas-model
//!
//! The one model every vmaas front end shares: the fulfillment server, the
//! Terraform provider and the Crossplane function all validate and resolve a
//! VM with this crate, so a VM means the same thing everywhere.
//!
//! - [`quantity`]: `4Gi` and `4096Mi`, equal in value, each kept as written.
//! - [`value`]: parameter values, `{"value": ...}` on the wire, typed once checked.
//! - [`template`]: templates as published, and [`Template`], their checked form,
//!   which validates a tenant's parameters and applies the defaults.
//! - [`spec`]: the machine a template describes, down to the [`ResolvedSpec`]
//!   a backend builds.
//! - [`vm`]: virtual machines and the request shapes of the API.
//! - [`status`]: the state machine from backend observations to VM status.
//! - [`validation`]: field-path errors, always all of them at once.
//! - `k8s` (feature `kubernetes`): the pure rendering into Kubernetes objects.
//!
//! The crate does no I/O.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "kubernetes")]
pub mod k8s;
pub mod quantity;
pub mod spec;
pub mod status;
pub mod template;
pub mod validation;
pub mod value;
pub mod vm;

pub use quantity::{Quantity, QuantityError};
pub use spec::{ExposedPort, Gpu, Probe, ProbeCheck, Protocol, ReadinessProbe, ResolvedSpec, SpecDefaults};
pub use status::{Desired, Observation, Phase, Reason, derive_status, initial_status};
pub use template::{ParameterDefinition, ParameterType, Resolved, SpecField, Template, VirtualMachineTemplate};
pub use validation::{FieldError, ValidationErrors};
pub use value::{ParameterValue, TypedValue};
pub use vm::{
    Condition, ConditionStatus, ConditionType, CreateVirtualMachine, Envelope, Metadata, Page, PatchVirtualMachine, PowerState,
    VirtualMachine, VirtualMachineSpec, VirtualMachineStatus, VmState,
};
