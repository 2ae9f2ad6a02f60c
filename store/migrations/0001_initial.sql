-- Templates, virtual machines and the reconciler lease.
-- Portable SQL: the same file runs on SQLite and PostgreSQL.
CREATE TABLE IF NOT EXISTS templates (
    id         TEXT PRIMARY KEY,
    body       TEXT NOT NULL,
    version    BIGINT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS virtual_machines (
    id         TEXT PRIMARY KEY,
    tenant     TEXT NOT NULL,
    name       TEXT NOT NULL,
    template   TEXT NOT NULL,
    state      TEXT NOT NULL,
    spec       TEXT NOT NULL,
    resolved   TEXT NOT NULL,
    status     TEXT NOT NULL,
    creators   TEXT NOT NULL,
    version    BIGINT NOT NULL,
    created_at TEXT NOT NULL,
    deleted_at TEXT,
    UNIQUE (tenant, name)
);
CREATE INDEX IF NOT EXISTS virtual_machines_tenant_order ON virtual_machines (tenant, created_at, id);
CREATE INDEX IF NOT EXISTS virtual_machines_order ON virtual_machines (created_at, id);
CREATE INDEX IF NOT EXISTS virtual_machines_template ON virtual_machines (template);

CREATE TABLE IF NOT EXISTS leases (
    name       TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);
