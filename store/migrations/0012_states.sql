-- A tenant's objects of one kind in one state, in list order: what a list
-- filtered on `status.state` reads (and counts) instead of every object.
CREATE INDEX IF NOT EXISTS objects_tenant_state ON objects (kind, tenant, state, created_at, id);
CREATE INDEX IF NOT EXISTS objects_state ON objects (kind, state, created_at, id);
