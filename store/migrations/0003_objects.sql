-- One table for every kind of object, and the references between them.
-- Portable SQL: the same file runs on SQLite and PostgreSQL.
CREATE TABLE IF NOT EXISTS objects (
    id               TEXT PRIMARY KEY,
    kind             TEXT NOT NULL,
    tenant           TEXT NOT NULL,
    name             TEXT NOT NULL,
    spec             TEXT NOT NULL,
    status           TEXT NOT NULL,
    state            TEXT NOT NULL,
    observed         TEXT NOT NULL,
    observed_version BIGINT NOT NULL,
    creators         TEXT NOT NULL,
    version          BIGINT NOT NULL,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    deleted_at       TEXT,
    UNIQUE (kind, tenant, name)
);
CREATE INDEX IF NOT EXISTS objects_order ON objects (kind, created_at, id);
CREATE INDEX IF NOT EXISTS objects_tenant_order ON objects (kind, tenant, created_at, id);

-- source refers to target: deleting a target with referrers is refused by
-- the database itself, whatever races it; deleting a source drops its refs.
CREATE TABLE IF NOT EXISTS refs (
    source TEXT NOT NULL REFERENCES objects (id) ON DELETE CASCADE,
    target TEXT NOT NULL REFERENCES objects (id) ON DELETE RESTRICT,
    role   TEXT NOT NULL,
    PRIMARY KEY (source, target, role)
);
CREATE INDEX IF NOT EXISTS refs_target ON refs (target);

INSERT INTO objects (id, kind, tenant, name, spec, status, state, observed, observed_version, creators, version, created_at, updated_at, deleted_at)
SELECT 'template:' || id, 'template', '', id, body, '{}', '', '{}', version, '[]', version, created_at, updated_at, NULL FROM templates;

INSERT INTO objects (id, kind, tenant, name, spec, status, state, observed, observed_version, creators, version, created_at, updated_at, deleted_at)
SELECT id, 'virtual_machine', tenant, name,
       '{"spec":' || spec || ',"machine":' || resolved || ',"requests":{"restart":' || CAST(restarts AS TEXT) || '}}',
       status, state, '{"restart":' || CAST(restarts AS TEXT) || '}', version, creators, version, created_at, created_at, deleted_at
FROM virtual_machines;

INSERT INTO refs (source, target, role)
SELECT v.id, 'template:' || v.template, 'template' FROM virtual_machines v WHERE v.template IN (SELECT t.id FROM templates t);

DROP TABLE virtual_machines;
DROP TABLE templates;
