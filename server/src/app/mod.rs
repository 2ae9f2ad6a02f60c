//! The application layer: what the server does, written once for every
//! front. REST handlers ([`crate::api`]) and the OSAC views call these plain
//! async functions with typed requests and get model types (or their JSON,
//! read from the store as it is) back. Only this layer reaches the store
//! and the backend; no handler calls another handler.
//!
//! - [`scope`]: whose objects a caller sees and names, and a create's name.
//! - [`listing`]: a list request, its filter and order, and the window the store reads.
//! - [`simple`]: what every kind's list, read, relabel and delete share.
//! - [`kind`]: a kind made by the shared create, patch and delete
//!   ([`resources`]: each kind's own part).
//! - [`vms`]: virtual machines: create, change, restart, delete.
//! - [`images`]: the images VMs boot (catalog and imported), their checks;
//!   [`catalog`]: the backend's catalog as last read.
//! - [`templates`]: the templates VMs are made from.

pub(crate) mod catalog;
pub(crate) mod compute_instances;
pub(crate) mod consoles;
pub(crate) mod disk_images;
pub(crate) mod events;
pub(crate) mod exports;
pub(crate) mod health;
pub(crate) mod image_imports;
pub(crate) mod images;
pub(crate) mod kind;
pub(crate) mod listing;
pub(crate) mod mask;
pub(crate) mod quotas;
pub(crate) mod resources;
pub(crate) mod scope;
pub(crate) mod simple;
pub(crate) mod templates;
pub(crate) mod vms;
