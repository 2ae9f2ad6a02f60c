//! Backend failures. Failures the tenant must act on are not errors but
//! observations in `Phase::Failed`; a [`BackendError`] is a failure of the
//! backend itself, and its [`ErrorKind`] says whether to retry.

use std::error::Error as StdError;

/// What kind of failure, and so what the reconciler does with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// May pass on its own (an I/O error, a busy API): retried with backoff.
    Transient,
    /// The request cannot be built as it is: reported as FAILED until the spec changes.
    Invalid,
    /// The backend does not do this at all (a kind or a capability it lacks).
    Unsupported,
}

impl ErrorKind {
    /// `transient`, `invalid` or `unsupported`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Transient => "transient",
            Self::Invalid => "invalid",
            Self::Unsupported => "unsupported",
        }
    }
}

/// A failure while doing `context`, with its cause.
#[derive(Debug, thiserror::Error)]
#[error("{context}: {source}")]
pub struct BackendError {
    /// What kind of failure.
    pub kind: ErrorKind,
    /// What was being done, e.g. `creating the disk overlay`.
    pub context: String,
    /// The cause.
    #[source]
    pub source: Box<dyn StdError + Send + Sync + 'static>,
}

impl BackendError {
    /// A failure of `kind` while doing `context`.
    pub fn new(kind: ErrorKind, context: impl Into<String>, source: impl Into<Box<dyn StdError + Send + Sync + 'static>>) -> Self {
        Self { kind, context: context.into(), source: source.into() }
    }

    /// A failure that may pass on its own.
    pub fn transient(context: impl Into<String>, source: impl Into<Box<dyn StdError + Send + Sync + 'static>>) -> Self {
        Self::new(ErrorKind::Transient, context, source)
    }

    /// A request that cannot be built as it is.
    pub fn invalid(context: impl Into<String>, source: impl Into<Box<dyn StdError + Send + Sync + 'static>>) -> Self {
        Self::new(ErrorKind::Invalid, context, source)
    }

    /// Something this backend does not do.
    pub fn unsupported(context: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unsupported, context, message.into())
    }

    /// Whether retrying may help.
    pub fn is_transient(&self) -> bool {
        self.kind == ErrorKind::Transient
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_its_source_and_kind() {
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied");
        let e = BackendError::transient("creating /x", io);
        assert!(e.is_transient());
        assert_eq!(e.to_string(), "creating /x: denied");
        assert!(e.source.downcast_ref::<std::io::Error>().is_some());
        assert_eq!(BackendError::unsupported("opening the console", "no console").kind, ErrorKind::Unsupported);
    }
}
