//! A condition's reason: a CamelCase word and a message for humans.

/// A CamelCase reason and a human message, as conditions carry them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reason {
    /// Machine-readable, e.g. `Booting`, `NoGPUAvailable`.
    pub reason: String,
    /// For humans.
    pub message: String,
}

impl Reason {
    /// A reason with a message.
    pub fn new(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self { reason: reason.into(), message: message.into() }
    }
}
