package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// qDirect appends an unconditional batch (store.Unconditional) in one statement, its own
// transaction, in one round trip:
//
//   - dup (%[7]s) finds the stored events with the batch's keys or eventIds, probes of the
//     unique indexes (sk, idem_key) and (sk, event_id), so its cost does not depend on the
//     size of the log. A batch of at most maxGroupedEvents events looks up every key and
//     eventId (dupEvery). A larger one looks up its first key, and the other keys and every
//     eventId only when that one is stored (dupFirst): a batch sent again, the common way a
//     batch meets stored events, is then answered from the statement's snapshot, with no lock
//     and no write, and a new batch costs one probe, not one per key and eventId, since its
//     inserts probe the unique indexes anyway: a stored key or eventId of a batch whose first
//     key is new (a rarer mix, or a client's error) fails the insert on its index, which
//     sends the append down the locking path;
//   - lk locks the session's row when nothing is stored (and, for an append with a heartbeat
//     (%[1]s), the session is not stale: reviving it is the locking path's), SKIP LOCKED:
//     when another transaction holds the lock the statement writes nothing (without an error
//     in the server's log) and the append takes the locking path, which waits for the lock
//     while it listens to the caller's context. The row is only locked, never written: the
//     lock is what every writer of the session takes (migration 0009);
//   - upd moves the session's head (session_heads) when the log ends where the driver last saw
//     it end, at sequence $4 with the chain hash %[9]s (headCache): last_seq, the new head
//     hash (%[8]s), commit_xid and the heartbeat (%[2]s), in one update of a narrow row. It
//     compares with the head's latest committed version (an UPDATE re-reads a row that
//     changed after the statement's snapshot), not the snapshot's: the appender that held the
//     lock before may have committed after the snapshot was taken;
//   - ins writes the events at $4+1.., with the bytes ($7) and stored chain hashes ($8, empty
//     where none is stored: store.ChainStored) the driver computed for those sequences from
//     that head (store.ChainEvents): the chain is computed once, in Go, for both paths; and
//     cmd (%[3]s) the command result.
//
// The parameters the plan's costs would depend on (the session's key, the arrays, the
// expected sequence) are given as (SELECT $n), values the planner does not look at, so that a
// plan made for one append's values never looks cheaper than the plan made once for all: the
// server keeps the latter (a generic plan) after its first five executions. Otherwise single
// events (arrays of one) and small sessions of a large table (keys beyond the statistics)
// looked cheaper planned for their own values, and the statement was planned again at every
// append: about 0.5 ms of the server's CPU each time.
//
// It returns one row 'a' with the log's previous last sequence when it wrote the batch, or
// else the stored events found ('d') and the log's last sequence ('s'), from the statement's
// snapshot, for store.PlanAppend to answer (a plan that would add events means the row was
// locked, or moved after the snapshot: the locking path decides). A stored key or eventId that
// dup did not look up (the first key being new), or that was committed after the snapshot,
// before the lock, makes the insert fail on the unique index (the append then takes the
// locking path, and the server logs the unique violation).
var qDirect = `WITH %[7]s%[4]s, lk AS (
	SELECT FROM sessions
	WHERE sk = (SELECT $1::bigint) AND NOT EXISTS (SELECT FROM dup)%[1]s%[5]s
	FOR NO KEY UPDATE SKIP LOCKED
), upd AS (
	UPDATE session_heads SET last_seq = session_heads.last_seq + cardinality($2::text[]), head_hash = (SELECT %[8]s::bytea), commit_xid = pg_current_xact_id()%[2]s
	FROM lk WHERE session_heads.sk = (SELECT $1::bigint) AND session_heads.last_seq = (SELECT $4::bigint) AND session_heads.head_hash = (SELECT %[9]s::bytea)%[6]s
	RETURNING session_heads.last_seq - cardinality($2::text[]) AS prev
), ins AS (
	INSERT INTO events (sk, seq, event_id, idem_key, event_type, run_id, data, hash)
	SELECT $1, upd.prev + u.n, u.id, u.key, u.typ, u.run, u.data, nullif(u.hash, ''::bytea)
	FROM upd, unnest((SELECT $3::text[]), (SELECT $2::text[]), (SELECT $5::text[]), (SELECT $6::text[]), (SELECT $7::bytea[]), (SELECT $8::bytea[]))
		WITH ORDINALITY AS u (id, key, typ, run, data, hash, n)
)%[3]s
SELECT 'a', prev, NULL::text, NULL::text, NULL::bytea FROM upd
UNION ALL SELECT 'd', seq, event_id, idem_key, data FROM dup
UNION ALL SELECT 's', last_seq, NULL, NULL, NULL FROM session_heads WHERE sk = (SELECT $1::bigint) AND NOT EXISTS (SELECT FROM upd)`

// dupEvery and dupFirst are qDirect's lookups: dup finds the stored events with the batch's keys
// or eventIds. dupEvery looks up every key and eventId, a probe each (dupLookup); dupFirst looks
// up the first key, and the others and the eventIds only when that one is stored.
var (
	dupEvery = `dup AS (
	` + dupLookup(`(SELECT $1::bigint)`, `(SELECT $2::text[])::text[]`, `(SELECT $3::text[])::text[]`) + `
)`
	dupFirst = `first AS (
	` + keyProbes(`(SELECT $1::bigint)`, `((SELECT $2::text[])::text[])[1:1]`) + `
), dup AS (
	SELECT * FROM first
	UNION ALL (
		` + keyProbes(`(SELECT $1::bigint)`, `((SELECT $2::text[])::text[])[2:]`) + `
		WHERE EXISTS (SELECT FROM first)
	) UNION ALL (
		` + idProbes(`(SELECT $1::bigint)`, `(SELECT $3::text[])::text[]`) + `
		WHERE EXISTS (SELECT FROM first)
	)
)`
)

// The variants of qDirect, by lookup (dupEvery for a batch of at most maxGroupedEvents events,
// dupFirst for a larger one), heartbeat ($9), command result (the two parameters after) and
// fence (the batch's run ids, the parameter after; see unleasedFence), followed by the new head
// hash and the head hash the batch follows (the last two parameters): for a fenced batch, rl
// locks the rows of the batch's runs (SKIP LOCKED: a claim under way makes the statement
// write nothing, as a locked session does) and the statement writes only when it locked every
// one of them that its snapshot has and none holds a lease, and when no append committed
// between its snapshot and its lock of the session (upd compares the head's latest last
// sequence with the snapshot's): a run created or claimed meanwhile is then in its snapshot.
var qDirects = func() (q [2][2][2][2]string) {
	for first := range 2 {
		for hb := range 2 {
			for c := range 2 {
				for f := range 2 {
					live, set, with, rl, lkCond, updCond := "", "", "", "", "", ""
					if hb == 1 {
						live = " AND status <> 'stale'"
						set = ", heartbeat = $9::text, heartbeat_at = $9::text::timestamptz"
					}
					if c == 1 {
						with = fmt.Sprintf(`, cmd AS (
	INSERT INTO command_results (sk, idem_key, result) SELECT $1, $%d, $%d FROM upd ON CONFLICT DO NOTHING
)`, 9+hb, 10+hb)
					}
					if f == 1 {
						runs := fmt.Sprintf(`FROM runs WHERE sk = (SELECT $1::bigint) AND run_id = ANY((SELECT $%d::text[])::text[])`, 9+hb+2*c)
						rl = `, rl AS (
	SELECT lease_id IS NOT NULL AND lease_expires_ms IS NOT NULL AS leased ` + runs + ` FOR NO KEY UPDATE SKIP LOCKED
)`
						lkCond = ` AND NOT EXISTS (SELECT FROM rl WHERE leased) AND (SELECT count(*) FROM rl) = (SELECT count(*) ` + runs + `)`
						updCond = ` AND session_heads.last_seq = (SELECT h.last_seq FROM session_heads AS h WHERE h.sk = (SELECT $1::bigint))`
					}
					dup := dupEvery
					if first == 1 {
						dup = dupFirst
					}
					head, prevHead := fmt.Sprintf("$%d", 9+hb+2*c+f), fmt.Sprintf("$%d", 10+hb+2*c+f)
					q[first][hb][c][f] = fmt.Sprintf(qDirect, live, set, with, rl, lkCond, updCond, dup, head, prevHead)
				}
			}
		}
	}
	return q
}()

// unleasedFence says whether a fenced append (opts.Fence) may still take the one-statement
// path: it names no lease and no expiry (an append from a client that holds no lease, as the
// HTTP API's without a lease header), and the batch is unconditional but for its events'
// run ids (store.Unconditional without the fence). By rule 3d of store.PlanAppend such a batch
// is refused only when one of its runs holds a lease, which qDirect's fenced variant checks.
func unleasedFence(events []*contract.EncodedEvent, opts store.AppendOptions) bool {
	if opts.Fence == nil || opts.Fence.Lease != nil || !opts.Fence.ExpiredBy.IsZero() {
		return false
	}
	opts.Fence = nil
	return store.Unconditional(events, opts)
}

// appendDirect appends an unconditional batch (store.Unconditional) with qDirect. done says
// that out and final are the append's answer; when it is false the append must take the
// locking path (the session's row is locked by another transaction, the driver does not know
// where its log ends (headCache) or knows it does not end at opts.ExpectedSequence, or the
// batch needs a write that the statement's snapshot could not decide). err is a database
// failure.
func (s *Store) appendDirect(ctx context.Context, sid string, events []*contract.EncodedEvent, opts store.AppendOptions) (out appendOutcome, final error, done bool, err error) {
	c, err := s.directCall(ctx, sid, events, opts)
	if errors.Is(err, store.ErrSessionNotFound) {
		return out, err, true, nil
	}
	if err != nil || c == nil {
		return out, nil, false, err
	}
	// The statement takes the lock at once or fails: from its start it runs to its end
	// whatever ctx does, so that the answer never hides a write.
	if err := ctx.Err(); err != nil {
		return out, err, true, nil
	}
	out, final, done, err = s.group.do(c)
	if out.added > 0 {
		out.head = c.head
	}
	return out, final, done, err
}

// directCall makes the call of qDirect that appends events to session sid after the head the
// driver last saw its log end at (headCache); nil when it knows none, or knows that the log does
// not end at opts.ExpectedSequence: the locking path decides then.
func (s *Store) directCall(ctx context.Context, sid string, events []*contract.EncodedEvent, opts store.AppendOptions) (*directCall, error) {
	sk, err := s.sessionKey(ctx, sid)
	if err != nil {
		return nil, err
	}
	last, prev, known := s.heads.get(sk)
	if !known || (opts.ExpectedSequence != nil && *opts.ExpectedSequence != last) {
		return nil, nil
	}
	n := len(events)
	keys, ids, types, runIDs := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	datas, hashes := make([][]byte, n), make([][]byte, n)
	chain := make([]store.ChainHash, n)
	head := prev
	for i, ev := range events {
		keys[i], ids[i], types[i], runIDs[i] = ev.IdempotencyKey, ev.EventID, ev.EventType, ev.RunID
		datas[i] = ev.JSON(last + 1 + int64(i))
		head = store.ChainNext(head, datas[i])
		chain[i] = head
		hashes[i] = store.ChainStored(last+1+int64(i), &chain[i])
	}
	args := []any{sk, keys, ids, last, types, runIDs, datas, hashes}
	hb, cmd := 0, 0
	if !opts.Heartbeat.IsZero() {
		hb = 1
		args = append(args, contract.FormatTime(opts.Heartbeat))
	}
	if cr := opts.CommandResult; cr != nil {
		cmd = 1
		args = append(args, cr.Key, cr.Result)
	}
	var runs []string // the batch's runs, which a fence checks
	if opts.Fence != nil {
		for _, ev := range events {
			if ev.RunID != "" && !slices.Contains(runs, ev.RunID) {
				runs = append(runs, ev.RunID)
			}
		}
	}
	fenced := 0
	if len(runs) > 0 {
		fenced = 1
		args = append(args, runs)
	}
	args = append(args, chain[n-1][:], prev[:])
	first := 0 // a small batch looks up every key and eventId: its statement's fixed costs outweigh them
	if n > maxGroupedEvents {
		first = 1
	}
	return &directCall{sid: sid, sk: sk, head: head, events: events, opts: opts, q: qDirects[first][hb][cmd][fenced], variant: first<<3 | hb<<2 | cmd<<1 | fenced, args: args}, nil
}

// directCall is one append by qDirect: its statement and, once run, its answer.
type directCall struct {
	sid     string
	sk      int64
	head    store.ChainHash // the head hash after the batch, when the statement writes it
	events  []*contract.EncodedEvent
	opts    store.AppendOptions
	q       string
	variant int // q is qDirects[variant>>3][variant>>2&1][variant>>1&1][variant&1]
	args    []any

	// The answer, as appendDirect returns it; set before done is closed.
	out   appendOutcome
	final error
	ok    bool
	err   error
	done  chan struct{}

	failed bool // the statement failed on the server (its transaction is aborted)
}

// answer reads the rows of c's statement into c's answer.
func (c *directCall) answer(rows pgx.Rows) {
	c.out, c.final, c.ok, c.err = readDirect(rows, c.sid, c.sk, c.events, c.opts)
	var pgErr *pgconn.PgError
	c.failed = errors.As(rows.Err(), &pgErr)
}

// readDirect reads the rows of a qDirect statement: the answer of appendDirect.
func readDirect(rows pgx.Rows, sid string, sk int64, events []*contract.EncodedEvent, opts store.AppendOptions) (out appendOutcome, final error, done bool, err error) {
	lk := &appendLookup{sk: sk, last: -1, byKey: map[string]existingEvent{}, byID: map[string]int64{}, maxOrd: -1}
	wrote := false
	var prev int64
	for rows.Next() {
		var kind string
		var v int64
		var id, key *string
		var data []byte
		if err := rows.Scan(&kind, &v, &id, &key, &data); err != nil {
			rows.Close()
			return out, nil, false, fmt.Errorf("append in one statement: %w", inDoubt(err))
		}
		switch kind {
		case "a":
			wrote, prev = true, v
		case "s":
			lk.last = v
		case "d":
			lk.byKey[*key] = existingEvent{seq: v, data: data}
			lk.byID[*id] = v
		}
	}
	if err := rows.Err(); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == codeUniqueViolation {
			return out, nil, false, nil // nothing written: take the locking path
		}
		return out, nil, false, fmt.Errorf("append in one statement: %w", inDoubt(err))
	}
	return directAnswer(sid, lk, wrote, prev, events, opts)
}

// directAnswer is the answer of a qDirect statement whose rows said whether it wrote the
// batch after the log's last sequence prev, or else what lk holds (the stored events found,
// the last sequence).
func directAnswer(sid string, lk *appendLookup, wrote bool, prev int64, events []*contract.EncodedEvent, opts store.AppendOptions) (out appendOutcome, final error, done bool, err error) {
	if wrote {
		return appendOutcome{results: store.AcceptAll(prev, events), added: len(events), last: prev + int64(len(events)), sk: lk.sk}, nil, true, nil
	}
	// Nothing written: a plan that writes nothing is an answer as of the statement's snapshot
	// (store.PlanAppend); one that would write needs the lock.
	plan, final := store.PlanAppend(sid, lk.last, events, opts, lk)
	if final != nil || len(plan.Added) == 0 {
		return appendOutcome{results: plan.Results, last: lk.last}, final, true, nil
	}
	return out, nil, false, nil
}
