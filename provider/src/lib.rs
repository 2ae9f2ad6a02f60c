//! # vmaas-provider
//!
//! `terraform-provider-vmaas`: a Terraform/OpenTofu provider speaking plugin
//! protocol 6 over gRPC (tonic 0.14), with go-plugin's handshake and AutoMTLS.
//!
//! - [`plugin`]: the go-plugin side: cookie, AutoMTLS, handshake.
//! - [`schema`]: resource and data source schemas.
//! - [`provider`]: planning and applying, through [`vmaas_client`].
//! - [`template_resource`]: `vmaas_template`, templates as Terraform values.
//! - [`value`]: cty values as msgpack.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod plugin;
pub mod provider;
pub mod schema;
pub mod template_resource;
pub mod value;

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
