-- Console tickets handed out and not used yet, shared by every replica: a
-- ticket one replica issues opens the console on any other, once. `hash`
-- is the ticket's SHA-256 (the ticket itself is never stored); a row is
-- deleted when the ticket is used, and expired rows when the next ticket
-- is issued. `subject` and `client_id` are who asked for it and OSAC's
-- client id (empty: none).
CREATE TABLE IF NOT EXISTS console_tickets (
    hash       TEXT PRIMARY KEY,
    vm         TEXT NOT NULL,
    tenant     TEXT NOT NULL,
    kind       TEXT NOT NULL,
    subject    TEXT NOT NULL,
    client_id  TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS console_tickets_vm ON console_tickets (vm);
CREATE INDEX IF NOT EXISTS console_tickets_tenant ON console_tickets (tenant);
CREATE INDEX IF NOT EXISTS console_tickets_expires_at ON console_tickets (expires_at);

-- The console connection each client (a tenant's subject and OSAC's client
-- id, as one key) holds now, on whichever replica: a newer one of the same
-- client takes the row, and the replica of the older one closes it.
CREATE TABLE IF NOT EXISTS console_clients (
    client  TEXT PRIMARY KEY,
    session TEXT NOT NULL,
    at      BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS console_clients_at ON console_clients (at);
