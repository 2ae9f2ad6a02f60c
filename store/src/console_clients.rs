//! Which console connection each client holds, across replicas (OSAC's
//! `client_id`: a connection of a client takes the place of the client's
//! older one). A client is one key (the caller makes it of the tenant, the
//! subject and the client id); its row names the session that holds it
//! now. The replica of an older session finds the row taken by another
//! session and closes its own; a row that is missing takes nothing from
//! anyone (rows a replica could not remove, having died, are pruned after
//! [`Store::claim_console_client`]'s `keep`).

use chrono::{DateTime, Utc};
use sqlx::{AssertSqlSafe, Row as _};

use super::{Store, StoreError};

/// Keys looked up per query.
const CHUNK: usize = 200;

impl Store {
    /// Makes `session` the one `client` holds, at `now`; rows older than
    /// `keep` (of clients that went without a word) are removed.
    pub async fn claim_console_client(
        &self,
        client: &str,
        session: &str,
        now: DateTime<Utc>,
        keep: chrono::Duration,
    ) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM console_clients WHERE at < $1").bind((now - keep).timestamp_millis()).execute(&self.pool).await?;
        sqlx::query(
            "INSERT INTO console_clients (client, session, at) VALUES ($1, $2, $3) \
             ON CONFLICT (client) DO UPDATE SET session = excluded.session, at = excluded.at",
        )
        .bind(client)
        .bind(session)
        .bind(now.timestamp_millis())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Gives `client` up, if `session` still holds it.
    pub async fn release_console_client(&self, client: &str, session: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM console_clients WHERE client = $1 AND session = $2")
            .bind(client)
            .bind(session)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Of `held` (client, session), those whose client another session
    /// holds now.
    pub async fn displaced_console_sessions(&self, held: &[(String, String)]) -> Result<Vec<(String, String)>, StoreError> {
        let mut displaced = Vec::new();
        for chunk in held.chunks(CHUNK) {
            let marks: Vec<String> = (1..=chunk.len()).map(|i| format!("${i}")).collect();
            let sql = format!("SELECT client, session FROM console_clients WHERE client IN ({})", marks.join(", "));
            let mut q = sqlx::query(AssertSqlSafe(sql));
            for (client, _) in chunk {
                q = q.bind(client);
            }
            let now: std::collections::HashMap<String, String> = q
                .fetch_all(&self.pool)
                .await?
                .iter()
                .map(|r| Ok((r.try_get("client")?, r.try_get("session")?)))
                .collect::<Result<_, sqlx::Error>>()?;
            displaced.extend(chunk.iter().filter(|(c, s)| now.get(c).is_some_and(|holder| holder != s)).cloned());
        }
        Ok(displaced)
    }
}

#[cfg(test)]
mod tests {
    use chrono::Duration;

    use super::*;

    #[tokio::test]
    async fn a_newer_session_displaces_the_older_and_a_missing_row_displaces_none() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_sqlite(dir.path()).await.unwrap();
        let now = Utc::now();
        let day = Duration::days(1);
        store.claim_console_client("acme/alice/cli-1", "s1", now, day).await.unwrap();
        store.claim_console_client("acme/bob/cli-1", "s2", now, day).await.unwrap();
        let held = |pairs: &[(&str, &str)]| pairs.iter().map(|(c, s)| (c.to_string(), s.to_string())).collect::<Vec<_>>();
        let all = held(&[("acme/alice/cli-1", "s1"), ("acme/bob/cli-1", "s2"), ("acme/carol/cli-9", "s9")]);
        assert!(store.displaced_console_sessions(&all).await.unwrap().is_empty());

        store.claim_console_client("acme/alice/cli-1", "s3", now, day).await.unwrap();
        let displaced = store.displaced_console_sessions(&all).await.unwrap();
        assert_eq!(displaced, held(&[("acme/alice/cli-1", "s1")]), "alice's newer session displaces s1 only");
        store.release_console_client("acme/alice/cli-1", "s1").await.unwrap();
        assert!(store.displaced_console_sessions(&held(&[("acme/alice/cli-1", "s3")])).await.unwrap().is_empty());

        // A day later, rows nobody renewed are gone: they displace nobody.
        store.claim_console_client("acme/dave/cli-2", "s4", now + day + Duration::seconds(1), day).await.unwrap();
        let left: Vec<String> = sqlx::query_scalar("SELECT client FROM console_clients").fetch_all(&store.pool).await.unwrap();
        assert_eq!(left, ["acme/dave/cli-2"]);
    }

    #[tokio::test]
    async fn many_sessions_are_looked_up_in_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_sqlite(dir.path()).await.unwrap();
        let now = Utc::now();
        let held: Vec<(String, String)> = (0..450).map(|i| (format!("c{i}"), format!("old{i}"))).collect();
        for (i, (c, _)) in held.iter().enumerate() {
            let session = if i % 7 == 0 { format!("new{i}") } else { format!("old{i}") };
            store.claim_console_client(c, &session, now, Duration::days(1)).await.unwrap();
        }
        let displaced = store.displaced_console_sessions(&held).await.unwrap();
        assert_eq!(displaced.len(), (0..450).filter(|i| i % 7 == 0).count());
    }
}
