-- 0009: what every append changes moves out of the session's row into a narrow row of its own.
--
-- Before, each append updated the wide sessions row (record, snapshot, ...): its last_seq and
-- commit_xid, and, for the heartbeat every runtime append carries, its JSON record (through
-- jsonb) and the generated heartbeat_at. commit_xid and heartbeat_at are indexed, so the update
-- was never HOT: a new copy of the wide row and a new entry in each of its eight indexes per
-- append. Now an append still locks the sessions row (FOR NO KEY UPDATE: the lock every writer
-- of a session takes, unchanged) but writes only session_heads: a row of a few columns and
-- three indexes.
--
-- session_heads has one row per session (made by the trigger below when the session is):
--   last_seq      the sequence of the last event in the log (-1 when empty);
--   commit_xid    the transaction id of the last append (the listener's poll, listen.go);
--   heartbeat     the heartbeat of the last append (RFC 3339 text, as store.FormatTime writes
--                 it) when it is newer than the record: reads show it as the record's
--                 last_heartbeat_at; NULL once the record was written after it (a writer of the
--                 record reads the record with it merged in, so nothing is lost);
--   heartbeat_at  the session's last heartbeat: heartbeat when set, else the record's
--                 (sessions.heartbeat_at); the stale sweeper's order (ExpiredSessions);
--   live          the session is running or paused: the ones the sweeper may expire.
CREATE TABLE session_heads (
    sk           bigint  PRIMARY KEY,
    last_seq     bigint  NOT NULL DEFAULT -1,
    commit_xid   xid8,
    heartbeat    text,
    heartbeat_at timestamptz,
    live         boolean NOT NULL DEFAULT false
) WITH (fillfactor = 70);
CREATE INDEX session_heads_commit_xid ON session_heads (commit_xid) WHERE commit_xid IS NOT NULL;
CREATE INDEX session_heads_live_heartbeat ON session_heads (heartbeat_at) WHERE live;

INSERT INTO session_heads (sk, last_seq, commit_xid, heartbeat, heartbeat_at, live)
SELECT sk, last_seq, commit_xid, NULL, heartbeat_at, status IN ('running', 'paused') FROM sessions;

-- The session's row keeps its record; the head follows every write of the record or the status
-- (create, update, import, the revival of a stale session): the record then holds the latest
-- heartbeat.
CREATE FUNCTION session_heads_follow() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO session_heads AS h (sk, heartbeat_at, live)
    VALUES (NEW.sk, NEW.heartbeat_at, NEW.status IN ('running', 'paused'))
    ON CONFLICT (sk) DO UPDATE SET heartbeat = NULL, heartbeat_at = excluded.heartbeat_at, live = excluded.live;
    RETURN NULL;
END $$;
CREATE TRIGGER session_heads_follow AFTER INSERT OR UPDATE OF status, record ON sessions
    FOR EACH ROW EXECUTE FUNCTION session_heads_follow();

DROP INDEX sessions_live_heartbeat;
ALTER TABLE sessions DROP COLUMN last_seq, DROP COLUMN commit_xid;
