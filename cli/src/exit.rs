//! The CLI's exit codes, for scripts and CI jobs:
//!
//! | code | meaning |
//! |---|---|
//! | 0 | done |
//! | 1 | failed: the server refused, a VM ended FAILED, the server cannot be reached, … |
//! | 2 | usage: an unknown flag or a bad value (clap's own errors too) |
//! | 3 | a wait (`--wait`, `vm wait`, an import or volume wait) ran out of time |

/// Anything else that went wrong.
pub const FAILED: i32 = 1;
/// The command line is wrong.
pub const USAGE: i32 = 2;
/// A wait ran out of time.
pub const TIMED_OUT: i32 = 3;

/// A command line that cannot be run, found after parsing.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Usage(pub String);

/// A wait of the CLI's own that ran out of time.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TimedOut(pub String);

/// The exit code of `e`.
pub fn code(e: &anyhow::Error) -> i32 {
    for cause in e.chain() {
        if cause.is::<Usage>() || matches!(cause.downcast_ref::<vmaas_client::Error>(), Some(vmaas_client::Error::Usage(_))) {
            return USAGE;
        }
        if cause.is::<TimedOut>() || matches!(cause.downcast_ref::<vmaas_client::Error>(), Some(vmaas_client::Error::Timeout { .. })) {
            return TIMED_OUT;
        }
    }
    FAILED
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes() {
        assert_eq!(code(&anyhow::Error::new(Usage("--param needs --template".into()))), USAGE);
        assert_eq!(code(&anyhow::Error::new(TimedOut("gave up".into())).context("importing")), TIMED_OUT);
        let waited = vmaas_client::Error::Timeout { what: "vm".into(), waited: std::time::Duration::from_secs(1), last: "-".into() };
        assert_eq!(code(&anyhow::Error::new(waited)), TIMED_OUT);
        assert_eq!(code(&anyhow::anyhow!("refused")), FAILED);
    }
}
