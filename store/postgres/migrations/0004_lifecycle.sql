-- 0004: heartbeats, the stale sweeper's index, and lifecycle state (window, archives).

-- sessiond_heartbeat_at is the session's last heartbeat: the record's last_heartbeat_at, or
-- started_at when it never had one. Records are validated, and their timestamps are RFC 3339
-- with an explicit offset, so the cast does not depend on the TimeZone setting: the function
-- is immutable in practice, which a generated column requires.
CREATE FUNCTION sessiond_heartbeat_at(record json) RETURNS timestamptz
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT COALESCE(record->>'last_heartbeat_at', record->>'started_at')::timestamptz $$;

-- heartbeat_at follows the record on every write (create, update, the heartbeat of an
-- append), so it can never disagree with it. The partial index holds only running and paused
-- sessions, the ones the sweeper may expire: finding the expired ones costs in proportion to
-- how many there are.
ALTER TABLE sessions ADD COLUMN heartbeat_at timestamptz GENERATED ALWAYS AS (sessiond_heartbeat_at(record)) STORED;
CREATE INDEX sessions_live_heartbeat ON sessions (heartbeat_at) WHERE status IN ('running', 'paused');

-- session_lifecycle is the lifecycle state the record has no field for (store.Lifecycle):
-- the work window, the latest archive, compaction and restore.
CREATE TABLE session_lifecycle (
    sk   bigint PRIMARY KEY,
    data json   NOT NULL
);
