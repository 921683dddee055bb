-- 0006: the change feed across sessions (store/changes.go).
--
-- changes holds one row per session-level change, written by the triggers below in the same
-- transaction as the write it records. id only identifies a row; seq is the feed's order. A
-- sequence (IDENTITY, BIGSERIAL) would not do for seq: numbers are taken when rows are
-- inserted, not when transactions commit, so a reader could see 8 before 7 commits and skip 7
-- for good. Instead, seq is assigned by the deferred constraint trigger changes_number, which
-- runs at COMMIT, after every other write of the transaction: it increments the single row of
-- change_counter (a row lock held until the transaction ends) and stamps the row. A second
-- transaction that records changes waits for that lock until the first has committed and become
-- visible, so seq follows commit order, and a rolled back transaction takes its numbers with it:
-- no gap, whichever instance commits. Only transactions that record a change take the lock,
-- and only for the time of their commit. changes_number also NOTIFYs the channel
-- 'sdc:' || md5(schema) with the sequence, so that every instance's listener wakes its feeds.
CREATE TABLE change_counter (
    one  boolean PRIMARY KEY DEFAULT true CHECK (one),
    last bigint  NOT NULL
);
INSERT INTO change_counter (one, last) VALUES (true, 0);

CREATE TABLE changes (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    seq        bigint UNIQUE,  -- NULL only inside the recording transaction, before its COMMIT
    kind       text   NOT NULL,
    session_id text   COLLATE "C" NOT NULL,
    project    text   NOT NULL,
    agent_id   text   NOT NULL,
    run_id     text   NOT NULL DEFAULT '',
    status     text   NOT NULL,
    previous   text   NOT NULL DEFAULT '',
    attempt    integer NOT NULL DEFAULT 0,
    token      bigint NOT NULL DEFAULT 0,
    at_ms      bigint NOT NULL DEFAULT (extract(epoch FROM clock_timestamp()) * 1000)::bigint
);
-- A filtered read walks the changes of one project or agent in order.
CREATE INDEX changes_project ON changes (project, seq);
CREATE INDEX changes_agent ON changes (agent_id, seq);

CREATE FUNCTION changes_number() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    UPDATE change_counter SET last = last + 1 RETURNING last INTO n;
    UPDATE changes SET seq = n WHERE id = NEW.id;
    PERFORM pg_notify('sdc:' || md5(TG_TABLE_SCHEMA), n::text);
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER changes_number AFTER INSERT ON changes
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION changes_number();

CREATE FUNCTION changes_on_session() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO changes (kind, session_id, project, agent_id, status)
        VALUES ('session.created', NEW.id, NEW.project, NEW.agent_id, NEW.status);
    ELSIF NEW.status <> OLD.status THEN
        INSERT INTO changes (kind, session_id, project, agent_id, status, previous)
        VALUES (CASE WHEN NEW.status = 'archived' THEN 'session.archived' WHEN OLD.status = 'archived' THEN 'session.restored' ELSE 'session.status' END,
            NEW.id, NEW.project, NEW.agent_id, NEW.status, OLD.status);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER changes_session AFTER INSERT OR UPDATE OF status ON sessions
    FOR EACH ROW EXECUTE FUNCTION changes_on_session();

CREATE FUNCTION changes_on_run() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    st     text := NEW.data->>'status';
    old_st text := '';
    sid    text;
BEGIN
    IF TG_OP = 'UPDATE' THEN
        old_st := OLD.data->>'status';
    END IF;
    IF st <> old_st AND (st = 'queued' OR (st IN ('stopped', 'completed', 'failed') AND old_st NOT IN ('stopped', 'completed', 'failed'))) THEN
        SELECT id INTO sid FROM sessions WHERE sk = NEW.sk;
        INSERT INTO changes (kind, session_id, project, agent_id, run_id, status, previous, attempt, token)
        VALUES (CASE st WHEN 'queued' THEN 'run.queued' ELSE 'run.finished' END,
            sid, NEW.project, NEW.agent_id, NEW.run_id, st, old_st, NEW.attempt, NEW.lease_token);
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.lease_token > OLD.lease_token THEN
        SELECT id INTO sid FROM sessions WHERE sk = NEW.sk;
        INSERT INTO changes (kind, session_id, project, agent_id, run_id, status, attempt, token)
        VALUES ('run.claimed', sid, NEW.project, NEW.agent_id, NEW.run_id, st, NEW.attempt, NEW.lease_token);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER changes_run AFTER INSERT OR UPDATE OF data, lease_token ON runs
    FOR EACH ROW EXECUTE FUNCTION changes_on_run();
