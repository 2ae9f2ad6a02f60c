//! # vmaas-server
//!
//! The fulfillment server: a multi-tenant REST/JSON API for templates and
//! virtual machines, a durable store, and a reconciler that drives a backend.
//!
//! - [`startup`]: configuration and start-up; [`serve`]: the HTTP loop and its limits;
//!   [`tls`]: its certificates, reloaded when they change; [`flags`]: the
//!   command-line flags of TLS.
//! - [`app`]: the application layer: what every operation does, once, for
//!   every front (typed requests in, model types out); only it, the
//!   reconciler and the background tasks reach the store and the backend.
//! - [`api`]: the HTTP routes over [`app`], the OpenAPI document, health and
//!   metrics; [`decode`]: JSON into typed requests, naming the bad field;
//!   [`web`]: the web page at `/`.
//! - [`grpc`]: OSAC's gRPC services on the same port: the VM services typed
//!   over [`app`], the others through the REST routes.
//! - [`auth`]: bearer tokens (JWT) with `tenant` and `role` claims; [`oidc`]:
//!   those of an organisation's identity provider; [`seal`]: the secrets
//!   tenants give, sealed with a key derived from the same secret.
//! - [`store`]: SQLite or PostgreSQL, one schema, migrated at start-up.
//! - [`reconciler`]: the level-triggered loop from spec to status.
//! - [`none_backend`]: the API-only backend (the trait is in `vmaas-backend`,
//!   the real backends in their own crates).
//! - [`identity`]: the store's identity, checked against the host state.
//! - [`state`]: what every handler reaches ([`state::AppState`]), and
//!   admission: checks and the write they allow as one step, across
//!   replicas; the checks are the `vmaas-admission` crate's ([`capacity`]:
//!   what VMs ask for against what the host can give; [`quota`]: what a
//!   tenant may hold; [`pools`]: external IP pools; addresses on subnets).
//! - [`gc`]: what the host holds that no stored object owns.
//! - [`prune`]: imported images nothing uses, removed safely.
//! - [`events`]: the event log's fan-out to watchers.
//! - [`expiry`]: ephemeral VMs deleted when they expire.
//! - [`watches`]: event streams under limits of their own;
//!   [`export_slots`]: each tenant's disk exports under way; [`rate`]: each
//!   tenant's request rate.
//! - [`error`]: the API's error shape; [`metrics`]: Prometheus metrics
//!   ([`process_metrics`]: the standard `process_*` ones);
//!   [`audit`]: the audit log of mutating requests.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod api;
pub mod app;
pub mod audit;
pub mod auth;
pub mod caller;
pub mod clusters;
pub mod decode;
pub mod error;
pub mod events;
pub mod expiry;
pub mod export_slots;
pub mod flags;
pub mod gc;
pub mod grpc;
pub mod identity;
pub mod kubevirt_flags;
pub mod metrics;
pub mod none_backend;
pub mod oidc;
pub mod process_metrics;
pub mod prune;
pub mod rate;
pub mod reconciler;
pub mod seal;
pub mod serve;
pub mod startup;
pub mod state;
pub use vmaas_admission::{capacity, pools, quota};
pub use vmaas_store as store;
pub mod tls;
pub mod watches;
pub mod web;
