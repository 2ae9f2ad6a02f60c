//! What the database's errors mean, in one place: the refusals a write
//! meets (a taken name, a missing reference), a database not ready yet at
//! start, and one that does not answer now (a 503 for the request, not a
//! bug). The rest of vmaas reads these as [`StoreError`]s and never looks
//! at a database's error codes itself.

use super::StoreError;

/// Maps the database's refusals: a taken name, a missing reference.
pub(super) fn refused(e: sqlx::Error, taken: impl FnOnce() -> String, missing: impl FnOnce() -> String) -> StoreError {
    match &e {
        sqlx::Error::Database(d) if d.is_unique_violation() => StoreError::AlreadyExists(taken()),
        sqlx::Error::Database(d) if d.is_foreign_key_violation() || d.message().contains("FOREIGN KEY") => {
            StoreError::MissingReference(missing())
        }
        _ => e.into(),
    }
}

/// Whether `e` says the database cannot take a connection yet (it may
/// later), rather than that it never will (a bad URL, a refused password).
pub(super) fn not_ready(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::PoolTimedOut | sqlx::Error::Io(_) => true,
        // too_many_connections, cannot_connect_now (starting up or shutting down).
        sqlx::Error::Database(d) => matches!(d.code().as_deref(), Some("53300" | "57P03")),
        _ => false,
    }
}

impl StoreError {
    /// Whether the database cannot be reached now (down, restarting, the
    /// connection lost, no connection free in time, a lock not granted in
    /// time), rather than the request or the data being wrong: the same
    /// request may go through later.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, StoreError::Database(e) if unavailable(e))
    }
}

/// [`StoreError::is_unavailable`] of a database error.
fn unavailable(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Tls(_) | sqlx::Error::WorkerCrashed => true,
        // Connection exceptions (08), operator intervention such as a
        // shutdown (57), a lock not granted within lock_timeout (55P03), and a
        // transaction ended for idling (25P03: its replica stalled in an admission).
        sqlx::Error::Database(d) => {
            d.code().is_some_and(|c| c.starts_with("08") || c.starts_with("57") || c == "55P03" || c == "25P03" || sqlite_busy(&c))
        }
        _ => false,
    }
}

/// Whether SQLite's (extended) result code `code` is BUSY or LOCKED: the
/// file stayed locked past the busy timeout (a sync held up by a slow
/// disk), and the same write goes through once it is free. PostgreSQL's
/// codes are five characters; SQLite's are numbers of at most four digits.
fn sqlite_busy(code: &str) -> bool {
    code.len() < 5 && code.parse::<u32>().is_ok_and(|n| matches!(n & 0xff, 5 | 6))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_database_not_ready_yet_is_waited_for() {
        assert!(not_ready(&sqlx::Error::PoolTimedOut));
        assert!(not_ready(&sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionRefused))));
        assert!(!not_ready(&sqlx::Error::Configuration("bad URL".into())));
        assert!(!not_ready(&sqlx::Error::RowNotFound));
    }

    #[test]
    fn sqlite_busy_and_locked_are_unavailable_and_postgres_codes_are_not_taken_for_them() {
        assert!(sqlite_busy("5") && sqlite_busy("517") && sqlite_busy("6") && sqlite_busy("262"));
        assert!(!sqlite_busy("19") && !sqlite_busy("2067") && !sqlite_busy("23505") && !sqlite_busy("55P03"));
    }

    #[test]
    fn a_lost_connection_is_unavailable_and_a_wrong_request_is_not() {
        let lost = StoreError::Database(sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionReset)));
        assert!(lost.is_unavailable());
        assert!(StoreError::Database(sqlx::Error::PoolTimedOut).is_unavailable());
        assert!(!StoreError::Database(sqlx::Error::RowNotFound).is_unavailable());
        assert!(!StoreError::AlreadyExists("taken".into()).is_unavailable());
    }
}
