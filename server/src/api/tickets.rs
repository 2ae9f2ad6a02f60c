//! Console tickets: short-lived, single-use, for one VM and one kind of
//! console (serial or VNC), capped per VM, per tenant and in all, handed
//! out by `POST .../console_sessions` and redeemed by the console's
//! WebSocket ([`super::console`], [`super::display`]).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rand::RngCore;

use crate::error::ApiError;

/// How long a console ticket is valid.
pub const TICKET_TTL: Duration = Duration::from_secs(60);

/// Unused tickets one VM may have at once.
pub const TICKETS_PER_VM: usize = 8;

/// Unused tickets one tenant may have at once.
pub const TICKETS_PER_TENANT: usize = 32;

/// Unused tickets the server keeps at most.
pub const TICKETS_TOTAL: usize = 4096;

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

struct Ticket {
    vm: String,
    tenant: String,
    kind: ConsoleType,
    expires: Instant,
}

/// Console tickets handed out and not used yet.
#[derive(Default)]
pub struct Tickets(Mutex<HashMap<String, Ticket>>);

impl Tickets {
    /// A new ticket to `vm`'s `kind` of console, for `tenant`, unless that
    /// would pass a cap.
    pub(super) fn issue(&self, vm: &str, tenant: &str, kind: ConsoleType) -> Result<String, ApiError> {
        let mut raw = [0u8; 24];
        rand::rng().fill_bytes(&mut raw);
        let ticket: String = raw.iter().map(|b| format!("{b:02x}")).collect();
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        map.retain(|_, t| t.expires > now);
        let cap = |n: usize, what: &str| {
            ApiError::exhausted(
                "console_sessions",
                format!("{what} has {n} unused console tickets already: use them or let them expire ({}s)", TICKET_TTL.as_secs()),
            )
        };
        if map.values().filter(|t| t.vm == vm).count() >= TICKETS_PER_VM {
            return Err(cap(TICKETS_PER_VM, "this virtual machine"));
        }
        if map.values().filter(|t| t.tenant == tenant).count() >= TICKETS_PER_TENANT {
            return Err(cap(TICKETS_PER_TENANT, "this tenant"));
        }
        if map.len() >= TICKETS_TOTAL {
            return Err(cap(TICKETS_TOTAL, "the server"));
        }
        map.insert(ticket.clone(), Ticket { vm: vm.to_owned(), tenant: tenant.to_owned(), kind, expires: now + TICKET_TTL });
        Ok(ticket)
    }

    /// Uses up `ticket`: the VM and kind of console it was for, if it was
    /// valid (for `ConsoleProxy.Connect`, which names neither).
    pub(crate) fn redeem_any(&self, ticket: &str) -> Option<(String, ConsoleType)> {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        map.remove(ticket).filter(|t| t.expires > Instant::now()).map(|t| (t.vm, t.kind))
    }

    /// Uses up `ticket`; true if it was valid for `vm`'s `kind` of console.
    pub(super) fn redeem(&self, ticket: &str, vm: &str, kind: ConsoleType) -> bool {
        self.redeem_any(ticket).is_some_and(|(v, k)| v == vm && k == kind)
    }
}
