-- What each tenant holds of what quotas limit (virtual_machines, cores,
-- memory, disk, external_ips), kept by every write in its own transaction
-- on PostgreSQL, so that an admission reads a few rows instead of
-- recounting every object. `usage_counted` says the objects stored before
-- this table were counted into it (once, at the first start after it was
-- made). SQLite keeps the counters in memory and leaves these empty.
CREATE TABLE IF NOT EXISTS usage (
    tenant   TEXT NOT NULL,
    resource TEXT NOT NULL,
    amount   BIGINT NOT NULL,
    PRIMARY KEY (tenant, resource)
);
CREATE TABLE IF NOT EXISTS usage_counted (
    singleton INTEGER PRIMARY KEY,
    at        TEXT NOT NULL
);
