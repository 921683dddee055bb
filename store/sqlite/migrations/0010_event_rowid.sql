-- 0010: events becomes a rowid table keyed by rid = sk * 2^32 + seq.
--
-- It was a WITHOUT ROWID table with the primary key (sk, seq). SQLite stores such a table as
-- an index b-tree, whose interior pages hold whole rows: with agent events of ~700 bytes an
-- interior page held about five, the tree was six levels deep for 13,000 events, and a page
-- split (one every few appends when many sessions append one event each) rewrote interior
-- pages all the way up: 15 KB written per 700-byte event. Keyed by an integer, the interior
-- pages hold 8-byte keys (hundreds per page, three levels for millions of events), and the
-- rows stay in the same order: a session's log is still one range scan, from sk * 2^32 up.
-- The CHECK keeps rid and (sk, seq) in step (a sequence fits in 32 bits, a session key in 31).
CREATE TABLE events_new (
    rid        INTEGER PRIMARY KEY, -- sk * 2^32 + seq
    sk         INTEGER NOT NULL,
    seq        INTEGER NOT NULL,
    gen        INTEGER NOT NULL,    -- seq >> generation_bits
    event_id   TEXT    NOT NULL,
    idem_key   TEXT    NOT NULL,
    event_type TEXT    NOT NULL,
    run_id     TEXT    NOT NULL,
    data       BLOB    NOT NULL,
    CHECK (seq >= 0 AND seq < 4294967296 AND sk >= 0 AND sk < 2147483648 AND rid = (sk << 32) + seq)
);
INSERT INTO events_new (rid, sk, seq, gen, event_id, idem_key, event_type, run_id, data)
    SELECT (sk << 32) + seq, sk, seq, gen, event_id, idem_key, event_type, run_id, data FROM events ORDER BY sk, seq;
DROP TABLE events;
ALTER TABLE events_new RENAME TO events;
