-- 0007: the change feed across sessions (store/changes.go).
--
-- changes holds one row per session-level change, written by the triggers below in the same
-- transaction as the write it records, so a change exists exactly when its write committed.
-- seq is the rowid: with one writer and no deletes it is max + 1, so the sequences are
-- gap-free and in commit order (a rolled back savepoint or transaction takes its rows and its
-- numbers with it). at_ms is the database's clock in Unix milliseconds.
CREATE TABLE changes (
    seq        INTEGER PRIMARY KEY,
    kind       TEXT    NOT NULL,
    session_id TEXT    NOT NULL,
    project    TEXT    NOT NULL,
    agent_id   TEXT    NOT NULL,
    run_id     TEXT    NOT NULL DEFAULT '',
    status     TEXT    NOT NULL,
    previous   TEXT    NOT NULL DEFAULT '',
    attempt    INTEGER NOT NULL DEFAULT 0,
    token      INTEGER NOT NULL DEFAULT 0,
    at_ms      INTEGER NOT NULL
);
-- A filtered read walks the changes of one project or agent in order.
CREATE INDEX changes_project ON changes (project, seq);
CREATE INDEX changes_agent ON changes (agent_id, seq);

CREATE TRIGGER changes_session_created AFTER INSERT ON sessions BEGIN
    INSERT INTO changes (kind, session_id, project, agent_id, status, at_ms)
    VALUES ('session.created', NEW.id, NEW.project, NEW.agent_id, NEW.status, CAST(unixepoch('subsec') * 1000 AS INTEGER));
END;

CREATE TRIGGER changes_session_status AFTER UPDATE OF status ON sessions WHEN NEW.status <> OLD.status BEGIN
    INSERT INTO changes (kind, session_id, project, agent_id, status, previous, at_ms)
    VALUES (CASE WHEN NEW.status = 'archived' THEN 'session.archived' WHEN OLD.status = 'archived' THEN 'session.restored' ELSE 'session.status' END,
        NEW.id, NEW.project, NEW.agent_id, NEW.status, OLD.status, CAST(unixepoch('subsec') * 1000 AS INTEGER));
END;

CREATE TRIGGER changes_run_inserted AFTER INSERT ON runs WHEN NEW.status IN ('queued', 'stopped', 'completed', 'failed') BEGIN
    INSERT INTO changes (kind, session_id, project, agent_id, run_id, status, attempt, token, at_ms)
    VALUES (CASE NEW.status WHEN 'queued' THEN 'run.queued' ELSE 'run.finished' END,
        (SELECT id FROM sessions WHERE sk = NEW.sk), NEW.project, NEW.agent_id, NEW.run_id, NEW.status, NEW.attempt, NEW.lease_token,
        CAST(unixepoch('subsec') * 1000 AS INTEGER));
END;

CREATE TRIGGER changes_run_status AFTER UPDATE OF status ON runs
    WHEN NEW.status <> OLD.status AND (NEW.status = 'queued' OR (NEW.status IN ('stopped', 'completed', 'failed') AND OLD.status NOT IN ('stopped', 'completed', 'failed'))) BEGIN
    INSERT INTO changes (kind, session_id, project, agent_id, run_id, status, previous, attempt, token, at_ms)
    VALUES (CASE NEW.status WHEN 'queued' THEN 'run.queued' ELSE 'run.finished' END,
        (SELECT id FROM sessions WHERE sk = NEW.sk), NEW.project, NEW.agent_id, NEW.run_id, NEW.status, OLD.status, NEW.attempt, NEW.lease_token,
        CAST(unixepoch('subsec') * 1000 AS INTEGER));
END;

CREATE TRIGGER changes_run_claimed AFTER UPDATE OF lease_token ON runs WHEN NEW.lease_token > OLD.lease_token BEGIN
    INSERT INTO changes (kind, session_id, project, agent_id, run_id, status, attempt, token, at_ms)
    VALUES ('run.claimed', (SELECT id FROM sessions WHERE sk = NEW.sk), NEW.project, NEW.agent_id, NEW.run_id, NEW.status, NEW.attempt, NEW.lease_token,
        CAST(unixepoch('subsec') * 1000 AS INTEGER));
END;
