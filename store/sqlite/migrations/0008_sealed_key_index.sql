-- 0008: only sealed generations have key and id indexes, written once, in key order.
--
-- Before, every append inserted its idempotency key and its eventId into two unique indexes on
-- events (sk, gen, key). With random keys (UUIDv4) each insert lands on a page of its own, and
-- the WAL writes whole pages: about 9 KB written per 470-byte event. Now the writer keeps the
-- keys and ids of each session's open generation (the one its next event goes in) in memory,
-- rebuilt from that generation's rows when first needed, and enforces uniqueness itself
-- (generation.go). When the log moves past a generation, the same transaction writes that
-- generation's keys and ids into event_keys and event_ids in key order, one pass each: dense
-- pages, written once. seq points at the event (a row of events; compaction removes both).

CREATE TABLE event_keys (
    sk       INTEGER NOT NULL,
    gen      INTEGER NOT NULL,
    idem_key TEXT    NOT NULL,
    seq      INTEGER NOT NULL,
    PRIMARY KEY (sk, gen, idem_key)
) WITHOUT ROWID;

CREATE TABLE event_ids (
    sk       INTEGER NOT NULL,
    gen      INTEGER NOT NULL,
    event_id TEXT    NOT NULL,
    seq      INTEGER NOT NULL,
    PRIMARY KEY (sk, gen, event_id)
) WITHOUT ROWID;

-- The sealed generations of every session: gen < (last_seq + 1) >> generation_bits. The old
-- indexes give the rows in key order.
INSERT INTO event_keys (sk, gen, idem_key, seq)
    SELECT e.sk, e.gen, e.idem_key, e.seq FROM events AS e INDEXED BY events_key
    WHERE e.gen < ((SELECT s.last_seq FROM sessions AS s WHERE s.sk = e.sk) + 1) >> (SELECT value FROM settings WHERE name = 'generation_bits')
    ORDER BY e.sk, e.gen, e.idem_key;
INSERT INTO event_ids (sk, gen, event_id, seq)
    SELECT e.sk, e.gen, e.event_id, e.seq FROM events AS e INDEXED BY events_id
    WHERE e.gen < ((SELECT s.last_seq FROM sessions AS s WHERE s.sk = e.sk) + 1) >> (SELECT value FROM settings WHERE name = 'generation_bits')
    ORDER BY e.sk, e.gen, e.event_id;

DROP INDEX events_key;
DROP INDEX events_id;
