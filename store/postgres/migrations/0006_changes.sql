-- 0006: the change feed across sessions (store/changes.go).
--
-- changes holds one row per session-level change, written by the triggers below in the same
-- transaction as the write it records. id only identifies a row; seq is the feed's order, NULL
-- until the row is numbered. A sequence (IDENTITY, BIGSERIAL) would not do for seq: numbers are
-- taken when rows are inserted, not when transactions commit, so a reader could see 8 before 7
-- commits and skip 7 for good. Numbering inside the writing transaction under a counter row
-- lock would be gap-free, but would hold that lock through every such commit's WAL flush and
-- serialise them all (claims fell from about 3,400/s to under 1,100/s). Instead the rows are
-- committed unnumbered and changes_assign numbers the committed ones afterwards: it runs in a
-- transaction of its own, takes an advisory lock (one numbering at a time, across instances),
-- gives the unnumbered rows it sees the numbers after change_counter.last in id order, moves
-- the counter and NOTIFYs the channel 'sdc:' || md5(schema) with the new last number. Each
-- numbering commits before the next one starts, so numbers become visible in order and without
-- a gap; a rolled back numbering gives its numbers back. The rows of one session are inserted
-- under its row lock, so their ids, and their numbers, follow their commit order.
CREATE TABLE change_counter (
    one  boolean PRIMARY KEY DEFAULT true CHECK (one),
    last bigint  NOT NULL
);
INSERT INTO change_counter (one, last) VALUES (true, 0);

CREATE TABLE changes (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    seq        bigint UNIQUE,  -- NULL until changes_assign numbers the row
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

-- The committed rows still to number.
CREATE INDEX changes_unnumbered ON changes (id) WHERE seq IS NULL;

-- changes_assign numbers up to 10,000 committed unnumbered changes and returns the last number
-- (change_counter.last when there was nothing to number). A run with nothing to number writes
-- nothing (no transaction id, no WAL flush).
CREATE FUNCTION changes_assign() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
    k bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('sessiond/changes/' || current_schema(), 0));
    SELECT last INTO n FROM change_counter;
    WITH todo AS (
        SELECT id, n + row_number() OVER (ORDER BY id) AS num
        FROM (SELECT id FROM changes WHERE seq IS NULL ORDER BY id LIMIT 10000) AS u
    )
    UPDATE changes AS c SET seq = todo.num FROM todo WHERE c.id = todo.id;
    GET DIAGNOSTICS k = ROW_COUNT;
    IF k > 0 THEN
        UPDATE change_counter SET last = n + k;
        PERFORM pg_notify('sdc:' || md5(current_schema()), (n + k)::text);
    END IF;
    RETURN n + k;
END $$;

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
