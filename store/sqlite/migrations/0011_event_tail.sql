-- 0011: small appends go to event_tail, in commit order; the writer moves them into events
-- a few at a time (store/sqlite/tail.go).
--
-- events is clustered by session (rid = sk * 2^32 + seq), so an append of one event writes
-- into the last leaf page of its session's range. With many sessions appending one event
-- each, every commit rewrites one leaf per session, and each full leaf in the middle of the
-- tree is split by sharing it out with its neighbours: about three 4 KiB pages written per
-- ~700-byte event. event_tail is keyed by its insertion order (pos, given by the writer), so
-- a commit's small appends fill its last pages one after the other, whatever their sessions;
-- its index on rid is small (the tail holds about eight group commits' worth of small appends,
-- and at least tail_rows), and readers find a session's newest events through it.
CREATE TABLE event_tail (
    pos        INTEGER PRIMARY KEY, -- insertion order
    rid        INTEGER NOT NULL,    -- as events.rid: sk * 2^32 + seq
    sk         INTEGER NOT NULL,
    seq        INTEGER NOT NULL,
    gen        INTEGER NOT NULL,
    event_id   TEXT    NOT NULL,
    idem_key   TEXT    NOT NULL,
    event_type TEXT    NOT NULL,
    run_id     TEXT    NOT NULL,
    data       BLOB    NOT NULL,
    CHECK (seq >= 0 AND seq < 4294967296 AND sk >= 0 AND sk < 2147483648 AND rid = (sk << 32) + seq)
);
CREATE UNIQUE INDEX event_tail_rid ON event_tail (rid);
-- A move pass starts once the tail holds tail_rows rows; tests set it low so that their logs
-- cross the two tables.
INSERT INTO settings (name, value) VALUES ('tail_rows', 1024);
-- The pass in progress: it copies the tail's rows up to pos (0: no pass) into events in rid
-- order, a few with each commit, and has copied those below rid so far; when all are copied
-- it deletes them from the tail. Readers skip the rows copied already: event_tail_live.
CREATE TABLE tail_move (
    id  INTEGER PRIMARY KEY CHECK (id = 1),
    pos INTEGER NOT NULL,
    rid INTEGER NOT NULL
);
INSERT INTO tail_move (id, pos, rid) VALUES (1, 0, 0);
CREATE VIEW event_tail_live AS
    SELECT * FROM event_tail
    WHERE NOT (pos <= (SELECT pos FROM tail_move) AND rid < (SELECT rid FROM tail_move));
