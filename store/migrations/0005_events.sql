-- Every change of every object, in commit order: what watchers are sent
-- (GET /api/events/v1/events?watch=true), resumable by seq. Written in the
-- transaction of the change it records; old rows are trimmed.
CREATE TABLE IF NOT EXISTS events (
    seq       BIGINT PRIMARY KEY,
    kind      TEXT NOT NULL,
    object_id TEXT NOT NULL,
    tenant    TEXT NOT NULL,
    type      TEXT NOT NULL,
    object    TEXT NOT NULL,
    at        TEXT NOT NULL
);
