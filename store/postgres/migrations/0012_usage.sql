-- 0012: the usage rollup (store/usage.go): each session's usage, runs and tool calls per UTC
-- day, written in the transaction that appends the events (usage.go), so that GET /v1/usage
-- sums rows of days instead of reading events. usage_days has one row per session and day with
-- anything counted; usage_tools one per session, day and tool called. Both are keyed by day
-- first (a query names a range of days) and indexed by session (fsck and the rebuild read one
-- session's rows). usage_state.built is false until the rollup was built from the logs stored
-- before this migration: the store builds it when it opens (Store.RebuildUsage).
CREATE TABLE usage_days (
    day            integer NOT NULL, -- days since 1970-01-01, UTC
    sk             bigint  NOT NULL,
    usage_events   bigint  NOT NULL,
    input_tokens   bigint  NOT NULL,
    output_tokens  bigint  NOT NULL,
    total_tokens   bigint  NOT NULL,
    runs_completed bigint  NOT NULL,
    runs_failed    bigint  NOT NULL,
    runs_stopped   bigint  NOT NULL,
    run_ms         bigint  NOT NULL,
    tool_calls     bigint  NOT NULL,
    tool_failures  bigint  NOT NULL,
    tool_denied    bigint  NOT NULL,
    PRIMARY KEY (day, sk)
);
CREATE INDEX usage_days_session ON usage_days (sk, day);

CREATE TABLE usage_tools (
    day      integer NOT NULL,
    sk       bigint  NOT NULL,
    tool     text COLLATE "C" NOT NULL,
    calls    bigint  NOT NULL,
    failures bigint  NOT NULL,
    denied   bigint  NOT NULL,
    PRIMARY KEY (day, sk, tool)
);
CREATE INDEX usage_tools_session ON usage_tools (sk, day, tool);

CREATE TABLE usage_state (
    id    integer PRIMARY KEY CHECK (id = 1),
    built boolean NOT NULL
);
INSERT INTO usage_state (id, built) VALUES (1, false);

-- usage_sessions is each session's dimensions (id, project, agent, model: its snapshot's
-- modelId) in a narrow row, kept by a trigger on sessions: a usage query joins its sums with
-- these rather than with the wide session rows and their JSON. A snapshot whose text holds an
-- escaped U+0000 (which text cannot hold) has model ''.
CREATE TABLE usage_sessions (
    sk       bigint PRIMARY KEY,
    id       text COLLATE "C" NOT NULL,
    project  text NOT NULL,
    agent_id text NOT NULL,
    model    text NOT NULL
);
CREATE FUNCTION usage_model(snapshot json) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN strpos(snapshot::text, '\u0000') > 0 THEN '' ELSE coalesce(snapshot->>'modelId', '') END
$$;
INSERT INTO usage_sessions (sk, id, project, agent_id, model)
    SELECT sk, id, project, agent_id, usage_model(snapshot) FROM sessions;
CREATE INDEX usage_sessions_project ON usage_sessions (project);
CREATE FUNCTION usage_sessions_follow() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO usage_sessions AS u (sk, id, project, agent_id, model)
    VALUES (NEW.sk, NEW.id, NEW.project, NEW.agent_id, usage_model(NEW.snapshot))
    ON CONFLICT (sk) DO UPDATE SET project = excluded.project, agent_id = excluded.agent_id, model = excluded.model;
    RETURN NULL;
END $$;
CREATE TRIGGER usage_sessions_follow AFTER INSERT OR UPDATE OF project, agent_id, snapshot ON sessions
    FOR EACH ROW EXECUTE FUNCTION usage_sessions_follow();
