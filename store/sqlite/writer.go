package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// Request states: a request is pending until the writer takes it into a transaction or its
// caller gives up on it, whichever happens first.
const (
	statePending int32 = iota
	stateTaken
	stateCancelled
)

// request is one unit of work for the writer: an append, or a session write (op).
type request struct {
	ctx   context.Context
	state atomic.Int32
	done  chan struct{} // closed when the writer has answered

	sessionID string
	events    []*contract.EncodedEvent
	opts      store.AppendOptions
	op        func(w *writer) error // a session write; nil for an append

	// answer
	results []store.AppendResult
	err     error
	commit  *store.Commit

	// the session's new last sequence, applied to the writer's cache once the request's
	// savepoint is released
	sess     *sessState
	newLast  int64
	inserted []insertedEvent // the events r inserted, for the open generation's hashes
}

// sessState is the writer's cached view of a session: its key and the last sequence of its log
// as of the writer's current transaction, and the filters of its sealed generations.
type sessState struct {
	sk   int64
	last int64

	filters []*bloom // filters[g]: generation g's keys and ids, nil until needed (generation.go)
	used    uint64   // the writer's group count when the session was last appended to

	// The key and id hashes of the events of generation openGen, complete when openLive
	// (the list started with the generation's first event; generation.go).
	open     []uint64
	openGen  int64
	openLive bool
}

// fatalError marks a database failure that leaves the group's transaction in doubt: the whole
// group is rolled back and every request in it fails.
type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }
func (e *fatalError) Unwrap() error { return e.err }

func fatal(what string, err error) error {
	return &fatalError{fmt.Errorf("%s: %w", what, err)}
}

// writer owns the store's only write connection. It runs in its own goroutine and is the only
// code that touches conn, st and cache.
type writer struct {
	s     *Store
	conn  *sql.Conn
	st    writeStmts
	cache map[string]*sessState
	ctx   context.Context
	bits  uint // generation size: 2^bits sequences (generation.go)

	groups      uint64 // groups committed or attempted so far
	filterBytes int    // memory held by the filters and open lists of the cached sessions
	evictedTo   int    // filterBytes after the last eviction (generation.go)

	// work since the checkpointer was last asked to run
	commits, events int
}

func newWriter(ctx context.Context, s *Store) (*writer, error) {
	conn, err := s.wdb.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("open store: writer connection: %w", err)
	}
	w := &writer{s: s, conn: conn, cache: map[string]*sessState{}, ctx: context.Background(), bits: s.bits}
	if err := w.st.prepare(ctx, conn); err != nil {
		conn.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	return w, nil
}

// run serves requests until the request channel is closed.
func (w *writer) run() {
	defer close(w.s.writerDone)
	defer close(w.s.syncq)
	defer w.conn.Close()
	defer w.st.close()
	group := make([]*request, 0, maxGroupRequests)
	for {
		r, ok := <-w.s.reqs
		if !ok {
			return
		}
		group = append(group[:0], r)
		events := len(r.events)
		open := true
	drain:
		for len(group) < maxGroupRequests && events < maxGroupEvents {
			select {
			case r, ok := <-w.s.reqs:
				if !ok {
					open = false
					break drain
				}
				group = append(group, r)
				events += len(r.events)
			default:
				break drain
			}
		}
		w.commitGroup(group)
		clear(group)
		if !open {
			return
		}
	}
}

// commitGroup runs the requests of group in one transaction, a savepoint each, and commits
// once; the syncer answers them once the commit is synced (durable.go). Subscribers hear of
// each append that added events, in order, before its caller is answered. A request that
// fails before the commit is answered here.
func (w *writer) commitGroup(group []*request) {
	taken := group[:0]
	for _, r := range group {
		if err := r.ctx.Err(); err != nil {
			if r.state.CompareAndSwap(statePending, stateCancelled) {
				r.err = err
				close(r.done)
			}
			continue
		}
		if r.state.CompareAndSwap(statePending, stateTaken) {
			taken = append(taken, r)
		}
	}
	if len(taken) == 0 {
		return
	}
	if err := w.s.dur.err(); err != nil {
		// Nothing more is written after a failed sync (durable.go).
		w.failAll(taken, fmt.Errorf("the store is unusable after a failed sync; restart sessiond: %w", err))
		return
	}
	w.groups++
	if err := w.exec(`BEGIN IMMEDIATE`); err != nil {
		w.failAll(taken, fatal("begin transaction", err))
		return
	}
	for _, r := range taken {
		if err := w.exec(`SAVEPOINT req`); err != nil {
			w.abort(taken, fatal("savepoint", err))
			return
		}
		var err error
		if r.op != nil {
			err = r.op(w)
		} else {
			err = w.appendEvents(r)
		}
		var fe *fatalError
		if errors.As(err, &fe) {
			w.abort(taken, err)
			return
		}
		if err != nil {
			r.err = err
			r.results, r.commit, r.sess = nil, nil, nil
			if rerr := w.exec(`ROLLBACK TO req`); rerr != nil {
				w.abort(taken, fatal("roll back to savepoint", rerr))
				return
			}
		}
		if rerr := w.exec(`RELEASE req`); rerr != nil {
			w.abort(taken, fatal("release savepoint", rerr))
			return
		}
		if r.err == nil && r.sess != nil {
			r.sess.last = r.newLast
			if err := w.noteInserted(r.sess, r.inserted); err != nil {
				w.abort(taken, err)
				return
			}
		}
	}
	n := w.s.dur.committing.Add(1)
	if err := w.exec(`COMMIT`); err != nil {
		w.abort(taken, fatal("commit", err))
		w.s.syncq <- committed{n: n}
		return
	}
	w.commits++
	for _, r := range taken {
		if r.commit != nil {
			w.events += len(r.commit.Events)
		}
	}
	if w.commits >= ckptEveryCommits || w.events >= ckptEveryEvents {
		w.commits, w.events = 0, 0
		w.s.kickCheckpointer()
	}
	// The syncer answers the callers once the commit is durable (durable.go).
	w.s.syncq <- committed{n: n, group: append([]*request(nil), taken...)}
}

// abort rolls the group's transaction back and fails every request of it. The cache is
// dropped: it may hold sequences of the rolled back transaction.
func (w *writer) abort(group []*request, err error) {
	_ = w.exec(`ROLLBACK`)
	w.failAll(group, err)
}

func (w *writer) failAll(group []*request, err error) {
	clear(w.cache)
	w.filterBytes, w.evictedTo = 0, 0
	for _, r := range group {
		r.results, r.commit = nil, nil
		if r.err == nil {
			r.err = err
		} else {
			r.err = fmt.Errorf("%w (and the group's transaction failed: %v)", r.err, err)
		}
		close(r.done)
	}
}

func (w *writer) exec(q string) error {
	_, err := w.conn.ExecContext(w.ctx, q)
	return err
}

// session returns the cached state of a session, loading it on first use; nil when there is no
// such session.
func (w *writer) session(id string) (*sessState, error) {
	if ss := w.cache[id]; ss != nil {
		return ss, nil
	}
	ss := &sessState{}
	err := w.st.sessionSeq.QueryRowContext(w.ctx, id).Scan(&ss.sk, &ss.last)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fatal("look up session", err)
	}
	w.cache[id] = ss
	return ss, nil
}

// appendEvents appends r's batch inside the current savepoint. A returned error that is not a
// *fatalError is the request's answer and the caller rolls the savepoint back.
func (w *writer) appendEvents(r *request) error {
	ss, err := w.session(r.sessionID)
	if err != nil {
		return err
	}
	if ss == nil {
		return fmt.Errorf("append to session %q: %w", r.sessionID, store.ErrSessionNotFound)
	}
	ss.used = w.groups
	sealed := w.sealed(ss)
	events := r.events
	results := make([]store.AppendResult, len(events))
	datas := make([][]byte, len(events)) // the stored bytes each event was matched with
	var byKey, byID map[string]int
	if len(events) > 1 {
		byKey = make(map[string]int, len(events))
		byID = make(map[string]int, len(events))
	}

	if exp := r.opts.ExpectedSequence; exp != nil && *exp != ss.last {
		// The log has moved: refuse, unless every event is already stored (a retry of an
		// append that succeeded), in which case the answer is the duplicates. An empty batch
		// is a bare precondition check and fails.
		if len(events) == 0 {
			return &store.SequenceConflictError{SessionID: r.sessionID, Expected: *exp, Actual: ss.last}
		}
		for i, ev := range events {
			if j, ok := byKey[ev.IdempotencyKey]; ok && ev.SameContent(datas[j]) {
				results[i] = store.AppendResult{EventID: ev.EventID, Sequence: results[j].Sequence, Duplicate: true}
				datas[i] = datas[j]
				continue
			}
			seq, data, found, err := w.findKey(ss, ev.IdempotencyKey, sealed, 0, w.gen(ss.last))
			if err != nil {
				return err
			}
			if !found || !ev.SameContent(data) {
				return &store.SequenceConflictError{SessionID: r.sessionID, Expected: *exp, Actual: ss.last}
			}
			results[i] = store.AppendResult{EventID: ev.EventID, Sequence: seq, Duplicate: true}
			datas[i] = data
			if byKey != nil {
				byKey[ev.IdempotencyKey] = i
			}
		}
		r.results = results
		return nil
	}

	next := ss.last + 1
	var added []store.StoredEvent
	for i, ev := range events {
		if byKey != nil {
			if j, ok := byKey[ev.IdempotencyKey]; ok {
				if !ev.SameContent(datas[j]) {
					return &store.ConflictError{Index: i, Reason: store.ConflictIdempotencyKey, EventID: ev.EventID, IdempotencyKey: ev.IdempotencyKey, Existing: results[j].Sequence}
				}
				results[i] = store.AppendResult{EventID: ev.EventID, Sequence: results[j].Sequence, Duplicate: true}
				datas[i] = datas[j]
				continue
			}
			if j, ok := byID[ev.EventID]; ok {
				return &store.ConflictError{Index: i, Reason: store.ConflictEventID, EventID: ev.EventID, IdempotencyKey: ev.IdempotencyKey, Existing: results[j].Sequence}
			}
			byKey[ev.IdempotencyKey] = i
			byID[ev.EventID] = i
		}
		data := ev.JSON(next)
		if len(data) > store.MaxEventBytes {
			return &store.LimitError{What: "event", Index: i, Limit: store.MaxEventBytes, Got: len(data)}
		}
		// The unique indexes cover the event's own generation; the earlier ones are looked
		// up first (generation.go), then the insert finds what the current one holds.
		g := w.gen(next)
		hk, hi := keyHash('k', ev.IdempotencyKey), keyHash('i', ev.EventID)
		var dup bool
		if g > 0 {
			if dup, err = w.checkStored(ss, i, ev, hk, hi, sealed, 0, g-1, results, datas); err != nil {
				return err
			}
			if dup {
				continue
			}
		}
		res, err := w.st.insertEvent.ExecContext(w.ctx, ss.sk, next, g, ev.EventID, ev.IdempotencyKey, ev.EventType, ev.RunID, data)
		if err != nil {
			return fatal("insert event", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fatal("insert event", err)
		}
		if n == 0 {
			// A uniqueness constraint held: the key or the eventId is already in this
			// generation.
			if dup, err = w.checkStored(ss, i, ev, hk, hi, sealed, g, g, results, datas); err != nil {
				return err
			}
			if dup {
				continue
			}
			return fatal("insert event", fmt.Errorf("sequence %d of session %q is already taken; the writer's view of the log is out of step", next, r.sessionID))
		}
		results[i] = store.AppendResult{EventID: ev.EventID, Sequence: next}
		datas[i] = data
		r.inserted = append(r.inserted, insertedEvent{seq: next, key: hk, id: hi})
		added = append(added, store.StoredEvent{Sequence: next, EventID: ev.EventID, IdempotencyKey: ev.IdempotencyKey, EventType: ev.EventType, RunID: ev.RunID, Data: data})
		next++

		if ev.RunStatus != nil {
			if err := w.applyRunStatus(ss.sk, r.sessionID, i, ev.RunStatus); err != nil {
				return err
			}
		}
	}
	r.results = results
	if len(added) == 0 {
		return nil
	}
	if _, err := w.st.setLastSeq.ExecContext(w.ctx, next-1, ss.sk); err != nil {
		return fatal("update last sequence", err)
	}
	if err := w.heartbeat(ss.sk, r.opts); err != nil {
		return err
	}
	if cr := r.opts.CommandResult; cr != nil {
		if _, err := w.conn.ExecContext(w.ctx, `INSERT INTO command_results (sk, idem_key, result) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, ss.sk, cr.Key, cr.Result); err != nil {
			return fatal("store command result", err)
		}
	}
	r.sess, r.newLast = ss, next-1
	r.commit = &store.Commit{SessionID: r.sessionID, LastSequence: next - 1, Events: added}
	return nil
}

// applyRunStatus folds the run status event at index i into the run table, inside the current
// transaction, so that later events of the batch and later appends of the group see the result.
// A refused event is answered with a *store.RunError.
func (w *writer) applyRunStatus(sk int64, sessionID string, i int, f *contract.RunStatusFields) error {
	prev, err := w.loadRun(w.st.runByID, sk, f.RunID)
	if err != nil {
		return err
	}
	if prev == nil {
		active, err := w.loadRun(w.st.activeRun, sk)
		if err != nil {
			return err
		}
		if err := contract.CheckNewRun(active, *f); err != nil {
			return &store.RunError{Index: i, Err: err}
		}
	}
	run, err := contract.ApplyRunStatus(prev, sessionID, *f)
	if err != nil {
		return &store.RunError{Index: i, Err: err}
	}
	data, err := json.Marshal(run)
	if err != nil {
		return fmt.Errorf("store run %q: %w", f.RunID, err)
	}
	if _, err := w.st.upsertRun.ExecContext(w.ctx, sk, f.RunID, run.Status, data); err != nil {
		return fatal("store run", err)
	}
	return nil
}

// checkStored looks event i of r (its key and id hashing to hk and hid) up in generations lo
// to hi of the log: a stored event with its idempotency key makes it a duplicate (results[i]
// and datas[i] are set and dup is true) or, with other content, a conflict; a stored event
// with its eventId is a conflict.
func (w *writer) checkStored(ss *sessState, i int, ev *contract.EncodedEvent, hk, hid uint64, sealed, lo, hi int64, results []store.AppendResult, datas [][]byte) (dup bool, err error) {
	seq, stored, keyFound, idSeq, idFound, err := w.findStored(ss, ev.IdempotencyKey, ev.EventID, hk, hid, sealed, lo, hi)
	switch {
	case err != nil:
		return false, err
	case keyFound && !ev.SameContent(stored):
		return false, &store.ConflictError{Index: i, Reason: store.ConflictIdempotencyKey, EventID: ev.EventID, IdempotencyKey: ev.IdempotencyKey, Existing: seq}
	case keyFound:
		results[i] = store.AppendResult{EventID: ev.EventID, Sequence: seq, Duplicate: true}
		datas[i] = stored
		return true, nil
	case idFound:
		return false, &store.ConflictError{Index: i, Reason: store.ConflictEventID, EventID: ev.EventID, IdempotencyKey: ev.IdempotencyKey, Existing: idSeq}
	}
	return false, nil
}

// loadRun loads the run stmt selects, as the current transaction sees it; nil when there is none.
func (w *writer) loadRun(stmt *sql.Stmt, args ...any) (*contract.Run, error) {
	var data []byte
	err := stmt.QueryRowContext(w.ctx, args...).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fatal("load run", err)
	}
	var r contract.Run
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fatal("load run", fmt.Errorf("stored run %s: %w", data, err))
	}
	return &r, nil
}

// writeStmts are the writer's prepared statements, all on its one connection.
type writeStmts struct {
	sessionSeq, insertEvent, eventByKey, eventByID, genKeys, genIDs, loadFilter, storeFilter, runByID, activeRun, upsertRun, setLastSeq *sql.Stmt
	insertSession, sessionRow, updateSession, heartbeat                                                                                 *sql.Stmt
	all                                                                                                                                 []*sql.Stmt
}

func (st *writeStmts) prepare(ctx context.Context, conn *sql.Conn) error {
	for _, p := range []struct {
		s **sql.Stmt
		q string
	}{
		{&st.sessionSeq, `SELECT sk, last_seq FROM sessions WHERE id = ?`},
		{&st.insertEvent, `INSERT INTO events (sk, seq, gen, event_id, idem_key, event_type, run_id, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`},
		{&st.eventByKey, `SELECT seq, data FROM events WHERE sk = ? AND gen = ? AND idem_key = ?`},
		{&st.eventByID, `SELECT seq FROM events WHERE sk = ? AND gen = ? AND event_id = ?`},
		{&st.genKeys, `SELECT idem_key FROM events WHERE sk = ? AND gen = ?`},
		{&st.genIDs, `SELECT event_id FROM events WHERE sk = ? AND gen = ?`},
		{&st.loadFilter, `SELECT bits FROM event_filters WHERE sk = ? AND gen = ?`},
		{&st.storeFilter, `INSERT OR REPLACE INTO event_filters (sk, gen, bits) VALUES (?, ?, ?)`},
		{&st.runByID, `SELECT data FROM runs WHERE sk = ? AND run_id = ?`},
		{&st.activeRun, `SELECT data FROM runs WHERE sk = ? AND status NOT IN ('stopped', 'completed', 'failed') ORDER BY ord LIMIT 1`},
		{&st.upsertRun, `INSERT INTO runs (sk, run_id, ord, status, data) VALUES (?1, ?2, (SELECT COALESCE(MAX(ord), -1) + 1 FROM runs WHERE sk = ?1), ?3, ?4) ON CONFLICT (sk, run_id) DO UPDATE SET status = excluded.status, data = excluded.data`},
		{&st.setLastSeq, `UPDATE sessions SET last_seq = ? WHERE sk = ?`},
		{&st.insertSession, `INSERT INTO sessions (id, status, agent_id, project, record, snapshot, lineage, active_branch) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`},
		{&st.sessionRow, `SELECT ` + sessionCols + ` FROM sessions WHERE id = ?`},
		{&st.updateSession, `UPDATE sessions SET status = ?, agent_id = ?, project = ?, record = ?, snapshot = ?, lineage = ?, active_branch = ? WHERE sk = ?`},
		{&st.heartbeat, qHeartbeat},
	} {
		s, err := conn.PrepareContext(ctx, p.q)
		if err != nil {
			st.close()
			return fmt.Errorf("prepare %q: %w", p.q, err)
		}
		*p.s = s
		st.all = append(st.all, s)
	}
	return nil
}

func (st *writeStmts) close() {
	for _, s := range st.all {
		s.Close()
	}
	st.all = nil
}
