-- 0015: the usage rollup (store/usage.go): each session's usage, runs and tool calls per UTC
-- day, written by the writer in the commit that appends the events, so that GET /v1/usage sums
-- rows of days instead of reading events. usage_days has one row per session and day with
-- anything counted; usage_tools one per session, day and tool called. Both are keyed by day
-- first (a query names a range of days) and indexed by session (fsck and the rebuild read one
-- session's rows). usage_state.built is 0 until the rollup was built from the logs stored
-- before this migration: the store builds it when it opens (Store.RebuildUsage).
CREATE TABLE usage_days (
    day            INTEGER NOT NULL, -- days since 1970-01-01, UTC
    sk             INTEGER NOT NULL,
    usage_events   INTEGER NOT NULL,
    input_tokens   INTEGER NOT NULL,
    output_tokens  INTEGER NOT NULL,
    total_tokens   INTEGER NOT NULL,
    runs_completed INTEGER NOT NULL,
    runs_failed    INTEGER NOT NULL,
    runs_stopped   INTEGER NOT NULL,
    run_ms         INTEGER NOT NULL,
    tool_calls     INTEGER NOT NULL,
    tool_failures  INTEGER NOT NULL,
    tool_denied    INTEGER NOT NULL,
    PRIMARY KEY (day, sk)
) WITHOUT ROWID;
CREATE INDEX usage_days_session ON usage_days (sk, day);

CREATE TABLE usage_tools (
    day      INTEGER NOT NULL,
    sk       INTEGER NOT NULL,
    tool     TEXT    NOT NULL,
    calls    INTEGER NOT NULL,
    failures INTEGER NOT NULL,
    denied   INTEGER NOT NULL,
    PRIMARY KEY (day, sk, tool)
) WITHOUT ROWID;
CREATE INDEX usage_tools_session ON usage_tools (sk, day, tool);

CREATE TABLE usage_state (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    built INTEGER NOT NULL
);
INSERT INTO usage_state (id, built) VALUES (1, 0);

-- usage_sessions is each session's dimensions (id, project, agent, model: its snapshot's
-- modelId) in a narrow row, kept by triggers on sessions: a usage query joins its sums with
-- these (about 60 bytes a session) rather than with the wide session rows and their JSON.
CREATE TABLE usage_sessions (
    sk       INTEGER PRIMARY KEY,
    id       TEXT NOT NULL,
    project  TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    model    TEXT NOT NULL
);
INSERT INTO usage_sessions (sk, id, project, agent_id, model)
    SELECT sk, id, project, agent_id, coalesce(json_extract(snapshot, '$.modelId'), '') FROM sessions;
CREATE INDEX usage_sessions_project ON usage_sessions (project);
CREATE TRIGGER usage_sessions_created AFTER INSERT ON sessions BEGIN
    INSERT INTO usage_sessions (sk, id, project, agent_id, model)
    VALUES (NEW.sk, NEW.id, NEW.project, NEW.agent_id, coalesce(json_extract(NEW.snapshot, '$.modelId'), ''));
END;
CREATE TRIGGER usage_sessions_changed AFTER UPDATE OF project, agent_id, snapshot ON sessions
    WHEN NEW.project IS NOT OLD.project OR NEW.agent_id IS NOT OLD.agent_id OR NEW.snapshot IS NOT OLD.snapshot BEGIN
    UPDATE usage_sessions SET project = NEW.project, agent_id = NEW.agent_id, model = coalesce(json_extract(NEW.snapshot, '$.modelId'), '')
    WHERE sk = NEW.sk;
END;
