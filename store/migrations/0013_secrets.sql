-- Secrets that objects hold (the password an image is pulled from its
-- registry with), sealed by the server before they arrive here: never part
-- of an object's JSON, so never in an answer, a list or an event. `owner`
-- is the object's id; a row goes when the object no longer needs it (an
-- import that ended) or is deleted.
CREATE TABLE IF NOT EXISTS secrets (
    owner  TEXT PRIMARY KEY,
    sealed TEXT NOT NULL
);
