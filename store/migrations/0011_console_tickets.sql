-- Console tickets handed out and not used yet, shared by every replica: a
-- ticket one replica issues opens the console on any other, once. `hash`
-- is the ticket's SHA-256 (the ticket itself is never stored); a row is
-- deleted when the ticket is used, and expired rows when the next ticket
-- is issued.
CREATE TABLE IF NOT EXISTS console_tickets (
    hash       TEXT PRIMARY KEY,
    vm         TEXT NOT NULL,
    tenant     TEXT NOT NULL,
    kind       TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS console_tickets_vm ON console_tickets (vm);
CREATE INDEX IF NOT EXISTS console_tickets_tenant ON console_tickets (tenant);
CREATE INDEX IF NOT EXISTS console_tickets_expires_at ON console_tickets (expires_at);
