//! The connection pool: its size and session settings per database, and a
//! first connection waited for, so a server started before its database
//! takes connections (a PostgreSQL still starting, or full) waits for it
//! rather than exiting.

use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use sqlx::AnyPool;
use sqlx::any::AnyPoolOptions;
use tracing::warn;

use super::Dialect;
use super::db_errors::not_ready;

/// How long a request waits for a database connection; past it the
/// database counts as unavailable (503), not as broken.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a starting server waits for its database to take a first
/// connection before it gives up.
const STARTUP_WAIT: Duration = Duration::from_secs(30);

/// How long a PostgreSQL statement waits for a lock another session holds.
const LOCK_TIMEOUT: &str = "SET lock_timeout = '5s'";

/// How long a PostgreSQL session may sit in a transaction doing nothing
/// before the server ends it (and its locks with it).
const IDLE_IN_TRANSACTION_TIMEOUT: &str = "SET idle_in_transaction_session_timeout = '1s'";

/// The pool of `url`, its first connection made (tried again, backing off,
/// for up to [`STARTUP_WAIT`] while the database cannot take it yet).
pub(crate) async fn pool(url: &str, dialect: Dialect) -> Result<AnyPool, sqlx::Error> {
    let options = options(dialect);
    let backoff = ExponentialBuilder::default()
        .with_jitter()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(Duration::from_secs(2))
        .without_max_times()
        .with_total_delay(Some(STARTUP_WAIT));
    (|| options.clone().connect(url))
        .retry(backoff)
        .sleep(tokio::time::sleep)
        .when(not_ready)
        .notify(|e, wait| warn!(error = %e, ?wait, "the database takes no connection yet; trying again"))
        .await
}

/// The pool's size and every new connection's session settings.
fn options(dialect: Dialect) -> AnyPoolOptions {
    let max = match dialect {
        Dialect::Sqlite => 8,
        Dialect::Postgres => 16,
    };
    AnyPoolOptions::new().max_connections(max).min_connections(1).acquire_timeout(ACQUIRE_TIMEOUT).after_connect(move |conn, _| {
        Box::pin(async move {
            match dialect {
                // Per connection: SQLite enforces the references only when asked.
                Dialect::Sqlite => {
                    sqlx::query("PRAGMA foreign_keys = ON").execute(conn).await?;
                }
                // A session waits for a lock, or holds a transaction
                // open doing nothing, only so long: a frozen replica
                // cannot hold the others' writes for longer.
                Dialect::Postgres => {
                    for set in [LOCK_TIMEOUT, IDLE_IN_TRANSACTION_TIMEOUT] {
                        sqlx::query(set).execute(&mut *conn).await?;
                    }
                }
            }
            Ok(())
        })
    })
}
