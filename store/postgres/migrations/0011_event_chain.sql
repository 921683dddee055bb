-- 0011: the hash chain of every session's log (store/chain.go).
--
-- Each event has a hash, SHA-256 over its predecessor's hash and its stored bytes (data), kept in
-- the row of every 16th event (sequences 15, 31, ...: store.ChainMarked), NULL in the others;
-- the session's head carries head_hash, the hash of the event at last_seq (32 zero bytes, the
-- chain's genesis, for an empty log), written in the commit of every append with last_seq;
-- base_hash is the hash of the last event a compaction deleted (the predecessor of the first
-- event kept), NULL when none is recorded.
ALTER TABLE events ADD COLUMN hash bytea;
ALTER TABLE session_heads
    ADD COLUMN head_hash bytea NOT NULL DEFAULT '\x0000000000000000000000000000000000000000000000000000000000000000',
    ADD COLUMN base_hash bytea;

-- The events stored before: each session's chain in sequence order. A session compacted before
-- the chain existed has no record of its deleted events' hashes: its chain starts from the
-- genesis at its first kept event, and its base stays NULL.
DO $$
DECLARE
    s  record;
    e  record;
    h  bytea;
BEGIN
    FOR s IN SELECT sk FROM session_heads LOOP
        h := '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea;
        FOR e IN SELECT seq, data FROM events WHERE sk = s.sk ORDER BY seq LOOP
            h := sha256(h || e.data);
            IF e.seq % 16 = 15 THEN
                UPDATE events SET hash = h WHERE sk = s.sk AND seq = e.seq;
            END IF;
        END LOOP;
        UPDATE session_heads SET head_hash = h WHERE sk = s.sk;
    END LOOP;
END $$;
