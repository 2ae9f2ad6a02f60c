//! Console tickets handed out and not used yet, in the database every
//! replica shares: a ticket one replica issues opens the console on any
//! replica, once, and the caps on unused tickets hold across replicas.
//!
//! The store keeps what the caller gives as the ticket's key (the server
//! gives a hash of it, never the ticket). Issuing is one transaction that
//! first clears the expired tickets, then counts and inserts; on
//! PostgreSQL it holds an advisory lock, so two replicas never both pass a
//! cap, and on SQLite its first statement is a write, so it holds the
//! database's one write lock from the start. Using a ticket is one
//! `DELETE … RETURNING`: of two replicas handed the same ticket at once,
//! one gets it.

use chrono::{DateTime, Utc};
use sqlx::Row as _;

use super::{Dialect, Store, StoreError};

/// The advisory lock ticket issuance takes on PostgreSQL (any number, the same in every replica).
const TICKET_LOCK: i64 = 0x766d_6161_735f_7463;

/// One cap's count: the query, its key, the cap, and what is said when reached.
type CapCount<'a> = (&'static str, &'a str, i64, fn(i64) -> TicketCap);

/// A ticket to store.
#[derive(Debug, Clone, Copy)]
pub struct NewTicket<'a> {
    /// The ticket's key (a hash of the ticket).
    pub key: &'a str,
    /// The VM whose console it opens.
    pub vm: &'a str,
    /// The VM's tenant.
    pub tenant: &'a str,
    /// Which console it opens.
    pub kind: &'a str,
    /// Who asked for it.
    pub subject: &'a str,
    /// The client id it was asked with (OSAC's; empty: none).
    pub client_id: &'a str,
    /// When it stops being valid.
    pub expires_at: DateTime<Utc>,
}

/// How many unused tickets may exist at once.
#[derive(Debug, Clone, Copy)]
pub struct TicketCaps {
    /// For one VM.
    pub per_vm: i64,
    /// For one tenant.
    pub per_tenant: i64,
    /// In all.
    pub total: i64,
}

/// The cap a ticket would have passed: nothing was stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TicketCap {
    /// The VM has as many unused tickets as it may.
    Vm(i64),
    /// The tenant has.
    Tenant(i64),
    /// The whole service has.
    Total(i64),
}

/// What a used ticket was for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redeemed {
    /// The VM.
    pub vm: String,
    /// Which console.
    pub kind: String,
    /// The VM's tenant.
    pub tenant: String,
    /// Who asked for it.
    pub subject: String,
    /// The client id it was asked with (empty: none).
    pub client_id: String,
}

impl Store {
    /// Stores `ticket` at `now` unless a cap of `caps` is reached (which is
    /// then returned, and nothing stored). Expired tickets are removed.
    pub async fn issue_ticket(
        &self,
        ticket: &NewTicket<'_>,
        caps: &TicketCaps,
        now: DateTime<Utc>,
    ) -> Result<Option<TicketCap>, StoreError> {
        let mut tx = self.pool.begin().await?;
        if self.dialect == Dialect::Postgres {
            sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(TICKET_LOCK).execute(&mut *tx).await?;
        }
        sqlx::query("DELETE FROM console_tickets WHERE expires_at <= $1").bind(now.timestamp_millis()).execute(&mut *tx).await?;
        let counts: [CapCount<'_>; 3] = [
            (
                "SELECT COUNT(*) AS n FROM (SELECT 1 FROM console_tickets WHERE vm = $1 LIMIT $2) AS t",
                ticket.vm,
                caps.per_vm,
                TicketCap::Vm,
            ),
            (
                "SELECT COUNT(*) AS n FROM (SELECT 1 FROM console_tickets WHERE tenant = $1 LIMIT $2) AS t",
                ticket.tenant,
                caps.per_tenant,
                TicketCap::Tenant,
            ),
            (
                "SELECT COUNT(*) AS n FROM (SELECT 1 FROM console_tickets WHERE hash <> $1 LIMIT $2) AS t",
                ticket.key,
                caps.total,
                TicketCap::Total,
            ),
        ];
        for (sql, key, cap, reached) in counts {
            let n: i64 = sqlx::query(sql).bind(key).bind(cap).fetch_one(&mut *tx).await?.try_get("n")?;
            if n >= cap {
                return Ok(Some(reached(cap)));
            }
        }
        sqlx::query(
            "INSERT INTO console_tickets (hash, vm, tenant, kind, subject, client_id, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(ticket.key)
        .bind(ticket.vm)
        .bind(ticket.tenant)
        .bind(ticket.kind)
        .bind(ticket.subject)
        .bind(ticket.client_id)
        .bind(ticket.expires_at.timestamp_millis())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(None)
    }

    /// Uses up the ticket stored under `key`: what it was for, if it was
    /// stored and had not expired by `now`.
    pub async fn redeem_ticket(&self, key: &str, now: DateTime<Utc>) -> Result<Option<Redeemed>, StoreError> {
        let row = sqlx::query("DELETE FROM console_tickets WHERE hash = $1 RETURNING vm, kind, tenant, subject, client_id, expires_at")
            .bind(key)
            .fetch_optional(&self.pool)
            .await?;
        let Some(row) = row else { return Ok(None) };
        let expires_at: i64 = row.try_get("expires_at")?;
        if expires_at <= now.timestamp_millis() {
            return Ok(None);
        }
        Ok(Some(Redeemed {
            vm: row.try_get("vm")?,
            kind: row.try_get("kind")?,
            tenant: row.try_get("tenant")?,
            subject: row.try_get("subject")?,
            client_id: row.try_get("client_id")?,
        }))
    }
}

#[cfg(test)]
mod tests {
    use chrono::Duration;

    use super::*;

    const CAPS: TicketCaps = TicketCaps { per_vm: 2, per_tenant: 3, total: 4 };

    fn ticket<'a>(key: &'a str, vm: &'a str, tenant: &'a str, expires_at: DateTime<Utc>) -> NewTicket<'a> {
        NewTicket { key, vm, tenant, kind: "serial", subject: "alice", client_id: "", expires_at }
    }

    #[tokio::test]
    async fn a_ticket_is_used_once_and_caps_hold_until_tickets_expire() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_sqlite(dir.path()).await.unwrap();
        let now = Utc::now();
        let later = now + Duration::seconds(60);
        assert_eq!(store.issue_ticket(&ticket("a1", "vm-a", "acme", later), &CAPS, now).await.unwrap(), None);
        assert_eq!(store.issue_ticket(&ticket("a2", "vm-a", "acme", later), &CAPS, now).await.unwrap(), None);
        assert_eq!(store.issue_ticket(&ticket("a3", "vm-a", "acme", later), &CAPS, now).await.unwrap(), Some(TicketCap::Vm(2)));
        assert_eq!(store.issue_ticket(&ticket("b1", "vm-b", "acme", later), &CAPS, now).await.unwrap(), None);
        assert_eq!(store.issue_ticket(&ticket("b2", "vm-b", "acme", later), &CAPS, now).await.unwrap(), Some(TicketCap::Tenant(3)));
        assert_eq!(store.issue_ticket(&ticket("c1", "vm-c", "globex", later), &CAPS, now).await.unwrap(), None);
        assert_eq!(store.issue_ticket(&ticket("c2", "vm-c", "globex", later), &CAPS, now).await.unwrap(), Some(TicketCap::Total(4)));

        let used = store.redeem_ticket("a1", now).await.unwrap();
        let what =
            Redeemed { vm: "vm-a".into(), kind: "serial".into(), tenant: "acme".into(), subject: "alice".into(), client_id: String::new() };
        assert_eq!(used, Some(what));
        assert_eq!(store.redeem_ticket("a1", now).await.unwrap(), None, "used once");
        assert_eq!(store.redeem_ticket("nope", now).await.unwrap(), None);
        assert_eq!(
            store.issue_ticket(&ticket("a3", "vm-a", "acme", later), &CAPS, now).await.unwrap(),
            None,
            "a used ticket frees its place"
        );

        // Expired: not usable, and no longer counted.
        let past = later + Duration::seconds(1);
        assert_eq!(store.redeem_ticket("a2", past).await.unwrap(), None, "expired");
        assert_eq!(store.issue_ticket(&ticket("d1", "vm-a", "acme", past + Duration::seconds(60)), &CAPS, past).await.unwrap(), None);
        let left: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM console_tickets").fetch_one(&store.pool).await.unwrap();
        assert_eq!(left, 1, "the expired tickets were cleared");
    }
}
