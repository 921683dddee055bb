-- 0012: the schema without unixepoch(…, 'subsec'), which needs SQLite 3.42: a sqlite3 shell
-- older than that (Debian 12's is 3.40.1) read the heartbeat index as corrupt in PRAGMA
-- integrity_check ("row N missing from index sessions_live_heartbeat" for every running or
-- paused session) and could not update those rows or fire the change triggers. Unix
-- milliseconds are computed from julianday(), which every SQLite has:
-- (julianday(t) - 2440587.5) * 86400000 is t in Unix milliseconds, to the millisecond SQLite
-- keeps (round() takes off the floating-point error). The values are the same as before.

DROP INDEX sessions_live_heartbeat;
ALTER TABLE sessions DROP COLUMN heartbeat_ms;
ALTER TABLE sessions ADD COLUMN heartbeat_ms INTEGER GENERATED ALWAYS AS (
    CAST(round((julianday(coalesce(json_extract(record, '$.last_heartbeat_at'), json_extract(record, '$.started_at'))) - 2440587.5) * 86400000) AS INTEGER)
) VIRTUAL;
CREATE INDEX sessions_live_heartbeat ON sessions (heartbeat_ms) WHERE status IN ('running', 'paused');

DROP TRIGGER changes_session_created;
DROP TRIGGER changes_session_status;
DROP TRIGGER changes_run_inserted;
DROP TRIGGER changes_run_status;
DROP TRIGGER changes_run_claimed;

CREATE TRIGGER changes_session_created AFTER INSERT ON sessions BEGIN
    INSERT INTO changes (kind, session_id, project, agent_id, status, at_ms)
    VALUES ('session.created', NEW.id, NEW.project, NEW.agent_id, NEW.status, CAST(round((julianday('now') - 2440587.5) * 86400000) AS INTEGER));
END;

CREATE TRIGGER changes_session_status AFTER UPDATE OF status ON sessions WHEN NEW.status <> OLD.status BEGIN
    INSERT INTO changes (kind, session_id, project, agent_id, status, previous, at_ms)
    VALUES (CASE WHEN NEW.status = 'archived' THEN 'session.archived' WHEN OLD.status = 'archived' THEN 'session.restored' ELSE 'session.status' END,
        NEW.id, NEW.project, NEW.agent_id, NEW.status, OLD.status, CAST(round((julianday('now') - 2440587.5) * 86400000) AS INTEGER));
END;

CREATE TRIGGER changes_run_inserted AFTER INSERT ON runs WHEN NEW.status IN ('queued', 'stopped', 'completed', 'failed') BEGIN
    INSERT INTO changes (kind, session_id, project, agent_id, run_id, status, attempt, token, at_ms)
    VALUES (CASE NEW.status WHEN 'queued' THEN 'run.queued' ELSE 'run.finished' END,
        (SELECT id FROM sessions WHERE sk = NEW.sk), NEW.project, NEW.agent_id, NEW.run_id, NEW.status, NEW.attempt, NEW.lease_token,
        CAST(round((julianday('now') - 2440587.5) * 86400000) AS INTEGER));
END;

CREATE TRIGGER changes_run_status AFTER UPDATE OF status ON runs
    WHEN NEW.status <> OLD.status AND (NEW.status = 'queued' OR (NEW.status IN ('stopped', 'completed', 'failed') AND OLD.status NOT IN ('stopped', 'completed', 'failed'))) BEGIN
    INSERT INTO changes (kind, session_id, project, agent_id, run_id, status, previous, attempt, token, at_ms)
    VALUES (CASE NEW.status WHEN 'queued' THEN 'run.queued' ELSE 'run.finished' END,
        (SELECT id FROM sessions WHERE sk = NEW.sk), NEW.project, NEW.agent_id, NEW.run_id, NEW.status, OLD.status, NEW.attempt, NEW.lease_token,
        CAST(round((julianday('now') - 2440587.5) * 86400000) AS INTEGER));
END;

CREATE TRIGGER changes_run_claimed AFTER UPDATE OF lease_token ON runs WHEN NEW.lease_token > OLD.lease_token BEGIN
    INSERT INTO changes (kind, session_id, project, agent_id, run_id, status, attempt, token, at_ms)
    VALUES ('run.claimed', (SELECT id FROM sessions WHERE sk = NEW.sk), NEW.project, NEW.agent_id, NEW.run_id, NEW.status, NEW.attempt, NEW.lease_token,
        CAST(round((julianday('now') - 2440587.5) * 86400000) AS INTEGER));
END;
