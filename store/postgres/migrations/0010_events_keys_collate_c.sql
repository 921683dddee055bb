-- 0010: the events' idempotency keys and eventIds compare as bytes.
--
-- idem_key and event_id had the database's default collation. Unless that is "C" or "POSIX"
-- (a cluster made with a C.UTF-8 or en_US.UTF-8 locale, as most are), every comparison of
-- their two unique indexes went through strcoll, after copying both strings to make them
-- NUL-terminated: an append of 64 random keys compares each of them some twenty times in
-- (sk, idem_key) and as many in (sk, event_id), for its duplicate lookup and again for its
-- inserts, and this was the largest share of the server's CPU on that path. Both columns are
-- only ever compared for equality, which a deterministic collation makes bytewise whatever
-- the collation, so which keys and eventIds match does not change: only the indexes' order
-- does, which no query reads. Changing the collation keeps the table's rows as they are and
-- rebuilds the two unique indexes in the new order.
ALTER TABLE events
    ALTER COLUMN idem_key TYPE text COLLATE "C",
    ALTER COLUMN event_id TYPE text COLLATE "C";
