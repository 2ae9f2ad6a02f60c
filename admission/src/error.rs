//! Why admission refuses: each variant says what the API answers.

use vmaas_model::ValidationErrors;
use vmaas_store::StoreError;

/// A refusal of admission, or a failure to decide.
#[derive(Debug, thiserror::Error)]
pub enum AdmissionError {
    /// What is asked for is not there to give (a quota, the host's room):
    /// RESOURCE_EXHAUSTED, naming it.
    #[error("{field}: {message}")]
    Exhausted {
        /// What ran out, e.g. `quota.cores`, `memory`.
        field: String,
        /// How much was asked, held and allowed.
        message: String,
    },
    /// Every one of something is taken (the addresses of a pool): a
    /// conflict with what holds them, RESOURCE_EXHAUSTED.
    #[error("{0}")]
    NoneFree(String),
    /// What is asked for is held by another object (a volume by its
    /// attachment): FAILED_PRECONDITION, naming the holder.
    #[error("{0}")]
    Held(String),
    /// The request asks for what cannot be: each field and why.
    #[error("{0}")]
    Invalid(ValidationErrors),
    /// Something stored could not be read as it was written.
    #[error("stored {what} is unreadable: {reason}")]
    Corrupt {
        /// What was read.
        what: String,
        /// Why it could not be.
        reason: String,
    },
    /// The store failed (or was unavailable).
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl AdmissionError {
    /// RESOURCE_EXHAUSTED for `field`.
    pub fn exhausted(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Exhausted { field: field.into(), message: message.into() }
    }
}
