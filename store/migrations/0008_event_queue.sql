-- Events written on PostgreSQL wait here, unnumbered, until committed:
-- a numbering step (one replica at a time, under an advisory lock held
-- only while it numbers) moves them into `events` in commit order. No
-- writer locks the event log. Unused on SQLite, whose one writer numbers
-- events as it writes them.
CREATE TABLE IF NOT EXISTS event_queue (
    id        TEXT PRIMARY KEY,
    ord       BIGINT NOT NULL,
    kind      TEXT NOT NULL,
    object_id TEXT NOT NULL,
    tenant    TEXT NOT NULL,
    type      TEXT NOT NULL,
    object    TEXT NOT NULL,
    at        TEXT NOT NULL
);
