//! Console tickets: short-lived, single-use, for one VM and one kind of
//! console (serial or VNC), capped per VM, per tenant and in all, handed
//! out by `POST .../console_sessions` and redeemed by the console's
//! WebSocket (`api::console`, `api::display`) or gRPC's
//! `ConsoleProxy.Connect`. They live in the store (only their SHA-256),
//! so a ticket one replica hands out opens the console on any replica,
//! once, and the caps hold across replicas.

use std::time::Duration;

use chrono::{DateTime, Utc};
use rand::RngCore;
use sha2::{Digest, Sha256};
use vmaas_store::tickets::{NewTicket, TicketCap, TicketCaps};

use crate::error::ApiError;
use crate::store::Store;

/// How long a console ticket is valid.
pub const TICKET_TTL: Duration = Duration::from_secs(60);

/// Unused tickets one VM may have at once.
pub const TICKETS_PER_VM: i64 = 8;

/// Unused tickets one tenant may have at once.
pub const TICKETS_PER_TENANT: i64 = 32;

/// Unused tickets the service keeps at most (all replicas together).
pub const TICKETS_TOTAL: i64 = 4096;

/// Which console a ticket opens, as OSAC's `ConsoleType` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub enum ConsoleType {
    /// The serial console (`…/console`).
    #[default]
    #[serde(rename = "CONSOLE_TYPE_SERIAL", alias = "CONSOLE_TYPE_UNSPECIFIED")]
    Serial,
    /// The graphical console, RFB over a WebSocket (`…/vnc`).
    #[serde(rename = "CONSOLE_TYPE_VNC")]
    Vnc,
}

impl ConsoleType {
    /// How the store names it.
    fn as_str(self) -> &'static str {
        match self {
            Self::Serial => "serial",
            Self::Vnc => "vnc",
        }
    }

    /// The kind the store names `s`.
    fn parse(s: &str) -> Option<Self> {
        [Self::Serial, Self::Vnc].into_iter().find(|k| k.as_str() == s)
    }
}

/// The caps on unused tickets.
const CAPS: TicketCaps = TicketCaps { per_vm: TICKETS_PER_VM, per_tenant: TICKETS_PER_TENANT, total: TICKETS_TOTAL };

/// The key a ticket is stored under: its SHA-256 (whoever reads the
/// database cannot open a console with what is there).
fn key(ticket: &str) -> String {
    hex(&Sha256::digest(ticket.as_bytes()))
}

/// `bytes` in lowercase hex.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Who a ticket is for: the VM's tenant, the subject that asked, and
/// OSAC's client id it asked with (empty: none).
pub(crate) struct For<'a> {
    pub tenant: &'a str,
    pub subject: &'a str,
    pub client_id: &'a str,
}

/// A new ticket to `vm`'s `kind` of console, `who` it is for, and when it
/// expires, unless that would pass a cap (429, naming it).
pub(crate) async fn issue(store: &Store, vm: &str, who: &For<'_>, kind: ConsoleType) -> Result<(String, DateTime<Utc>), ApiError> {
    let mut raw = [0u8; 24];
    rand::rng().fill_bytes(&mut raw);
    let ticket = hex(&raw);
    let now = Utc::now();
    let expires_at = now + chrono::Duration::from_std(TICKET_TTL).unwrap_or_default();
    let (tenant, subject, client_id) = (who.tenant, who.subject, who.client_id);
    let new = NewTicket { key: &key(&ticket), vm, tenant, kind: kind.as_str(), subject, client_id, expires_at };
    let refused = match store.issue_ticket(&new, &CAPS, now).await? {
        None => return Ok((ticket, expires_at)),
        Some(TicketCap::Vm(n)) => (n, "this virtual machine"),
        Some(TicketCap::Tenant(n)) => (n, "this tenant"),
        Some(TicketCap::Total(n)) => (n, "the service"),
    };
    Err(ApiError::exhausted(
        "console_sessions",
        format!("{} has {} unused console tickets already: use them or let them expire ({}s)", refused.1, refused.0, TICKET_TTL.as_secs()),
    ))
}

/// What a used ticket opens.
pub(crate) struct Used {
    /// The VM.
    pub vm: String,
    /// Its kind of console.
    pub kind: ConsoleType,
    /// The client the connection is of (OSAC's `client_id`, as
    /// [`super::clients`] keys it), when the ticket was asked with one.
    pub client: Option<String>,
}

/// Uses up `ticket`: what it opens, if it was valid (for
/// `ConsoleProxy.Connect`, which names neither VM nor console).
pub(crate) async fn redeem_any(store: &Store, ticket: &str) -> Result<Option<Used>, ApiError> {
    let Some(used) = store.redeem_ticket(&key(ticket), Utc::now()).await? else { return Ok(None) };
    let Some(kind) = ConsoleType::parse(&used.kind) else { return Ok(None) };
    let client = (!used.client_id.is_empty()).then(|| super::clients::key(&used.tenant, &used.subject, &used.client_id));
    Ok(Some(Used { vm: used.vm, kind, client }))
}

/// Uses up `ticket`: what it opens, if it was valid for `vm`'s `kind` of console.
pub(crate) async fn redeem(store: &Store, ticket: &str, vm: &str, kind: ConsoleType) -> Result<Option<Used>, ApiError> {
    Ok(redeem_any(store, ticket).await?.filter(|u| u.vm == vm && u.kind == kind))
}
