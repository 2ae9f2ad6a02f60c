//! # vmaas-admission
//!
//! The control layer between the API and the store: what a create or a
//! change that takes something must pass before it is stored, and the
//! values it is given (a NIC's address). The API depends on it and it on the
//! store, never the other way: it knows nothing of HTTP or gRPC, and
//! answers with its own [`AdmissionError`], which the API turns into its
//! answer. The checks run inside an admission (the server's
//! `AppState::admit`: one at a time per process, and across replicas on
//! PostgreSQL a transaction holding an advisory lock), reading the store
//! through that admission's transaction, so what they saw and what is then
//! written commit together.
//!
//! - [`quota`]: per-tenant limits and their check.
//! - [`capacity`]: what the host can give, with overcommit.
//! - [`pools`]: external IP pools and their free addresses.
//! - [`attach`]: a VM's NICs on subnets: references and addresses.
//! - [`volumes`]: a volume's one attachment.
//! - [`images`]: the imported image a VM boots, made on demand from a URL.
//! - [`error`]: why admission refuses.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod attach;
pub mod capacity;
pub mod error;
pub mod images;
pub mod pools;
pub mod quota;
pub mod volumes;

pub use error::AdmissionError;
