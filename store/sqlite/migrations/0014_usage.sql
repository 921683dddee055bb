-- 0014: the usage rollup (store/usage.go): each session's usage, runs and tool calls per UTC
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
