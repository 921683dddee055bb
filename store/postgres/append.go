package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
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
	qLockSession = `SELECT sk, last_seq FROM sessions WHERE id = $1 FOR NO KEY UPDATE`
	qExisting    = `SELECT seq, event_id, idem_key, data FROM events
		WHERE sk = (SELECT sk FROM sessions WHERE id = $1) AND (idem_key = ANY($2) OR event_id = ANY($3))`
	qRuns = `SELECT run_id, ord, data FROM runs
		WHERE sk = (SELECT sk FROM sessions WHERE id = $1) AND (run_id = ANY($2) OR active)`
	qMaxOrd       = `SELECT COALESCE(MAX(ord), -1) FROM runs WHERE sk = (SELECT sk FROM sessions WHERE id = $1)`
	qInsertEvents = `INSERT INTO events (sk, seq, event_id, idem_key, event_type, run_id, data)
		SELECT $1, u.* FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bytea[]) AS u`
	qUpsertRuns = `INSERT INTO runs (sk, run_id, ord, active, data)
		SELECT $1, u.run_id, u.ord, u.active, u.data::json
		FROM unnest($2::text[], $3::integer[], $4::boolean[], $5::text[]) AS u (run_id, ord, active, data)
		ON CONFLICT (sk, run_id) DO UPDATE SET active = excluded.active, data = excluded.data`
	qSetLast = `UPDATE sessions SET last_seq = $2, commit_xid = pg_current_xact_id() WHERE sk = $1`
)

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
// found by one lookup while the lock is held, and the unique constraints on (session,
// idempotency key) and (session, eventId) back that up. The run projection and the session's
// commit_xid are updated in the same transaction. Other instances are told after the commit
// (see the package documentation: a NOTIFY inside the appending transaction would serialize
// every commit of the database on PostgreSQL's notification lock).
//
// ctx: if ctx ends before the append holds its session's lock, nothing is written and Append
// returns ctx's error. From then on the append runs to its commit whatever ctx does (bounded by
// a 30-second timeout), so that the answer never hides a write. If the connection fails
// (server restart, dropped connection, failover), Append tries again, up to four times in all,
// with the same batch: idempotency keys make this safe, and a batch that the lost attempt did
// commit is then answered with its stored sequences marked as duplicates. An error returned
// after such failures means the batch may or may not be stored; retrying it with the same
// idempotency keys is always safe.
func (s *Store) Append(ctx context.Context, sessionID string, events []*contract.EncodedEvent, opts store.AppendOptions) ([]store.AppendResult, error) {
	if len(events) > store.MaxBatchEvents {
		return nil, fmt.Errorf("append to session %q: %w", sessionID, &store.LimitError{What: "batch", Limit: store.MaxBatchEvents, Got: len(events)})
	}
	for i, ev := range events {
		if ev == nil {
			return nil, fmt.Errorf("append to session %q: event %d is nil", sessionID, i)
		}
		if ev.SessionID != sessionID {
			return nil, fmt.Errorf("append to session %q: %w", sessionID, &store.SessionMismatchError{Index: i, SessionID: sessionID, EventSID: ev.SessionID})
		}
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
	err := retry(ctx, appendAttempts, func() error {
		var err error
		out, final, err = s.appendOnce(ctx, sessionID, events, opts)
		return err
	})
	if err == nil {
		err = final
	}
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return nil, fmt.Errorf("append to session %q: %w", sessionID, err)
	}
	if out.added > 0 {
		s.deliver(sessionID, out.last)
		s.notifier.add(sessionID, out.sk, out.last)
	}
	return out.results, nil
}

// appendOutcome is what a committed append did.
type appendOutcome struct {
	results []store.AppendResult
	added   int   // events written
	last    int64 // the log's last sequence after the append
	sk      int64 // the session's internal key
}

// existingEvent is an event already in the log that the batch names by key or eventId.
type existingEvent struct {
	seq  int64
	data []byte
}

// runState is a run of the session as the append sees it.
type runState struct {
	run   *contract.Run
	ord   int32
	dirty bool // changed by this batch: to be written
}

// appendOnce runs the append in one transaction. final is the append's answer when the batch is
// refused (a typed store error), err a database failure that a new try may overcome.
func (s *Store) appendOnce(ctx context.Context, sid string, events []*contract.EncodedEvent, opts store.AppendOptions) (out appendOutcome, final, err error) {
	// BEGIN and COMMIT travel in the two pipelined batches, so an append costs two round
	// trips. A connection released inside a transaction (after a failure the ROLLBACK could not
	// fix) is destroyed by the pool, never reused.
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return out, nil, fmt.Errorf("acquire a connection: %w", err)
	}
	defer conn.Release()
	inTx := false
	defer func() {
		if inTx {
			rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, _ = conn.Exec(rctx, "ROLLBACK")
			cancel()
		}
	}()

	// Round trip 1: lock the session, then find the stored events and runs the batch names.
	keys := make([]string, len(events))
	ids := make([]string, len(events))
	var runIDs []string
	seenRun := map[string]bool{}
	for i, ev := range events {
		keys[i], ids[i] = ev.IdempotencyKey, ev.EventID
		if ev.RunStatus != nil && !seenRun[ev.RunID] {
			seenRun[ev.RunID] = true
			runIDs = append(runIDs, ev.RunID)
		}
	}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(qLockSession, sid)
	if len(events) > 0 {
		b.Queue(qExisting, sid, keys, ids)
	}
	if len(runIDs) > 0 {
		b.Queue(qRuns, sid, runIDs)
		b.Queue(qMaxOrd, sid)
	}
	inTx = true
	br := conn.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return out, nil, fmt.Errorf("begin transaction: %w", err)
	}
	var sk, last int64
	if err := br.QueryRow().Scan(&sk, &last); err != nil {
		br.Close()
		if errors.Is(err, pgx.ErrNoRows) {
			return out, store.ErrSessionNotFound, nil
		}
		return out, nil, fmt.Errorf("lock session: %w", err)
	}
	byKeyDB := map[string]existingEvent{}
	byIDDB := map[string]int64{}
	if len(events) > 0 {
		rows, _ := br.Query()
		for rows.Next() {
			var e existingEvent
			var id, key string
			if err := rows.Scan(&e.seq, &id, &key, &e.data); err != nil {
				rows.Close()
				br.Close()
				return out, nil, fmt.Errorf("look up stored events: %w", err)
			}
			byKeyDB[key] = e
			byIDDB[id] = e.seq
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			br.Close()
			return out, nil, fmt.Errorf("look up stored events: %w", err)
		}
	}
	runs := map[string]*runState{}
	var maxOrd int32 = -1
	if len(runIDs) > 0 {
		rows, _ := br.Query()
		for rows.Next() {
			var id string
			var rs runState
			var data []byte
			if err := rows.Scan(&id, &rs.ord, &data); err != nil {
				rows.Close()
				br.Close()
				return out, nil, fmt.Errorf("load runs: %w", err)
			}
			rs.run = new(contract.Run)
			if err := json.Unmarshal(data, rs.run); err != nil {
				rows.Close()
				br.Close()
				return out, fmt.Errorf("decode stored run %q: %w", id, err), nil
			}
			runs[id] = &rs
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			br.Close()
			return out, nil, fmt.Errorf("load runs: %w", err)
		}
		if err := br.QueryRow().Scan(&maxOrd); err != nil {
			br.Close()
			return out, nil, fmt.Errorf("load runs: %w", err)
		}
	}
	if err := br.Close(); err != nil {
		return out, nil, fmt.Errorf("look up stored events: %w", err)
	}

	// Decide every event while holding the lock: the log cannot move under us.
	results := make([]store.AppendResult, len(events))
	datas := make([][]byte, len(events)) // the stored bytes each event was matched with
	var byKey, byID map[string]int       // within the batch
	if len(events) > 1 {
		byKey = make(map[string]int, len(events))
		byID = make(map[string]int, len(events))
	}
	if exp := opts.ExpectedSequence; exp != nil && *exp != last {
		// The log has moved: refuse, unless every event is already stored (a retry of an
		// append that succeeded), in which case the answer is the duplicates. An empty batch
		// is a bare precondition check and fails.
		conflict := &store.SequenceConflictError{SessionID: sid, Expected: *exp, Actual: last}
		if len(events) == 0 {
			return out, conflict, nil
		}
		for i, ev := range events {
			if j, ok := byKey[ev.IdempotencyKey]; ok && ev.SameContent(datas[j]) {
				results[i] = store.AppendResult{EventID: ev.EventID, Sequence: results[j].Sequence, Duplicate: true}
				datas[i] = datas[j]
				continue
			}
			e, found := byKeyDB[ev.IdempotencyKey]
			if !found || !ev.SameContent(e.data) {
				return out, conflict, nil
			}
			results[i] = store.AppendResult{EventID: ev.EventID, Sequence: e.seq, Duplicate: true}
			datas[i] = e.data
			if byKey != nil {
				byKey[ev.IdempotencyKey] = i
			}
		}
		return appendOutcome{results: results, last: last}, nil, nil
	}

	next := last + 1
	var ins struct {
		seqs                     []int64
		ids, keys, types, runIDs []string
		datas                    [][]byte
	}
	for i, ev := range events {
		if byKey != nil {
			if j, ok := byKey[ev.IdempotencyKey]; ok {
				if !ev.SameContent(datas[j]) {
					return out, &store.ConflictError{Index: i, Reason: store.ConflictIdempotencyKey, EventID: ev.EventID, IdempotencyKey: ev.IdempotencyKey, Existing: results[j].Sequence}, nil
				}
				results[i] = store.AppendResult{EventID: ev.EventID, Sequence: results[j].Sequence, Duplicate: true}
				datas[i] = datas[j]
				continue
			}
			if j, ok := byID[ev.EventID]; ok {
				return out, &store.ConflictError{Index: i, Reason: store.ConflictEventID, EventID: ev.EventID, IdempotencyKey: ev.IdempotencyKey, Existing: results[j].Sequence}, nil
			}
			byKey[ev.IdempotencyKey] = i
			byID[ev.EventID] = i
		}
		data := ev.JSON(next)
		if len(data) > store.MaxEventBytes {
			return out, &store.LimitError{What: "event", Index: i, Limit: store.MaxEventBytes, Got: len(data)}, nil
		}
		if e, found := byKeyDB[ev.IdempotencyKey]; found {
			if !ev.SameContent(e.data) {
				return out, &store.ConflictError{Index: i, Reason: store.ConflictIdempotencyKey, EventID: ev.EventID, IdempotencyKey: ev.IdempotencyKey, Existing: e.seq}, nil
			}
			results[i] = store.AppendResult{EventID: ev.EventID, Sequence: e.seq, Duplicate: true}
			datas[i] = e.data
			continue
		}
		if seq, found := byIDDB[ev.EventID]; found {
			return out, &store.ConflictError{Index: i, Reason: store.ConflictEventID, EventID: ev.EventID, IdempotencyKey: ev.IdempotencyKey, Existing: seq}, nil
		}
		if ev.RunStatus != nil {
			rs := runs[ev.RunID]
			var prev *contract.Run
			if rs != nil {
				prev = rs.run
			} else {
				// The event creates a run: one active run per session.
				if err := contract.CheckNewRun(activeRun(runs, ev.RunID), *ev.RunStatus); err != nil {
					return out, &store.RunError{Index: i, Err: err}, nil
				}
				maxOrd++
				rs = &runState{ord: maxOrd}
			}
			run, err := contract.ApplyRunStatus(prev, sid, *ev.RunStatus)
			if err != nil {
				return out, &store.RunError{Index: i, Err: err}, nil
			}
			rs.run, rs.dirty = run, true
			runs[ev.RunID] = rs
		}
		results[i] = store.AppendResult{EventID: ev.EventID, Sequence: next}
		datas[i] = data
		ins.seqs = append(ins.seqs, next)
		ins.ids = append(ins.ids, ev.EventID)
		ins.keys = append(ins.keys, ev.IdempotencyKey)
		ins.types = append(ins.types, ev.EventType)
		ins.runIDs = append(ins.runIDs, ev.RunID)
		ins.datas = append(ins.datas, data)
		next++
	}
	if len(ins.seqs) == 0 {
		return appendOutcome{results: results, last: last}, nil, nil
	}

	// Round trip 2: write. From here on the append no longer listens to ctx.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	newLast := next - 1
	b = &pgx.Batch{}
	b.Queue(qInsertEvents, sk, ins.seqs, ins.ids, ins.keys, ins.types, ins.runIDs, ins.datas)
	var rIDs, rDatas []string
	var rOrds []int32
	var rActive []bool
	for _, id := range runIDs {
		rs := runs[id]
		if rs == nil || !rs.dirty {
			continue
		}
		data, err := json.Marshal(rs.run)
		if err != nil {
			return out, fmt.Errorf("encode run %q: %w", id, err), nil
		}
		rIDs = append(rIDs, id)
		rOrds = append(rOrds, rs.ord)
		rActive = append(rActive, !contract.IsTerminal(rs.run.Status))
		rDatas = append(rDatas, string(data))
	}
	if len(rIDs) > 0 {
		b.Queue(qUpsertRuns, sk, rIDs, rOrds, rActive, rDatas)
	}
	b.Queue(qSetLast, sk, newLast)
	queueHeartbeat(b, sk, opts) // lifecycle.go: the append counts as a heartbeat
	if cr := opts.CommandResult; cr != nil {
		b.Queue(`INSERT INTO command_results (sk, idem_key, result) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, sk, cr.Key, cr.Result)
	}
	b.Queue("COMMIT")
	if err := conn.SendBatch(wctx, b).Close(); err != nil {
		// Not committed, or (the connection lost during COMMIT) not known: a new try is
		// safe either way.
		return out, nil, fmt.Errorf("write and commit: %w", err)
	}
	inTx = false
	return appendOutcome{results: results, added: len(ins.seqs), last: newLast, sk: sk}, nil, nil
}

// activeRun returns the session's active run other than except, as the batch leaves it: the
// earliest created one that is not terminal, or nil.
func activeRun(runs map[string]*runState, except string) *contract.Run {
	var best *runState
	for id, rs := range runs {
		if id == except || rs.run == nil || contract.IsTerminal(rs.run.Status) {
			continue
		}
		if best == nil || rs.ord < best.ord {
			best = rs
		}
	}
	if best == nil {
		return nil
	}
	return best.run
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
