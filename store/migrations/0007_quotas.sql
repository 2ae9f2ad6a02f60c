-- Limits per tenant, set by administrators: {"virtual_machines": 10, "cores": 8, ...}.
CREATE TABLE quotas (
    tenant TEXT PRIMARY KEY,
    spec TEXT NOT NULL,
    version BIGINT NOT NULL,
    updated_at TEXT NOT NULL
);
