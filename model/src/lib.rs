//! # vmaas-model
//!
//! The one model every vmaas front end shares: the fulfillment server, the
//! Terraform provider and the Crossplane function all validate and resolve a
//! VM with this crate, so a VM means the same thing everywhere.
//!
//! - [`kind`]: the kinds of object, each declared once (its variant and
//!   its descriptor: the one table a new kind is added to), and the
//!   [`Object`] of a kind kept as a spec and a status.
//! - [`object`]: what every kind shares on the wire: metadata, envelope, pages.
//! - [`template`]: templates as published, and [`Template`], their checked form,
//!   which validates a tenant's parameters and applies the defaults.
//! - [`spec`]: what a template publishes about the machine.
//! - [`machine`]: the [`MachineSpec`] a backend builds: boot source, CPU,
//!   memory, disks, NICs, GPUs, cloud-init, exposed ports, probe.
//! - [`hardware`]: the virtual hardware beyond those, as KubeVirt writes it:
//!   disk buses, NIC models, machine type, architecture, devices, grace period.
//! - [`kube_metadata`]: labels and annotations that travel to a VM's
//!   Kubernetes objects (a template's, and a tenant's under its own domain).
//! - [`scheduling`]: where a VM may run and what it holds there (node
//!   selectors, tolerations, affinity, dedicated CPUs, huge pages).
//! - [`nocloud`]: cloud-init's NoCloud seed of a VM (meta-data, user-data,
//!   network-config) and the checks of SSH keys and user data.
//! - [`image`]: OS images VMs boot from (the backend's public catalog).
//! - [`instance_type`]: named machine shapes (OSAC's `InstanceType`):
//!   cores, memory, GPUs, and a lifecycle administrators move them through.
//! - [`boot_shape`]: what a running guest keeps until it restarts (CPUs,
//!   memory, disk sizes), for the `RESTART_REQUIRED` condition.
//! - [`network`]: virtual networks (OSAC's `VirtualNetwork`).
//! - [`subnet`]: subnets of virtual networks (OSAC's `Subnet`).
//! - [`security_group`]: rules for NICs (OSAC's `SecurityGroup`).
//! - [`external_ip`]: external IP pools, external IPs and their attachments
//!   to VMs (OSAC's `ExternalIPPool`, `ExternalIP`, `ExternalIPAttachment`).
//! - [`load_balancer`]: load balancers over the VMs of a subnet (seed 001).
//! - [`nat_gateway`]: a network's outbound traffic from one external IP (OSAC's `NATGateway`).
//! - [`volume`]: volumes that outlive VMs and their attachments to VMs
//!   (seed 001's block storage).
//! - [`vm`]: virtual machines, the request shapes of the API, and
//!   [`vm::status`], the state machine from backend observations to status.
//! - [`checksum`]: the checksum an export comes with (SHA-256 or CRC-32), the client's choice.
//! - [`quantity`]: `4Gi` and `4096Mi`, equal in value, each kept as written.
//! - [`query`]: list `filter`s (a subset of CEL, as OSAC's clients send) and `order`s.
//! - [`value`]: parameter values, `{"value": ...}` or a `google.protobuf.Any`
//!   on the wire, typed once checked.
//! - [`validation`]: field-path errors, always all of them at once.
//! - `k8s` (feature `kubernetes`): the pure rendering into Kubernetes objects,
//!   and the reading of their status back.
//!
//! The crate does no I/O.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod api_json;
pub mod boot_shape;
pub mod catalog_item;
pub mod checksum;
pub mod external_ip;
pub mod hardware;
pub mod image;
pub mod instance_type;
#[cfg(feature = "kubernetes")]
pub mod k8s;
pub mod kind;
pub mod kube_metadata;
pub mod labels;
pub mod load_balancer;
pub mod machine;
pub mod mask;
pub mod nat_gateway;
pub mod network;
pub mod nocloud;
pub mod object;
pub mod profile;
pub mod quantity;
pub mod query;
pub mod reference;
pub mod scheduling;
pub mod security_group;
pub mod snapshot;
pub mod spec;
pub mod subnet;
pub mod template;
pub mod validation;
pub mod value;
pub mod vm;
pub mod volume;

pub use api_json::{ApiJson, object_json};
pub use catalog_item::{CatalogItemSpec, ComputeInstanceCatalogItem, FieldDefinition};
pub use external_ip::{
    ExternalIp, ExternalIpAttachment, ExternalIpAttachmentSpec, ExternalIpAttachmentState, ExternalIpAttachmentStatus, ExternalIpPool,
    ExternalIpSpec, ExternalIpState, ExternalIpStatus, PatchExternalIpAttachment,
};
pub use hardware::{DiskBus, Hardware, NicModel};
pub use instance_type::{
    InstanceType, InstanceTypeDeprecation, InstanceTypePatchSpec, InstanceTypeReference, InstanceTypeSpec, InstanceTypeState,
    InstanceTypeStatus, PatchInstanceType,
};
pub use kind::{DESCRIPTORS, Descriptor, Object, ObjectKind, QuotaUse, Reference};
pub use labels::Labels;
pub use load_balancer::{LoadBalancer, LoadBalancerSpec, LoadBalancerState, LoadBalancerStatus, PatchLoadBalancer, PortMapping};
pub use machine::{BootSource, CloudInit, Cpu, DEFAULT_IMAGE, Disk, DiskSource, MachineSpec, Nic, NicNetwork};
pub use nat_gateway::{NatGateway, NatGatewaySpec, NatGatewayState, NatGatewayStatus};
pub use network::{CreateVirtualNetwork, VirtualNetwork, VirtualNetworkSpec, VirtualNetworkState, VirtualNetworkStatus};
pub use object::{CreateObject, Envelope, Metadata, MetadataInput, Page};
pub use profile::{Firmware, GuestOsFamily, GuestProfile, Platform};
pub use quantity::{Quantity, QuantityError};
pub use security_group::{
    CreateSecurityGroup, PatchSecurityGroup, SecurityGroup, SecurityGroupSpec, SecurityGroupState, SecurityGroupStatus, SecurityRule,
};
pub use snapshot::{
    CloneOf, ComputeInstanceSnapshot, ComputeInstanceSnapshotSpec, ComputeInstanceSnapshotState, ComputeInstanceSnapshotStatus,
    RestoreRequest, SnapshotConsistency, SnapshotDisk,
};
pub use spec::{DataDisk, ExposedPort, Gpu, Probe, ProbeCheck, Protocol, ReadinessProbe, SpecDefaults};
pub use subnet::{CreateSubnet, Subnet, SubnetSpec, SubnetState, SubnetStatus};
pub use template::{ParameterDefinition, ParameterType, Resolved, SpecField, Template, VirtualMachineTemplate};
pub use validation::{FieldError, ValidationErrors};
pub use value::{ParameterValue, TypedValue};
pub use vm::status::{Desired, Observation, Phase, Reason, derive_status, initial_status};
pub use vm::{
    Condition, ConditionStatus, ConditionType, CreateVirtualMachine, NetworkAttachment, PatchVirtualMachine, Placement, PowerState,
    VirtualMachine, VirtualMachineSpec, VirtualMachineStatus, VmDisk, VmState,
};
pub use volume::{
    PatchVolume, Volume, VolumeAttachment, VolumeAttachmentSpec, VolumeAttachmentState, VolumeAttachmentStatus, VolumeSpec, VolumeState,
    VolumeStatus,
};
