//! The schema's migrations, compiled in: each file of `store/migrations/`
//! with the version and description its name gives, as `sqlx`'s own
//! `migrate!` would read them (same SQL, same checksums), without the
//! macro, whose crate builds both database drivers a second time for the
//! compiler.

use std::borrow::Cow;

use sqlx::SqlSafeStr;
use sqlx::migrate::{Migration, MigrationType, Migrator};

/// Version, description (the file name's words) and SQL of each migration, in order.
const MIGRATIONS: [(i64, &str, &str); 13] = [
    (1, "initial", include_str!("../migrations/0001_initial.sql")),
    (2, "restarts", include_str!("../migrations/0002_restarts.sql")),
    (3, "objects", include_str!("../migrations/0003_objects.sql")),
    (4, "store identity", include_str!("../migrations/0004_store_identity.sql")),
    (5, "events", include_str!("../migrations/0005_events.sql")),
    (6, "labels", include_str!("../migrations/0006_labels.sql")),
    (7, "quotas", include_str!("../migrations/0007_quotas.sql")),
    (8, "event queue", include_str!("../migrations/0008_event_queue.sql")),
    (9, "usage", include_str!("../migrations/0009_usage.sql")),
    (10, "links", include_str!("../migrations/0010_links.sql")),
    (11, "console tickets", include_str!("../migrations/0011_console_tickets.sql")),
    (12, "states", include_str!("../migrations/0012_states.sql")),
    (13, "secrets", include_str!("../migrations/0013_secrets.sql")),
];

/// The schema's migrations, the first `count` of them.
pub(crate) fn first(count: usize) -> Migrator {
    let list = MIGRATIONS.iter().take(count).map(|(version, description, sql)| {
        let no_tx = sql.starts_with("-- no-transaction");
        Migration::new(*version, Cow::Borrowed(*description), MigrationType::Simple, sql.into_sql_str(), no_tx)
    });
    Migrator::with_migrations(list.collect())
}

/// Every migration of the schema.
pub(crate) fn all() -> Migrator {
    first(MIGRATIONS.len())
}

/// What only PostgreSQL can index, made once after the migrations (the
/// migrations are one SQL for both databases): the labels, so a list
/// filtered on a label's value reads the objects having it
/// ([`super::narrow`] asks with `@>`).
pub(crate) const POSTGRES_ONLY: &str = "CREATE INDEX IF NOT EXISTS objects_labels ON objects USING gin (((meta::jsonb) -> 'labels'))";

#[cfg(test)]
mod tests {
    use super::*;

    /// The list is the directory: every file, with the version, description
    /// and checksum `sqlx` reads from it (a database migrated by the macro
    /// before is the same to this list).
    #[tokio::test]
    async fn the_list_is_every_file_of_the_directory() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
        let read = Migrator::new(dir.as_path()).await.unwrap();
        let ours = all();
        assert_eq!(read.migrations.len(), ours.migrations.len(), "a file of migrations/ is not in MIGRATIONS");
        for (r, o) in read.migrations.iter().zip(ours.migrations.iter()) {
            assert_eq!((r.version, &r.description, &r.checksum, r.no_tx), (o.version, &o.description, &o.checksum, o.no_tx));
        }
    }
}
