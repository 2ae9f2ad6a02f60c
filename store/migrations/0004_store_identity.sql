-- The store's identity: one row, made once, recorded beside the host state
-- (DATA_DIR/store-identity) so that a server pointed at the wrong or an
-- empty database notices before it touches a guest.
CREATE TABLE IF NOT EXISTS store_identity (
    singleton  BIGINT PRIMARY KEY,
    id         TEXT NOT NULL,
    created_at TEXT NOT NULL
);
