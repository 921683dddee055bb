-- 0014: the hash chain of every session's log (store/chain.go).
--
-- Each event has a hash, SHA-256 over its predecessor's hash and its stored bytes (data), kept in
-- the row of every 16th event (sequences 15, 31, ...: store.ChainMarked), NULL in the others;
-- the session's head carries head_hash, the hash of the event at last_seq, written in the
-- commit of every append with last_seq; base_hash is the hash of the last event a compaction
-- deleted (the predecessor of the first event kept), NULL when none is recorded. SQLite has no
-- SHA-256 of its own: the hashes of the events already stored are computed by the migration's
-- Go step (backfillChains in store/sqlite/migrate.go), in the same transaction.
ALTER TABLE events ADD COLUMN hash BLOB;
ALTER TABLE event_tail ADD COLUMN hash BLOB;
ALTER TABLE session_heads ADD COLUMN head_hash BLOB;
ALTER TABLE session_heads ADD COLUMN base_hash BLOB;
