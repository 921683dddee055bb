-- 0004: heartbeats, the stale sweeper's index, and lifecycle state (window, archives).

-- heartbeat_ms is the session's last heartbeat in Unix milliseconds: the record's
-- last_heartbeat_at, or started_at when it never had one. It is computed from the record, so
-- it can never disagree with it, whatever writes the record (create, update, the heartbeat of
-- an append). The partial index holds only running and paused sessions, the ones the sweeper
-- may expire: finding the expired ones costs in proportion to how many there are.
ALTER TABLE sessions ADD COLUMN heartbeat_ms INTEGER GENERATED ALWAYS AS (
    CAST(round(unixepoch(coalesce(json_extract(record, '$.last_heartbeat_at'), json_extract(record, '$.started_at')), 'subsec') * 1000) AS INTEGER)
) VIRTUAL;
CREATE INDEX sessions_live_heartbeat ON sessions (heartbeat_ms) WHERE status IN ('running', 'paused');

-- session_lifecycle is the lifecycle state the record has no field for (store.Lifecycle as
-- JSON): the work window, the latest archive, compaction and restore.
CREATE TABLE session_lifecycle (
    sk   INTEGER PRIMARY KEY,
    data TEXT    NOT NULL
);
