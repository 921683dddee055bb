-- 0001: sessions, their event logs and the run projection (PostgreSQL).

-- sessions holds one row per session. sk is the internal key every other table uses, so the
-- text id is stored once. id uses the "C" collation so that ListSessions pages in byte order,
-- as the SQLite driver does, whatever the database's default collation.
-- last_seq is the sequence of the last event in the log (-1 when empty); an append locks this
-- row, assigns the next sequences and moves last_seq in the same transaction.
-- commit_xid is the transaction id of the last append: the listener uses it to find the
-- sessions that changed while its connection was down (see the package documentation).
CREATE TABLE sessions (
    sk            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id            text COLLATE "C" NOT NULL UNIQUE,
    status        text NOT NULL,
    agent_id      text NOT NULL,
    project       text NOT NULL,
    record        json NOT NULL,  -- contract.SessionRecord
    snapshot      json NOT NULL,  -- contract.Snapshot
    lineage       json,           -- contract.Lineage, NULL when absent
    active_branch json,           -- contract.ActiveBranch, NULL when absent
    last_seq      bigint NOT NULL DEFAULT -1,
    commit_xid    xid8
);
CREATE INDEX sessions_status ON sessions (status, id);
CREATE INDEX sessions_agent ON sessions (agent_id, id);
CREATE INDEX sessions_project ON sessions (project, id);
CREATE INDEX sessions_commit_xid ON sessions (commit_xid) WHERE commit_xid IS NOT NULL;

-- events is every session's log; reading a log in order is a range scan of the primary key.
-- data is the canonical event JSON with its assigned sequence, exactly what readers receive,
-- kept as bytea so that it is stored and returned byte for byte without being parsed.
-- The unique constraints are the last line of defence for idempotency keys and eventIds: an
-- append checks them itself while it holds the session's row lock.
-- There is no foreign key to sessions: sessions are never deleted, every insert happens while
-- the session row is locked, and a per-row foreign key check would cost a lookup per event.
CREATE TABLE events (
    sk         bigint NOT NULL,
    seq        bigint NOT NULL,
    event_id   text   NOT NULL,
    idem_key   text   NOT NULL,
    event_type text   NOT NULL,
    run_id     text   NOT NULL,
    data       bytea  NOT NULL,
    PRIMARY KEY (sk, seq),
    UNIQUE (sk, idem_key),
    UNIQUE (sk, event_id)
);

-- runs is the run projection, folded from run status events in the transaction that appends
-- them. ord is the order in which the session's runs were created; active is false once the
-- run's status is terminal (at most one active run per session).
CREATE TABLE runs (
    sk     bigint  NOT NULL,
    run_id text    NOT NULL,
    ord    integer NOT NULL,
    active boolean NOT NULL,
    data   json    NOT NULL, -- contract.Run
    PRIMARY KEY (sk, run_id),
    UNIQUE (sk, ord)
);
CREATE INDEX runs_active ON runs (sk) WHERE active;
