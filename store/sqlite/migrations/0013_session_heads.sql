-- 0013: session_heads holds each session's last acknowledged sequence, written in the commit of
-- every append that adds events. Before, the last sequence was derived from the event rows
-- alone, so a log that lost its newest rows looked whole (fsck compared the rows with
-- themselves). A narrow table of its own: an append rewrites a few bytes in a page shared by
-- hundreds of sessions, not the session's wide row. The store's last sequence is the highest
-- of this, sessions.last_seq and the rows (lastSeqExpr in store/sqlite/sessions.go).
CREATE TABLE session_heads (
    sk       INTEGER PRIMARY KEY,
    last_seq INTEGER NOT NULL
);
INSERT INTO session_heads (sk, last_seq)
SELECT sk, last FROM (SELECT sessions.sk AS sk, max(sessions.last_seq,
    coalesce((SELECT e.seq FROM events AS e WHERE e.rid >= (sessions.sk << 32) AND e.rid < ((sessions.sk + 1) << 32) ORDER BY e.rid DESC LIMIT 1), -1),
    coalesce((SELECT e.seq FROM event_tail AS e WHERE e.rid >= (sessions.sk << 32) AND e.rid < ((sessions.sk + 1) << 32) ORDER BY e.rid DESC LIMIT 1), -1)) AS last
    FROM sessions) WHERE last >= 0;
