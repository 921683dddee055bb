package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

const (
	// appendAttempts is how many times an append is tried when its connection fails or the
	// server aborts its transaction for a reason that a new try can overcome.
	appendAttempts = 4
	// writeTimeout bounds the write phase of an append (after its session's lock is taken),
	// which runs to its end whatever the caller's context does.
	writeTimeout = 30 * time.Second
)

// Statements of an append. The first one locks the session's row: see Append.
const (
	qLockSession = `SELECT sk, status = 'stale' FROM sessions WHERE id = $1 FOR NO KEY UPDATE`
	// qLastSeq reads the session's last sequence from its head, in a statement of its own
	// after qLockSession: its snapshot, taken once the lock is held, sees the head as the
	// lock's previous holder committed it. (Read in qLockSession's own snapshot it could be
	// older: the lock waits for the previous holder, but only the locked row is read again.)
	qLastSeq = `SELECT last_seq, head_hash FROM session_heads WHERE sk = (SELECT sk FROM sessions WHERE id = $1)`
	qRuns    = `SELECT run_id, ord, data FROM runs
		WHERE sk = (SELECT sk FROM sessions WHERE id = $1) AND (run_id = ANY($2) OR active)`
	qMaxOrd = `SELECT COALESCE(MAX(ord), -1) FROM runs WHERE sk = (SELECT sk FROM sessions WHERE id = $1)`
	// qInsertEvents writes events with their stored chain hashes ($8: empty or NULL for an
	// event whose hash is not stored, store.ChainStored).
	qInsertEvents = `INSERT INTO events (sk, seq, event_id, idem_key, event_type, run_id, data, hash)
		SELECT $1, u.s, u.i, u.k, u.t, u.r, u.d, nullif(u.h, ''::bytea)
		FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bytea[], $8::bytea[]) AS u (s, i, k, t, r, d, h)`
	// qUpsertRuns writes the plan's runs (store.RunWrite). A created run takes its session's
	// project and agent; queued_ms keeps the time the run first became queued, by the
	// database's clock, while it stays queued; a run that is no longer active (EndsLease: a
	// terminal run) loses its lease.
	qUpsertRuns = `INSERT INTO runs (sk, run_id, ord, active, data, attempt, queued_ms, project, agent_id)
		SELECT $1, u.run_id, u.ord, u.active, u.data::json, u.attempt,
			CASE WHEN u.queued THEN (extract(epoch FROM clock_timestamp()) * 1000)::bigint END, s.project, s.agent_id
		FROM unnest($2::text[], $3::integer[], $4::boolean[], $5::text[], $6::integer[], $7::boolean[]) AS u (run_id, ord, active, data, attempt, queued)
		CROSS JOIN (SELECT project, agent_id FROM sessions WHERE sk = $1) AS s
		ON CONFLICT (sk, run_id) DO UPDATE SET active = excluded.active, data = excluded.data,
			queued_ms = CASE WHEN excluded.queued_ms IS NOT NULL THEN COALESCE(runs.queued_ms, excluded.queued_ms) END,
			lease_id = CASE WHEN excluded.active THEN runs.lease_id END,
			lease_expires_ms = CASE WHEN excluded.active THEN runs.lease_expires_ms END`
	// qLeases reads the leases of the runs a fenced append names, and locks their rows until
	// the append ends: a claim (SKIP LOCKED) cannot hand one of them out meanwhile.
	qLeases = `SELECT run_id, lease_id, lease_token, lease_expires_ms FROM runs
		WHERE sk = (SELECT sk FROM sessions WHERE id = $1) AND run_id = ANY($2) FOR NO KEY UPDATE`
	// qActiveLeases reads the leases of the session's active runs for an interrupting append
	// (store.AppendOptions.Interrupt: the current run's lease decides whether the server
	// confirms its stop), locking their rows as qLeases does, so that a claim cannot take the
	// run between the decision and the commit.
	qActiveLeases = `SELECT run_id, lease_id, lease_token, lease_expires_ms FROM runs
		WHERE sk = (SELECT sk FROM sessions WHERE id = $1) AND active FOR NO KEY UPDATE`
	// qSetLast moves the session's head (migration 0009): the last sequence, its chain hash
	// ($4, migration 0011), commit_xid and, when $3 is not NULL, the append's heartbeat
	// (headHeartbeatSet).
	qSetLast = `UPDATE session_heads SET last_seq = $2, head_hash = $4, commit_xid = pg_current_xact_id(),
		` + headHeartbeatSet + ` WHERE sk = $1`
	// headHeartbeatSet records the heartbeat $3 (RFC 3339 text, or NULL for none) on a
	// session's head: reads show it as the record's last_heartbeat_at.
	headHeartbeatSet = `heartbeat = COALESCE($3::text, session_heads.heartbeat),
		heartbeat_at = COALESCE($3::text::timestamptz, session_heads.heartbeat_at)`
)

// qRevive records the heartbeat ($2) of an append to a stale session on the session's row:
// the session runs again (heartbeatSet; a change for the feed). Its trigger then takes the
// heartbeat into the head (migration 0009).
var qRevive = `UPDATE sessions SET ` + strings.ReplaceAll(heartbeatSet, "$HB", "$2::text") + ` WHERE sk = $1`

// qExisting finds the stored events with the batch's keys or eventIds (dupLookup).
var qExisting = dupLookup(`(SELECT sk FROM sessions WHERE id = $1)`, `$2::text[]`, `$3::text[]`)

// dupLookup is the statement that finds the stored events of session sk (an SQL expression)
// with one of the keys or eventIds of the arrays keys and ids: for each key, then each eventId,
// one probe of the unique index (session, key) or (session, eventId), an equality on both of
// its columns that matches at most one row. Its cost is a few pages per key, whatever the size
// of the session and whether the table has statistics. (An OR of the two conditions was
// planned as a scan of the whole session; so was "idem_key = ANY(...)" bounded by the session,
// planned generically on a table without statistics, as a new database's is for its first
// minute: a read of every event of the session at every append.) The OFFSET 0 keeps each probe
// a subquery run per key, which only an index can answer.
func dupLookup(sk, keys, ids string) string {
	return keyProbes(sk, keys) + `
		UNION ALL
		` + idProbes(sk, ids)
}

// keyProbes is the query of the stored events of session sk with one of the keys of the array
// keys: one probe of (session, key) per key (dupLookup).
func keyProbes(sk, keys string) string {
	return `SELECT e.* FROM unnest(` + keys + `) AS k (v), LATERAL (
			SELECT seq, event_id, idem_key, data FROM events WHERE sk = ` + sk + ` AND idem_key = k.v OFFSET 0) AS e`
}

// idProbes is keyProbes for the eventIds of the array ids and the index (session, eventId).
func idProbes(sk, ids string) string {
	return `SELECT e.* FROM unnest(` + ids + `) AS k (v), LATERAL (
			SELECT seq, event_id, idem_key, data FROM events WHERE sk = ` + sk + ` AND event_id = k.v OFFSET 0) AS e`
}

// Append adds events to the session's log as documented on store.Store: atomically, durably
// (the commit is flushed, as synchronous_commit=on does, before Append returns), each new event
// taking the next sequence and each repeat of a stored idempotency key answered as a duplicate.
// The bytes stored for an event are ev.JSON(sequence).
//
// Sequences are assigned inside the appending transaction, after it has taken the session's
// row lock (SELECT ... FOR NO KEY UPDATE): appenders to one session, through any instance,
// queue on that lock, and each one reads last_seq only once the previous holder has committed
// or rolled back. So appends to a session commit in the order of their sequences, and a reader
// can never see sequence N+1 before N: the transaction that holds N+1 cannot commit before the
// one that holds N. A global sequence (bigserial, nextval) would not give this: two
// transactions take N and N+1 in one order and may commit in the other, and a reader that sees
// N+1 committed and moves its cursor past N misses N for good, the classic gap of
// sequence-based event stores. Appends to different sessions do not wait for each other.
//
// The batch is written with one multi-row INSERT; duplicates and clashing keys or eventIds are
// found by one lookup of the unique indexes on (session, idempotency key) and (session,
// eventId), which also back that lookup up. The run projection and the session's row (last
// sequence, commit_xid, heartbeat) are updated in the same transaction. An unconditional batch
// (store.Unconditional) takes one statement and one round trip when its session's row is free
// (direct.go); otherwise the append locks the row, reads, plans with store.PlanAppend and
// writes in two round trips. Other instances are told after the commit (see the package
// documentation: a NOTIFY inside the appending transaction would serialize every commit of the
// database on PostgreSQL's notification lock).
//
// ctx: if ctx ends before the append holds its session's lock, nothing is written and Append
// returns ctx's error (the one-statement append never waits for the lock: it checks ctx, then
// takes the lock at once or leaves the append to the locking path). From then on the append runs to its commit whatever ctx does (bounded by
// a 30-second timeout), so that the answer never hides a write. If the connection fails
// (server restart, dropped connection, failover), Append tries again, up to four times in all,
// with the same batch: idempotency keys make this safe, and a batch that the lost attempt did
// commit is then answered with its stored sequences marked as duplicates. An error returned
// after such failures means the batch may or may not be stored; retrying it with the same
// idempotency keys is always safe.
func (s *Store) Append(ctx context.Context, sessionID string, events []*contract.EncodedEvent, opts store.AppendOptions) ([]store.AppendResult, error) {
	if err := store.CheckBatch(sessionID, events); err != nil {
		return nil, err
	}
	if err := s.enter(); err != nil {
		return nil, fmt.Errorf("append to session %q: %w", sessionID, err)
	}
	defer s.inflight.Done()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("append to session %q: %w", sessionID, err)
	}
	var (
		out   appendOutcome
		final error // the append's answer: a typed store error; never retried
	)
	doubt := false // an attempt may have committed
	err := retry(ctx, appendAttempts, func() error {
		var err error
		out, final, err = s.appendOnce(ctx, sessionID, events, opts)
		var de *doubtError
		doubt = doubt || errors.As(err, &de)
		return err
	})
	if err == nil {
		err = final
	} else if doubt {
		// A later attempt could not reach the database, or found it refusing: the answer
		// must still say that an earlier one may have committed.
		err = store.Unavailable(store.CommitUnknown, err)
	}
	if err != nil || out.changed {
		// After the commit: the changes it recorded (a run's status, a stale session running
		// again) get their numbers (changes.go). After a failure too: an attempt may have
		// committed.
		s.kickChanges()
	}
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return nil, fmt.Errorf("append to session %q: %w", sessionID, err)
	}
	if out.added > 0 {
		s.heads.put(out.sk, out.last, out.head)
		s.deliver(sessionID, out.last)
		s.notifier.add(sessionID, out.sk, out.last)
	}
	return out.results, nil
}

// appendOutcome is what a committed append did.
type appendOutcome struct {
	results []store.AppendResult
	added   int             // events written
	last    int64           // the log's last sequence after the append
	head    store.ChainHash // the chain hash of the event at last (set when added > 0)
	sk      int64           // the session's internal key
	changed bool            // the append may have recorded a change for the change feed
}

// appendOnce runs the append in one transaction. final is the append's answer when the batch is
// refused (a typed store error), err a database failure that a new try may overcome.
func (s *Store) appendOnce(ctx context.Context, sid string, events []*contract.EncodedEvent, opts store.AppendOptions) (out appendOutcome, final, err error) {
	if (store.Unconditional(events, opts) || unleasedFence(events, opts)) && !countsUsage(events) {
		// One statement, one round trip, when the session's row is not locked (direct.go).
		// A batch that adds to the usage rollup takes the locking path (usage.go).
		out, final, done, err := s.appendDirect(ctx, sid, events, opts)
		if done || err != nil {
			return out, final, err
		}
	}
	// The locking path. BEGIN and COMMIT travel in the two pipelined batches, so it costs two
	// round trips. A connection released inside a transaction (after a failure the ROLLBACK
	// could not fix) is destroyed by the pool, never reused.
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return out, nil, fmt.Errorf("acquire a connection: %w", err)
	}
	defer conn.Release()
	inTx := true // from the first batch on, which begins the transaction
	defer func() {
		if inTx {
			rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, _ = conn.Exec(rctx, "ROLLBACK")
			cancel()
		}
	}()

	// Round trip 1: lock the session, then find the stored events and runs the batch names.
	// The decision is taken while holding the lock: the log cannot move under it.
	lk, final, err := readForAppend(ctx, conn.Conn(), sid, events, opts)
	if final != nil || err != nil {
		return out, final, err
	}
	plan, final := store.PlanAppend(sid, lk.last, events, opts, lk)
	if final != nil || len(plan.Added) == 0 {
		return appendOutcome{results: plan.Results, last: lk.last}, final, nil
	}

	// Round trip 2: write. From here on the append no longer listens to ctx.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	hashes := store.ChainEvents(lk.head, plan.Added)
	b, final := writeBatch(lk, plan, hashes, opts)
	if final != nil {
		return out, final, nil
	}
	if err := conn.SendBatch(wctx, b).Close(); err != nil {
		// Not committed, or (the connection lost during COMMIT) not known: a new try is
		// safe either way.
		return out, nil, fmt.Errorf("write and commit: %w", inDoubt(err))
	}
	inTx = false
	changed := len(plan.Runs) > 0 || (lk.stale && !opts.Heartbeat.IsZero())
	return appendOutcome{results: plan.Results, added: len(plan.Added), last: plan.Last, head: hashes[len(hashes)-1], sk: lk.sk, changed: changed}, nil, nil
}

// appendLookup answers store.PlanAppend from what round trip 1 read: the session's key and
// last sequence, the stored events with the batch's keys or eventIds, and the stored runs the
// batch names or that are active.
type appendLookup struct {
	sk, last int64
	head     store.ChainHash // the chain hash of the event at last (store/chain.go)
	stale    bool            // the session is stale (a heartbeat makes it running)
	byKey    map[string]existingEvent
	byID     map[string]int64
	runs     map[string]store.StoredRun
	maxOrd   int64                   // the largest stored run order, -1 when the session has no run
	leases   map[string]*store.Lease // the leases held on the runs a fenced append names
}

// existingEvent is an event already in the log that the batch names by key or eventId.
type existingEvent struct {
	seq  int64
	data []byte
}

// StoredKey answers from the events read.
func (lk *appendLookup) StoredKey(key string) (int64, []byte, bool, error) {
	e, ok := lk.byKey[key]
	return e.seq, e.data, ok, nil
}

// Stored answers from the events read: the key first, then the eventId.
func (lk *appendLookup) Stored(ev *contract.EncodedEvent, _ int64, _ []byte) (store.StoredMatch, error) {
	if e, ok := lk.byKey[ev.IdempotencyKey]; ok {
		return store.StoredMatch{KeyFound: true, KeySeq: e.seq, KeyData: e.data}, nil
	}
	if seq, ok := lk.byID[ev.EventID]; ok {
		return store.StoredMatch{IDFound: true, IDSeq: seq}, nil
	}
	return store.StoredMatch{}, nil
}

// Run answers from the runs read: the runs of the batch's run status events, the active runs,
// and, when the fence gives a lease, every run the batch names.
func (lk *appendLookup) Run(runID string) (store.StoredRun, bool, error) {
	r, ok := lk.runs[runID]
	return r, ok, nil
}

// ActiveRuns answers from the runs read, which hold every active run.
func (lk *appendLookup) ActiveRuns() ([]store.StoredRun, error) {
	var out []store.StoredRun
	for _, r := range lk.runs {
		if !contract.IsTerminal(r.Run.Status) {
			out = append(out, r)
		}
	}
	return out, nil
}

// Lease answers from the leases read, which hold every run a fenced append names.
func (lk *appendLookup) Lease(runID string) (*store.Lease, error) { return lk.leases[runID], nil }

// readForAppend begins the transaction on conn, locks the session's row and reads what the
// plan needs (round trip 1). final is store.ErrSessionNotFound or an undecodable stored run, err
// a database failure.
func readForAppend(ctx context.Context, conn *pgx.Conn, sid string, events []*contract.EncodedEvent, opts store.AppendOptions) (lk *appendLookup, final, err error) {
	fence := opts.Fence
	keys := make([]string, len(events))
	ids := make([]string, len(events))
	var runIDs, leaseRuns []string
	seenRun, seenLease := map[string]bool{}, map[string]bool{}
	for i, ev := range events {
		keys[i], ids[i] = ev.IdempotencyKey, ev.EventID
		if ev.RunStatus != nil && !seenRun[ev.RunID] {
			seenRun[ev.RunID] = true
			runIDs = append(runIDs, ev.RunID)
		}
		if fence != nil && ev.RunID != "" && !seenLease[ev.RunID] {
			seenLease[ev.RunID] = true
			leaseRuns = append(leaseRuns, ev.RunID)
			// A lease given for a run that holds none is refused when the session has the
			// run (rule 3d of store.PlanAppend): the plan asks Run about it.
			if fence.Lease != nil && !seenRun[ev.RunID] {
				seenRun[ev.RunID] = true
				runIDs = append(runIDs, ev.RunID)
			}
		}
	}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(qLockSession, sid)
	b.Queue(qLastSeq, sid)
	if len(events) > 0 {
		b.Queue(qExisting, sid, keys, ids)
	}
	readRuns := len(runIDs) > 0 || opts.Interrupt != nil // an interrupt reads the active runs
	if readRuns {
		b.Queue(qRuns, sid, runIDs)
		b.Queue(qMaxOrd, sid)
	}
	if len(leaseRuns) > 0 {
		b.Queue(qLeases, sid, leaseRuns)
	}
	if opts.Interrupt != nil {
		b.Queue(qActiveLeases, sid)
	}
	br := conn.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return nil, nil, fmt.Errorf("begin transaction: %w", err)
	}
	lk = &appendLookup{byKey: map[string]existingEvent{}, byID: map[string]int64{}, runs: map[string]store.StoredRun{}, maxOrd: -1}
	if err := br.QueryRow().Scan(&lk.sk, &lk.stale); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, store.ErrSessionNotFound, nil
		}
		return nil, nil, fmt.Errorf("lock session: %w", err)
	}
	var head []byte
	if err := br.QueryRow().Scan(&lk.last, &head); err != nil {
		return nil, nil, fmt.Errorf("read the last sequence: %w", err)
	}
	var ok bool
	if lk.head, ok = store.ChainHead(head); !ok {
		return nil, fmt.Errorf("session %q: its head's chain hash is %d bytes, not %d: the store is damaged (run sessiond fsck)", sid, len(head), len(lk.head)), nil
	}
	if len(events) > 0 {
		if err := lk.readEvents(br); err != nil {
			return nil, nil, err
		}
	}
	if readRuns {
		if final, err := lk.readRuns(br); final != nil || err != nil {
			return nil, final, err
		}
	}
	if len(leaseRuns) > 0 {
		if err := lk.readLeases(br); err != nil {
			return nil, nil, err
		}
	}
	if opts.Interrupt != nil {
		if err := lk.readLeases(br); err != nil {
			return nil, nil, err
		}
	}
	if err := br.Close(); err != nil {
		return nil, nil, fmt.Errorf("look up stored events: %w", err)
	}
	return lk, nil, nil
}

// readEvents reads the result of qExisting.
func (lk *appendLookup) readEvents(br pgx.BatchResults) error {
	rows, _ := br.Query()
	defer rows.Close()
	for rows.Next() {
		var e existingEvent
		var id, key string
		if err := rows.Scan(&e.seq, &id, &key, &e.data); err != nil {
			return fmt.Errorf("look up stored events: %w", err)
		}
		lk.byKey[key] = e
		lk.byID[id] = e.seq
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("look up stored events: %w", err)
	}
	return nil
}

// readLeases reads the result of qLeases or qActiveLeases, adding to the leases read.
func (lk *appendLookup) readLeases(br pgx.BatchResults) error {
	rows, _ := br.Query()
	defer rows.Close()
	if lk.leases == nil {
		lk.leases = map[string]*store.Lease{}
	}
	for rows.Next() {
		var runID string
		var id *string
		var token int64
		var exp *int64
		if err := rows.Scan(&runID, &id, &token, &exp); err != nil {
			return fmt.Errorf("load leases: %w", err)
		}
		if id != nil && exp != nil {
			lk.leases[runID] = &store.Lease{LeaseID: *id, Token: token, ExpiresAt: time.UnixMilli(*exp).UTC()}
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load leases: %w", err)
	}
	return nil
}

// readRuns reads the results of qRuns and qMaxOrd.
func (lk *appendLookup) readRuns(br pgx.BatchResults) (final, err error) {
	rows, _ := br.Query()
	defer rows.Close()
	for rows.Next() {
		var id string
		var ord int32
		var data []byte
		if err := rows.Scan(&id, &ord, &data); err != nil {
			return nil, fmt.Errorf("load runs: %w", err)
		}
		r := new(contract.Run)
		if err := json.Unmarshal(data, r); err != nil {
			return fmt.Errorf("decode stored run %q: %w", id, err), nil
		}
		lk.runs[id] = store.StoredRun{Run: r, Ord: int64(ord)}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load runs: %w", err)
	}
	var maxOrd int32
	if err := br.QueryRow().Scan(&maxOrd); err != nil {
		return nil, fmt.Errorf("load runs: %w", err)
	}
	lk.maxOrd = int64(maxOrd)
	return nil, nil
}

// writeBatch builds round trip 2: the plan's events with their stored chain hashes (hashes[i]
// is plan.Added[i]'s; store.ChainStored), their usage rollup (usage.go), its runs, the last
// sequence and head hash, the heartbeat and the command result, and COMMIT. final is a run
// that does not encode.
func writeBatch(lk *appendLookup, plan store.AppendPlan, hashes []store.ChainHash, opts store.AppendOptions) (b *pgx.Batch, final error) {
	n := len(plan.Added)
	seqs := make([]int64, n)
	ids, keys, types, runIDs := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	datas, hs := make([][]byte, n), make([][]byte, n)
	for i, e := range plan.Added {
		seqs[i], ids[i], keys[i], types[i], runIDs[i], datas[i], hs[i] = e.Sequence, e.EventID, e.IdempotencyKey, e.EventType, e.RunID, e.Data, store.ChainStored(e.Sequence, &hashes[i])
	}
	b = &pgx.Batch{}
	b.Queue(qInsertEvents, lk.sk, seqs, ids, keys, types, runIDs, datas, hs)
	if err := queueUsage(b, lk.sk, plan.Added); err != nil {
		return nil, err
	}
	if len(plan.Runs) > 0 {
		rIDs, rDatas := make([]string, len(plan.Runs)), make([]string, len(plan.Runs))
		rOrds, rActive := make([]int32, len(plan.Runs)), make([]bool, len(plan.Runs))
		rAttempts, rQueued := make([]int32, len(plan.Runs)), make([]bool, len(plan.Runs))
		for i, rw := range plan.Runs {
			rAttempts[i], rQueued[i] = int32(max(rw.Attempt, 1)), rw.Queued
			data, err := json.Marshal(rw.Run)
			if err != nil {
				return nil, fmt.Errorf("encode run %q: %w", rw.Run.RunID, err)
			}
			ord := rw.Ord
			if rw.Created {
				ord += lk.maxOrd + 1
			}
			rIDs[i], rOrds[i], rActive[i], rDatas[i] = rw.Run.RunID, int32(ord), !contract.IsTerminal(rw.Run.Status), string(data)
		}
		b.Queue(qUpsertRuns, lk.sk, rIDs, rOrds, rActive, rDatas, rAttempts, rQueued)
	}
	var hb *string // the append counts as a heartbeat (lifecycle.go)
	if !opts.Heartbeat.IsZero() {
		t := contract.FormatTime(opts.Heartbeat)
		hb = &t
	}
	b.Queue(qSetLast, lk.sk, plan.Last, hb, hashes[n-1][:])
	if hb != nil && lk.stale {
		b.Queue(qRevive, lk.sk, *hb)
	}
	if cr := opts.CommandResult; cr != nil {
		b.Queue(`INSERT INTO command_results (sk, idem_key, result) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, lk.sk, cr.Key, cr.Result)
	}
	b.Queue("COMMIT")
	return b, nil
}

// commitPayload is the NOTIFY payload of a commit: "c <lastSeq> <sessionID>", or, for a session
// id too long for PostgreSQL's 8000-byte payload limit, "k <lastSeq> <sk>" (the listener looks
// the id up). Contract session ids are at most 256 code points (1024 bytes), far below it.
func commitPayload(sid string, sk, last int64) string {
	p := "c " + strconv.FormatInt(last, 10) + " " + sid
	if len(p) > maxNotifyPayload {
		return "k " + strconv.FormatInt(last, 10) + " " + strconv.FormatInt(sk, 10)
	}
	return p
}
