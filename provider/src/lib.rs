//! # vmaas-provider
//!
//! `terraform-provider-vmaas`: a Terraform/OpenTofu provider speaking plugin
//! protocol 6 over gRPC (tonic 0.14), with go-plugin's handshake and AutoMTLS.
//!
//! - [`plugin`]: the go-plugin side: cookie, AutoMTLS, handshake.
//! - [`provider`]: configuration, and every call dispatched by type name.
//! - [`resource`]: the `Resource` and `DataSource` traits.
//! - [`registry`]: every type by name, and the provider's schema.
//! - [`vm_resource`]: the `vmaas_virtual_machine` resource, over its typed
//!   plan and state ([`vm_model`]).
//! - [`network_resource`]: the `vmaas_virtual_network` resource.
//! - [`object_resource`] over [`kinds`] (each attribute a [`field::Field`]): subnets, security groups, external
//!   IPs, their attachments, load balancers, volumes and their attachments,
//!   each a resource and a data source from one description.
//! - [`template_resource`]: `vmaas_template`, over its typed plan and state
//!   ([`template_model`]: templates as Terraform values and back).
//! - [`template_data`]: the `vmaas_template` and `vmaas_templates` data sources.
//! - [`image_data`]: the `vmaas_images` data source.
//! - [`volume_data`]: the `vmaas_volumes` data source.
//! - [`schema`]: schema building blocks; [`timeouts`]: the `timeouts`
//!   block of every resource that waits.
//! - [`diag`]: diagnostics and attribute paths.
//! - [`value`]: cty values as msgpack.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod diag;
pub mod field;
pub mod image_data;
pub mod kinds;
pub mod network_resource;
pub mod object_resource;
pub mod plugin;
pub mod provider;
pub mod registry;
pub mod resource;
pub mod schema;
pub mod template_data;
pub mod template_model;
pub mod template_resource;
pub mod timeouts;
pub mod value;
pub mod vm_disks;
pub mod vm_model;
pub mod vm_resource;
pub mod vm_state;
pub mod volume_data;
pub mod write_only;

/// Generated protocol types and services.
#[allow(missing_docs, clippy::all)]
pub mod proto {
    tonic::include_proto!("tfplugin6");
}

/// go-plugin's controller service.
#[allow(missing_docs, clippy::all)]
pub mod controller {
    tonic::include_proto!("plugin");
}
