-- 0001: sessions, their event logs and the run projection.

-- sessions holds one row per session. sk is the internal key every other table uses, so the
-- text id is stored once. last_seq is the sequence of the last event in the log (-1 when the
-- log is empty); the writer keeps it in step with events in the same transaction.
CREATE TABLE sessions (
    sk            INTEGER PRIMARY KEY,
    id            TEXT    NOT NULL UNIQUE,
    status        TEXT    NOT NULL,
    agent_id      TEXT    NOT NULL,
    project       TEXT    NOT NULL,
    record        TEXT    NOT NULL, -- contract.SessionRecord as JSON
    snapshot      TEXT    NOT NULL, -- contract.Snapshot as JSON
    lineage       TEXT,             -- contract.Lineage as JSON, NULL when absent
    active_branch TEXT,             -- contract.ActiveBranch as JSON, NULL when absent
    last_seq      INTEGER NOT NULL DEFAULT -1
);
CREATE INDEX sessions_status ON sessions (status, id);
CREATE INDEX sessions_agent ON sessions (agent_id, id);
CREATE INDEX sessions_project ON sessions (project, id);

-- events is every session's log, clustered by (session, sequence) so that reading a log in
-- order is a range scan. data is the canonical event JSON with its assigned sequence, exactly
-- what readers receive.
CREATE TABLE events (
    sk         INTEGER NOT NULL,
    seq        INTEGER NOT NULL,
    event_id   TEXT    NOT NULL,
    idem_key   TEXT    NOT NULL,
    event_type TEXT    NOT NULL,
    run_id     TEXT    NOT NULL,
    data       BLOB    NOT NULL,
    PRIMARY KEY (sk, seq),
    UNIQUE (sk, idem_key),
    UNIQUE (sk, event_id)
) WITHOUT ROWID;

-- runs is the run projection, folded from run status events in the transaction that appends
-- them. ord is the order in which the session's runs were created; status is the run's status,
-- kept beside the JSON so that the session's active run (at most one) is found by index.
CREATE TABLE runs (
    sk     INTEGER NOT NULL,
    run_id TEXT    NOT NULL,
    ord    INTEGER NOT NULL,
    status TEXT    NOT NULL,
    data   TEXT    NOT NULL, -- contract.Run as JSON
    PRIMARY KEY (sk, run_id)
) WITHOUT ROWID;
CREATE UNIQUE INDEX runs_order ON runs (sk, ord);
CREATE INDEX runs_active ON runs (sk, ord) WHERE status NOT IN ('stopped', 'completed', 'failed');
