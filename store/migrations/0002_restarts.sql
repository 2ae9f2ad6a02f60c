-- Restart requests: each POST …/restart increments it; the backend restarts
-- the guest when it sees a count it has not acted on.
ALTER TABLE virtual_machines ADD COLUMN restarts BIGINT NOT NULL DEFAULT 0;
