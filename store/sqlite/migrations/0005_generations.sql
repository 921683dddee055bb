-- 0005: event ids and idempotency keys are indexed per generation of a session's log.
--
-- A generation is a run of 2^bits consecutive sequences (gen = seq >> bits; bits is the
-- generation_bits setting, 16 unless a test chose otherwise before the first event). The
-- unique indexes are on (sk, gen, key): an append inserts into the small subtree of the
-- current generation, whatever the size of the log, so random ids and keys (UUIDv4) cost
-- nearly as little in a log of a million events as in a new one. Uniqueness across generations is the
-- writer's job: it checks older generations through Bloom filters, and looks a key up in the
-- index only when a filter says it may be there (see generation.go).

CREATE TABLE settings (
    name  TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO settings (name, value) VALUES ('generation_bits', 16);

CREATE TABLE events_new (
    sk         INTEGER NOT NULL,
    seq        INTEGER NOT NULL,
    gen        INTEGER NOT NULL, -- seq >> generation_bits
    event_id   TEXT    NOT NULL,
    idem_key   TEXT    NOT NULL,
    event_type TEXT    NOT NULL,
    run_id     TEXT    NOT NULL,
    data       BLOB    NOT NULL,
    PRIMARY KEY (sk, seq)
) WITHOUT ROWID;
INSERT INTO events_new (sk, seq, gen, event_id, idem_key, event_type, run_id, data)
    SELECT sk, seq, seq >> 16, event_id, idem_key, event_type, run_id, data FROM events;
DROP TABLE events;
ALTER TABLE events_new RENAME TO events;
CREATE UNIQUE INDEX events_key ON events (sk, gen, idem_key);
CREATE UNIQUE INDEX events_id ON events (sk, gen, event_id);

-- event_filters holds the Bloom filter of each sealed generation (one the log has moved past)
-- of a session: the hashes of its idempotency keys and event ids. A filter may hold more than
-- its generation (compaction removes events, not their bits), never less.
CREATE TABLE event_filters (
    sk   INTEGER NOT NULL,
    gen  INTEGER NOT NULL,
    bits BLOB    NOT NULL,
    PRIMARY KEY (sk, gen)
) WITHOUT ROWID;
