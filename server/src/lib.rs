//! # vmaas-server
//!
//! The fulfillment server: a multi-tenant REST/JSON API for templates and
//! virtual machines, a durable store, and a reconciler that drives a backend.
//!
//! - [`app`]: configuration and start-up.
//! - [`api`]: the HTTP routes, the OpenAPI document, health and metrics.
//! - [`auth`]: bearer tokens (JWT) with `tenant` and `role` claims.
//! - [`store`]: SQLite or PostgreSQL, one schema, migrated at start-up.
//! - [`reconciler`]: the level-triggered loop from spec to status.
//! - [`none_backend`]: the API-only backend (the trait is in `vmaas-backend`,
//!   the real backends in their own crates).
//! - [`error`]: the API's error shape; [`metrics`]: Prometheus metrics.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod api;
pub mod app;
pub mod auth;
pub mod error;
pub mod metrics;
pub mod none_backend;
pub mod reconciler;
pub mod store;
