package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

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

// commitMargin is added to what a COMMIT takes when the writer reckons when to commit before
// a sync ends (commitWait): the time to wake the writer up and hand the commit over.
const commitMargin = 200 * time.Microsecond

// request is one unit of work for the writer: an append, or a session write (op).
type request struct {
	ctx   context.Context
	state atomic.Int32
	done  chan struct{} // closed when the writer has answered

	sessionID string
	events    []*contract.EncodedEvent
	sums      []contentSum // the events' content sums, for the open index (generation.go)
	opts      store.AppendOptions
	op        func(w *writer) error // a session write; nil for an append

	// answer
	results []store.AppendResult
	err     error
	commit  *store.Commit

	// the session's new last sequence, applied to the writer's cache once the request has
	// succeeded
	sess     *sessState
	newLast  int64
	newHead  store.ChainHash // the head hash after r's events (store/chain.go)
	inserted []insertedEvent // the events r inserted, for the open generation's hashes
	hbMs     int64           // the heartbeat r's append stored in the session row; 0 if none
}

// sessState is the writer's cached view of a session: its key and the last sequence of its log
// as of the writer's current transaction, and the filters of its sealed generations.
type sessState struct {
	sk   int64
	last int64
	head store.ChainHash // the chain hash of the event at last (store.ChainGenesis for none)

	filters []*bloom // filters[g]: generation g's keys and ids, nil until needed (generation.go)
	used    uint64   // the writer's group count when the session was last appended to

	// The keys and ids of the open generation (generation.go); nil until the session's first
	// append, and after an eviction. openBytes is what it is counted for in filterBytes.
	open      *openIndex
	openBytes int

	// hbMs is the heartbeat (Unix ms) the writer's own qAppendHeartbeat last stored in the
	// session row, which that write also left not stale; it holds only while hbOps equals the
	// writer's ops (no session write ran since, see appendHeartbeat), 0 when unknown.
	hbMs  int64
	hbOps uint64

	// The lease of run leaseRun as appendLookup.Lease last loaded it: leaseHeld (nil when none
	// is held), leaseFound (false when the session has no such run). It holds only while
	// leaseOps equals the writer's ops and leaseRun is not "": leases change only in session
	// writes (request.op, each counted in ops before and after it runs) and in an append's run
	// writes (appendEvents clears leaseRun before them), and a failed group drops the cache.
	// Every append of the API is fenced, so an event with a runId looked its run's lease up
	// for each append: a query the writer now runs once per run.
	leaseRun   string
	leaseHeld  *store.Lease
	leaseFound bool
	leaseOps   uint64
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
	lk    appendLookup // the lookup of the append being planned
	args  []any        // insertEvents' arguments, kept for the next statement
	bits  uint         // generation size: 2^bits sequences (generation.go)

	tail  tailState // event_tail as the group's transaction holds it (tail.go)
	moved bool      // the group has run its step of the tail's move (moveTail)

	groups      uint64 // groups committed or attempted so far
	ops         uint64 // session writes (request.op) run so far: each may change any session row
	filterBytes int    // memory held by the filters and open lists of the cached sessions
	evictedTo   int    // filterBytes after the last eviction (generation.go)

	changesSeen int64 // the last change sequence handed to the syncer (changes.go)

	sumsPending []*openIndex // the open indexes given content sums in this group (publishSums)

	usage store.UsageRollup // writeUsage's rollup of the append being written

	// the group being run (runGroup): the requests taken into it, their events, whether its
	// transaction is open, and whether a database failure ended it (every request answered)
	taken       []*request
	takenEvents int
	inTx        bool
	broken      bool

	// the sessions whose open index was set in the group, to be shown to readers once it
	// commits (publishOpen)
	unpublished []*sessState

	commitTook time.Duration // what a COMMIT takes, averaged, plus commitMargin
	timer      *time.Timer   // runGroup's wait for the time to commit

	// work since the checkpointer was last asked to run
	commits, events int
	bytes           int // bytes of events committed since the last kick of the checkpointer
	// The WAL file's size is looked at every ckptLookBytes of events (statAt: w.bytes then);
	// walAtKick is its size at the last kick.
	statAt    int
	walAtKick int64
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
	w.taken = make([]*request, 0, maxGroupRequests)
	w.timer = time.NewTimer(time.Hour)
	w.timer.Stop()
	for {
		r, ok := <-w.s.reqs
		if !ok {
			return
		}
		if !w.runGroup(r) {
			return
		}
	}
}

// runGroup runs one group commit: first and the requests queued behind it, in one transaction
// (take). While a sync is in flight the group stays open and takes the requests
// that arrive meanwhile: they could not be synced before that sync ends anyway, and one commit
// per sync writes the pages the commits share (page 1, interior pages, the last change) and
// runs BEGIN, COMMIT and the last-change query once instead of once per commit. The group
// commits shortly before the sync in flight is expected to end, or when it ends (commitWait),
// at once when nothing is being synced (a lone writer waits for nothing), or when it is full.
// It reports false when the request channel was closed.
func (w *writer) runGroup(first *request) bool {
	w.taken, w.takenEvents, w.inTx, w.broken, w.moved = w.taken[:0], 0, false, false, false
	defer func() { clear(w.taken[:cap(w.taken)]) }()
	w.take(first)
	open := true
	for !w.broken && len(w.taken) < maxGroupRequests && w.takenEvents < maxGroupEvents {
		select {
		case r, ok := <-w.s.reqs:
			if open = ok; ok {
				w.take(r)
				continue
			}
		default:
		}
		if !open || !w.inTx {
			break
		}
		// The queue is empty: wait for a request or the time to commit (commitWait).
		ch, deadline, wait := w.s.dur.commitWait(time.Now(), w.commitTook)
		if !wait {
			break
		}
		if !w.moved {
			// The group waits for a sync: its step of the tail's move costs nobody time now.
			if err := w.moveTail(); err != nil {
				w.abort(w.taken, err)
				break
			}
			continue
		}
		var timeout <-chan time.Time
		if !deadline.IsZero() {
			w.timer.Reset(time.Until(deadline))
			timeout = w.timer.C
		}
		w.s.dur.at(hookWriterWait)
		select {
		case r, ok := <-w.s.reqs:
			if open = ok; ok {
				w.take(r)
				continue
			}
		case <-ch:
			continue
		case <-timeout:
		}
		break
	}
	if !w.broken && w.inTx {
		w.commit()
	}
	w.s.dur.at(hookGroupEnd)
	return open
}

// take runs r in the group's transaction, beginning the transaction if r is its first request:
// a session write (request.op) in a savepoint of its own, an append without one (appendEvents
// writes nothing until its plan has succeeded). A request whose context has ended before it is
// taken is answered with the context's error. A database failure aborts the group (w.broken):
// every request taken so far fails. It passes the hook point hookTaken when done.
func (w *writer) take(r *request) {
	defer w.s.dur.at(hookTaken)
	if err := r.ctx.Err(); err != nil {
		if r.state.CompareAndSwap(statePending, stateCancelled) {
			r.err = err
			close(r.done)
		}
		return
	}
	if !r.state.CompareAndSwap(statePending, stateTaken) {
		return
	}
	w.taken = append(w.taken, r)
	w.takenEvents += len(r.events)
	if !w.inTx {
		if err := w.s.dur.err(); err != nil {
			// Nothing more is written after a failed sync (durable.go).
			w.broken = true
			w.failAll(w.taken, unusable(err))
			return
		}
		w.groups++
		if err := w.exec(`BEGIN IMMEDIATE`); err != nil {
			w.broken = true
			w.failAll(w.taken, fatal("begin transaction", err))
			return
		}
		w.inTx = true
	}
	// An append can only fail before it writes anything (appendEvents): it needs no savepoint.
	savepoint := r.op != nil
	if savepoint {
		if err := w.exec(`SAVEPOINT req`); err != nil {
			w.abort(w.taken, fatal("savepoint", err))
			return
		}
	}
	var err error
	tailWrites := w.tail.writes
	if r.op != nil {
		// Counted before and after: what the writer cached about sessions before the op, or
		// while it ran, may be stale now (sessState.hbOps, leaseOps).
		w.ops++
		err = r.op(w)
		w.ops++
	} else {
		err = w.appendEvents(r)
	}
	var fe *fatalError
	if errors.As(err, &fe) {
		w.abort(w.taken, err)
		return
	}
	if err != nil {
		r.err = err
		r.results, r.commit, r.sess = nil, nil, nil
		if savepoint {
			if rerr := w.exec(`ROLLBACK TO req`); rerr != nil {
				w.abort(w.taken, fatal("roll back to savepoint", rerr))
				return
			}
			if w.tail.writes != tailWrites {
				w.tail.known = false // the rolled back write wrote to the tail
			}
		}
	}
	if savepoint {
		if rerr := w.exec(`RELEASE req`); rerr != nil {
			w.abort(w.taken, fatal("release savepoint", rerr))
			return
		}
	}
	if r.err == nil && r.sess != nil {
		r.sess.last, r.sess.head = r.newLast, r.newHead
		if r.hbMs != 0 {
			r.sess.hbMs, r.sess.hbOps = r.hbMs, w.ops
		}
		if err := w.noteInserted(r.sess, r.inserted); err != nil {
			w.abort(w.taken, err)
			return
		}
	}
}

// commit commits the group's transaction and hands it to the syncer, which answers the
// requests once the commit is durable (durable.go). Subscribers hear of each append that
// added events, in order, before its caller is answered.
func (w *writer) commit() {
	taken := w.taken
	if err := w.s.dur.err(); err != nil {
		// A sync failed while the group was open: nothing more is written (durable.go).
		w.abort(taken, unusable(err))
		return
	}
	if !w.moved {
		if err := w.moveTail(); err != nil {
			w.abort(taken, err)
			return
		}
	}
	lastChange, err := w.lastChange()
	if err != nil {
		w.abort(taken, err)
		return
	}
	n := w.s.dur.committing.Add(1)
	w.publishSums()
	start := time.Now()
	if err := w.exec(`COMMIT`); err != nil {
		w.abort(taken, fatal("commit", err))
		w.s.syncq <- committed{n: n}
		return
	}
	w.publishOpen()
	// What a commit takes, averaged (weighted 1/8 to the latest), with a margin for waking
	// the writer up: the writer commits that long before a sync is expected to end.
	took := time.Since(start) + commitMargin
	w.commitTook += (took - w.commitTook) / 8
	w.commits++
	events := 0
	for _, r := range taken {
		if r.commit != nil {
			events += len(r.commit.Events)
			for _, e := range r.commit.Events {
				w.bytes += len(e.Data)
			}
		}
	}
	w.events += events
	if f := w.s.obs.GroupCommitted; f != nil {
		f(len(taken), events)
	}
	kick := w.commits >= ckptEveryCommits || w.events >= ckptEveryEvents || w.bytes >= ckptEveryBytes
	if !kick && w.bytes-w.statAt >= ckptLookBytes {
		// The WAL holds more than the events (index pages, heads, overflow pages): a WAL that
		// grew by ckptEveryWALBytes since the last kick is checkpointed before it fills a disk.
		w.statAt = w.bytes
		kick = w.s.walSize() >= w.walAtKick+ckptEveryWALBytes
	}
	if kick {
		w.commits, w.events, w.bytes, w.statAt = 0, 0, 0, 0
		w.walAtKick = w.s.walSize()
		w.s.kickCheckpointer()
	}
	c := committed{n: n, group: append([]*request(nil), taken...)}
	if lastChange > w.changesSeen {
		c.changes, w.changesSeen = lastChange, lastChange
	}
	w.s.syncq <- c
}

// abort rolls the group's transaction back and fails every request of it. The cache is
// dropped: it may hold sequences of the rolled back transaction.
func (w *writer) abort(group []*request, err error) {
	w.broken = true
	_ = w.exec(`ROLLBACK`)
	w.failAll(group, err)
}

func (w *writer) failAll(group []*request, err error) {
	err = classify(err)
	if why, ok := store.UnavailabilityOf(err); ok && why == store.Full {
		w.s.noteFull(err)
	}
	for _, ss := range w.cache {
		w.dropOpen(ss)
	}
	clear(w.cache)
	clear(w.unpublished)
	w.unpublished = w.unpublished[:0]
	for _, x := range w.sumsPending {
		x.queued = false // dead now (dropOpen above), but not left claiming a place in the list
	}
	clear(w.sumsPending)
	w.sumsPending = w.sumsPending[:0]
	w.filterBytes, w.evictedTo = 0, 0
	w.tail.known = false
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

// exec runs one of the transaction control statements (txControl), prepared once.
func (w *writer) exec(q string) error {
	if st := w.st.control[q]; st != nil {
		_, err := st.ExecContext(w.ctx)
		return err
	}
	_, err := w.conn.ExecContext(w.ctx, q)
	return err
}

// txControl are the statements the writer runs around every group and request: prepared once,
// not parsed again for each.
var txControl = []string{`BEGIN IMMEDIATE`, `COMMIT`, `ROLLBACK`, `SAVEPOINT req`, `RELEASE req`, `ROLLBACK TO req`}

// session returns the cached state of a session, loading it on first use; nil when there is no
// such session.
func (w *writer) session(id string) (*sessState, error) {
	if ss := w.cache[id]; ss != nil {
		return ss, nil
	}
	ss := &sessState{}
	var head []byte
	err := w.st.sessionSeq.QueryRowContext(w.ctx, id).Scan(&ss.sk, &ss.last, &head)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fatal("look up session", err)
	}
	var ok bool
	if ss.head, ok = store.ChainHead(head); !ok || (head == nil && ss.last >= 0) {
		// A log with events and no head hash would chain its next event to the genesis. The
		// request fails alone (nothing is written), not the group.
		return nil, fmt.Errorf("session %q: its head's chain hash is %d bytes at sequence %d, not %d: the store is damaged (run sessiond fsck)", id, len(head), ss.last, len(ss.head))
	}
	w.cache[id] = ss
	return ss, nil
}

// appendEvents appends r's batch: store.PlanAppend decides, asking the writer's lookup (which
// notes each new event, see appendLookup.Stored), and only then are the new events, the runs,
// the heartbeat and the command result written. It writes nothing before it can no longer
// refuse the batch, so it needs no savepoint: a returned error that is not a *fatalError is
// the request's answer and nothing of the request was written (save a sealed generation's
// missing filter a lookup may have stored: derived data, see writer.filter); any error once it
// writes is fatal to the group.
func (w *writer) appendEvents(r *request) error {
	ss, err := w.session(r.sessionID)
	if err != nil {
		return err
	}
	if ss == nil {
		return fmt.Errorf("append to session %q: %w", r.sessionID, store.ErrSessionNotFound)
	}
	ss.used = w.groups
	if _, err := w.openIndex(ss); err != nil {
		return err
	}
	w.lk = appendLookup{w: w, ss: ss, r: r, sealed: w.sealed(ss)}
	plan, err := store.PlanAppend(r.sessionID, ss.last, r.events, r.opts, &w.lk)
	w.lk = appendLookup{}
	if err != nil {
		r.inserted = nil
		return err
	}
	r.results = plan.Results
	if len(plan.Added) == 0 {
		return nil
	}
	// From here on every failure is fatal: the request has no savepoint to roll back to.
	hashes := store.ChainEvents(ss.head, plan.Added)
	if err := w.writeAppend(r, ss, plan, hashes); err != nil {
		return asFatal("append to session "+r.sessionID, err)
	}
	r.sess, r.newLast, r.newHead = ss, plan.Last, hashes[len(hashes)-1]
	r.commit = &store.Commit{SessionID: r.sessionID, LastSequence: plan.Last, Events: plan.Added, Claimable: plan.Claimable()}
	return nil
}

// writeAppend writes what an append's plan decided: its new events, its runs, the heartbeat and
// the command result. Its caller makes any error fatal to the group (asFatal): once the first
// row is written the request cannot be refused alone.
func (w *writer) writeAppend(r *request, ss *sessState, plan store.AppendPlan, hashes []store.ChainHash) error {
	if err := w.insertEvents(r.sessionID, ss.sk, plan.Added, hashes); err != nil {
		return err
	}
	if len(plan.Runs) > 0 {
		ss.leaseRun = "" // the run writes may change a lease (sessState.leaseRun)
	}
	if err := w.writeRuns(ss.sk, plan.Runs, r.opts.Now); err != nil {
		return err
	}
	// The session's head: its last acknowledged sequence and the chain hash of that event, in
	// this commit (lastSeqExpr). The wide session row is written only for a heartbeat that
	// matters (qAppendHeartbeat).
	if _, err := w.st.setHead.ExecContext(w.ctx, ss.sk, plan.Last, hashes[len(hashes)-1][:]); err != nil {
		return fatal("record the session's head", err)
	}
	if err := w.appendHeartbeat(r, ss); err != nil {
		return err
	}
	if cr := r.opts.CommandResult; cr != nil {
		if _, err := w.conn.ExecContext(w.ctx, `INSERT INTO command_results (sk, idem_key, result) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, ss.sk, cr.Key, cr.Result); err != nil {
			return fatal("store command result", err)
		}
	}
	return nil
}

// asFatal returns err as a *fatalError (wrapped with what when it is not one already).
func asFatal(what string, err error) error {
	var fe *fatalError
	if errors.As(err, &fe) {
		return err
	}
	return fatal(what, err)
}

// insertEvents inserts the events an append's plan adds (store.AppendPlan.Added), in sequence
// order, with their chain hashes where they are stored (hashes[i] is evs[i]'s;
// store.ChainStored), up to maxEventsPerInsert in one
// statement (qInsertEvents): a statement per event cost more in binding, stepping and
// resetting it than its row did. It adds their counts to the usage rollup (writeUsage) in the
// same transaction.
func (w *writer) insertEvents(sessionID string, sk int64, evs []store.StoredEvent, hashes []store.ChainHash) error {
	all := evs
	tail, err := w.toTail(sk, evs)
	if err != nil {
		return err
	}
	if tail {
		if err := w.loadTail(); err != nil {
			return err
		}
		w.tail.rows += len(evs)
		w.tail.writes++
	}
	for len(evs) > 0 {
		n := powerOfTwoAtMost(len(evs), maxEventsPerInsert)
		st, err := w.st.insertEventsStmt(w.ctx, w.conn, tail, n)
		if err != nil {
			return fatal("insert events", err)
		}
		args := w.args[:0]
		for i := range evs[:n] {
			if tail {
				args = append(args, w.tail.nextPos)
				w.tail.nextPos++
			}
			args = eventRow(args, sk, w.gen(evs[i].Sequence), &evs[i], store.ChainStored(evs[i].Sequence, &hashes[i]))
		}
		_, err = st.ExecContext(w.ctx, args...)
		clear(args)
		w.args = args[:0]
		if err != nil {
			return fatal(fmt.Sprintf("insert events at sequences %d to %d of session %q", evs[0].Sequence, evs[n-1].Sequence, sessionID), err)
		}
		evs, hashes = evs[n:], hashes[n:]
	}
	return w.writeUsage(sk, all)
}

// writeRuns writes the runs of an append's plan in the plan's order, which is the order of the
// change feed rows their triggers write: each stored run with qUpdateRun, and the created runs
// next to each other (in creation order, so that each takes the session's next ord) with
// qInsertRuns, in statements of a power of two runs up to maxRunsPerInsert (as insertEvents:
// seven statements at most are prepared, each with its compiled triggers).
func (w *writer) writeRuns(sk int64, runs []store.RunWrite, now time.Time) error {
	var nowMS any // the caller's time, or NULL (store.AppendOptions.Now)
	if !now.IsZero() {
		nowMS = now.UnixMilli()
	}
	for i := 0; i < len(runs); {
		rw := runs[i]
		if !rw.Created {
			data, err := json.Marshal(rw.Run)
			if err != nil {
				return fatal(fmt.Sprintf("store run %q", rw.Run.RunID), err) // events are written: no way back
			}
			res, err := w.st.updateRun.ExecContext(w.ctx, sk, rw.Run.RunID, rw.Run.Status, data, rw.Queued, rw.EndsLease, nowMS)
			if err != nil {
				return fatal("store run", err)
			}
			if n, err := res.RowsAffected(); err != nil || n != 1 {
				// The plan found the run stored in this transaction: a miss is a broken invariant.
				return fatal(fmt.Sprintf("store run %q", rw.Run.RunID), fmt.Errorf("updated %d rows, want 1 (%v)", n, err))
			}
			i++
			continue
		}
		j := i + 1
		for j < len(runs) && runs[j].Created && j-i < maxRunsPerInsert {
			j++
		}
		j = i + powerOfTwoAtMost(j-i, maxRunsPerInsert)
		args := make([]any, 1, 2+6*(j-i))
		args[0] = sk
		for _, rw := range runs[i:j] {
			data, err := json.Marshal(rw.Run)
			if err != nil {
				return fatal(fmt.Sprintf("store run %q", rw.Run.RunID), err) // events are written: no way back
			}
			args = append(args, rw.Run.RunID, rw.Run.Status, data, max(rw.Attempt, 1), rw.Queued, nowMS)
		}
		args = append(args, sk)
		st, err := w.st.insertRunsStmt(w.ctx, w.conn, j-i)
		if err != nil {
			return fatal("store runs", err)
		}
		if _, err := st.ExecContext(w.ctx, args...); err != nil {
			return fatal("store runs", err)
		}
		i = j
	}
	return nil
}

// appendHeartbeat records r's heartbeat for an append that added events (qAppendHeartbeat).
// The UPDATE is skipped when the writer knows it would change nothing: its own last heartbeat
// write to the row (ss.hbMs) is within heartbeatResolution of this one and no session write
// has run since (which might have made the row stale or changed its record). The margin of
// 1 ms covers heartbeat_ms's rounding of the stored text. Skipping saves evaluating the
// UPDATE's condition (two JSON extractions of the record) for nearly every append.
func (w *writer) appendHeartbeat(r *request, ss *sessState) error {
	hb := r.opts.Heartbeat
	if hb.IsZero() {
		return nil
	}
	limit := hb.Add(-heartbeatResolution).UnixMilli()
	if ss.hbMs != 0 && ss.hbOps == w.ops && ss.hbMs-1 > limit {
		return nil
	}
	res, err := w.st.appendHeartbeat.ExecContext(w.ctx, contract.FormatTime(hb), ss.sk, limit)
	if err != nil {
		return fatal("record heartbeat", err)
	}
	if n, err := res.RowsAffected(); err == nil && n > 0 {
		r.hbMs = hb.UnixMilli()
	}
	return nil
}

// appendLookup answers store.PlanAppend for one append request of the writer, before the
// request writes anything. It lives in the writer (w.lk) so that a plan costs no allocation for it.
type appendLookup struct {
	w      *writer
	ss     *sessState
	r      *request
	sealed int64 // the first generation of ss that was not sealed when the request began
	next   int   // the index in r.events after the last event Stored was asked about
	// runs holds, once Run or Lease is first asked about a run of a batch that names more
	// than one run, every run the batch names as stored (nil for one that is not), read with
	// one query (loadRuns) instead of one or two per run; nothing writes runs while the plan
	// is made.
	runs   map[string]*storedRunRow
	loaded bool
}

// storedRunRow is a stored run's row as loadRuns reads it: its order and JSON, and its lease.
type storedRunRow struct {
	ord     int64
	data    []byte
	leaseID sql.NullString
	token   int64
	expMs   sql.NullInt64
}

// batchRun returns what loadRuns read of the run: known is false when it did not read it (the
// batch names fewer than two runs, or not this one), and row is nil for a run not stored.
func (lk *appendLookup) batchRun(runID string) (row *storedRunRow, known bool, err error) {
	if !lk.loaded {
		lk.loaded = true
		if err := lk.loadRuns(); err != nil {
			return nil, false, err
		}
	}
	row, known = lk.runs[runID]
	return row, known, nil
}

// loadRuns reads the stored runs the request's events name (qBatchRuns), when they name more
// than one.
func (lk *appendLookup) loadRuns() error {
	var ids []string
	seen := map[string]bool{}
	for _, ev := range lk.r.events {
		if ev.RunID != "" && !seen[ev.RunID] {
			seen[ev.RunID] = true
			ids = append(ids, ev.RunID)
		}
	}
	if len(ids) < 2 {
		return nil
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return fmt.Errorf("load runs: %w", err)
	}
	rows, err := lk.w.st.batchRuns.QueryContext(lk.w.ctx, lk.ss.sk, list)
	if err != nil {
		return fatal("load runs", err)
	}
	defer rows.Close()
	lk.runs = make(map[string]*storedRunRow, len(ids))
	for _, id := range ids {
		lk.runs[id] = nil
	}
	for rows.Next() {
		var id string
		row := &storedRunRow{}
		if err := rows.Scan(&id, &row.ord, &row.data, &row.leaseID, &row.token, &row.expMs); err != nil {
			return fatal("load runs", err)
		}
		lk.runs[id] = row
	}
	if err := rows.Err(); err != nil {
		return fatal("load runs", err)
	}
	return nil
}

// qBatchRuns reads the stored runs of session ?1 whose ids are in the JSON array ?2.
const qBatchRuns = `SELECT run_id, ord, data, lease_id, lease_token, lease_expires_ms FROM runs
	WHERE sk = ?1 AND run_id IN (SELECT value FROM json_each(?2))`

// sumOf returns the content sum of ev, an event of the request (zero when unknown). The planner
// asks Stored about the events in batch order, so the search goes on from the last one.
func (lk *appendLookup) sumOf(ev *contract.EncodedEvent) contentSum {
	evs := lk.r.events
	for i := lk.next; i < len(evs) && i < len(lk.r.sums); i++ {
		if evs[i] == ev {
			lk.next = i + 1
			return lk.r.sums[i]
		}
	}
	return contentSum{}
}

// StoredKey looks the key up in every generation of the log, newest first.
func (lk *appendLookup) StoredKey(key string) (int64, []byte, bool, error) {
	seq, data, found, _, _, err := lk.w.findStored(lk.ss, key, "", keyHash('k', key), 0, lk.sealed)
	return seq, data, found, err
}

// Stored looks ev up in the log (findStored: the open generation's index, the sealed
// generations' filters and tables). When neither its key nor its id is there, the event will be
// added at seq unless the plan fails: it is noted in r.inserted, for the open index once the
// request has succeeded (appendEvents inserts the plan's events; should the plan fail,
// r.inserted is dropped). Events of the same batch are the planner's to compare.
func (lk *appendLookup) Stored(ev *contract.EncodedEvent, seq int64, data []byte) (store.StoredMatch, error) {
	w, ss := lk.w, lk.ss
	hk, hi := keyHash('k', ev.IdempotencyKey), keyHash('i', ev.EventID)
	var m store.StoredMatch
	var err error
	m.KeySeq, m.KeyData, m.KeyFound, m.IDSeq, m.IDFound, err = w.findStored(ss, ev.IdempotencyKey, ev.EventID, hk, hi, lk.sealed)
	if err != nil || m.KeyFound || m.IDFound {
		return m, err
	}
	if seq > maxSequence {
		return store.StoredMatch{}, fmt.Errorf("session %q holds %d events, as many as one log can: start a new session", lk.r.sessionID, maxSequence+1)
	}
	lk.r.inserted = append(lk.r.inserted, insertedEvent{seq: seq, key: hk, id: hi, sum: lk.sumOf(ev)})
	return store.StoredMatch{}, nil
}

// Run loads a stored run as the current transaction sees it.
func (lk *appendLookup) Run(runID string) (store.StoredRun, bool, error) {
	if ss := lk.ss; ss.leaseKnown(runID, lk.w.ops) && !ss.leaseFound {
		// Lease found no such run (the planner asks Lease first, then Run), and nothing has
		// written runs since.
		return store.StoredRun{}, false, nil
	}
	row, known, err := lk.batchRun(runID)
	switch {
	case err != nil:
		return store.StoredRun{}, false, err
	case known && row == nil:
		return store.StoredRun{}, false, nil
	case known:
		sr, err := storedRun(row.ord, row.data)
		return sr, err == nil, err
	}
	return lk.w.loadRun(lk.ss.sk, runID)
}

// ActiveRuns loads the session's runs whose status is not terminal, in creation order.
func (lk *appendLookup) ActiveRuns() ([]store.StoredRun, error) {
	rows, err := lk.w.st.activeRuns.QueryContext(lk.w.ctx, lk.ss.sk)
	if err != nil {
		return nil, fatal("load runs", err)
	}
	defer rows.Close()
	var out []store.StoredRun
	for rows.Next() {
		sr, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, sr)
	}
	if err := rows.Err(); err != nil {
		return nil, fatal("load runs", err)
	}
	return out, nil
}

// Lease loads the lease held on a run as the current transaction sees it, from the session's
// cache when it holds the run's (sessState.leaseRun).
func (lk *appendLookup) Lease(runID string) (*store.Lease, error) {
	ss, w := lk.ss, lk.w
	row, known, err := lk.batchRun(runID)
	switch {
	case err != nil:
		return nil, err
	case known && row == nil:
		return nil, nil
	case known:
		return leaseOf(row.leaseID, row.token, row.expMs), nil
	}
	if !ss.leaseKnown(runID, w.ops) {
		l, found, err := w.loadLease(ss.sk, runID)
		if err != nil {
			return nil, err
		}
		ss.leaseRun, ss.leaseHeld, ss.leaseFound, ss.leaseOps = runID, l, found, w.ops
	}
	return ss.leaseHeld, nil
}

// leaseKnown reports whether ss's lease cache holds run runID's lease (or its absence) as the
// writer's transaction sees it: it was loaded while the writer's ops were ops, and no append
// has written runs since (sessState.leaseRun).
func (ss *sessState) leaseKnown(runID string, ops uint64) bool {
	return runID != "" && ss.leaseRun == runID && ss.leaseOps == ops
}

// loadRun loads a run of session sk as the current transaction sees it.
func (w *writer) loadRun(sk int64, runID string) (store.StoredRun, bool, error) {
	sr, err := scanRun(w.st.runByID.QueryRowContext(w.ctx, sk, runID))
	if errors.Is(err, sql.ErrNoRows) {
		return store.StoredRun{}, false, nil
	}
	if err != nil {
		return store.StoredRun{}, false, err
	}
	return sr, true, nil
}

// scanRun reads a run's ord and data; sql.ErrNoRows passes through, other failures are fatal.
func scanRun(row interface{ Scan(...any) error }) (store.StoredRun, error) {
	var data []byte
	var sr store.StoredRun
	err := row.Scan(&sr.Ord, &data)
	if errors.Is(err, sql.ErrNoRows) {
		return sr, err
	}
	if err != nil {
		return sr, fatal("load run", err)
	}
	return storedRun(sr.Ord, data)
}

// storedRun decodes a stored run's JSON; a failure is fatal.
func storedRun(ord int64, data []byte) (store.StoredRun, error) {
	sr := store.StoredRun{Ord: ord, Run: new(contract.Run)}
	if err := json.Unmarshal(data, sr.Run); err != nil {
		return store.StoredRun{}, fatal("load run", fmt.Errorf("stored run %s: %w", data, err))
	}
	return sr, nil
}

// maxEventsPerInsert is the most events one qInsertEvents statement inserts; insertEvents uses
// the powers of two up to it.
const maxEventsPerInsert = 64

// powerOfTwoAtMost returns the largest power of two that is at most n (n >= 1) and at most
// limit (a power of two): the rows of the next multi-row statement, so that a few statements
// (one per power of two) are prepared, whatever the batches' lengths.
func powerOfTwoAtMost(n, limit int) int {
	p := limit
	for p > n {
		p /= 2
	}
	return p
}

// eventRowCols are an event row's columns, in the order of eventRow's arguments.
const eventRowCols = `rid, sk, seq, gen, event_id, idem_key, event_type, run_id, data, hash`

// qInsertEvents inserts n event rows into events: for each (eventRow) its rid, sk, seq, gen,
// event_id, idem_key, event_type, run_id, data and hash, in that order.
func qInsertEvents(n int) string {
	return qInsertRows(`INSERT INTO events (`+eventRowCols+`)`, 10, n)
}

// qInsertRows is the statement head (an INSERT naming its cols columns) followed by n rows of
// parameters. The parameters are anonymous: the driver asks SQLite for the name of every
// parameter it binds, which SQLite finds by a scan of the statement's named ones (numbered
// ones, ?NNN, count as named), so numbered parameters made binding a statement of many rows
// take time quadratic in its rows.
func qInsertRows(head string, cols, n int) string {
	row := "(" + strings.Repeat("?, ", cols-1) + "?)"
	var b strings.Builder
	b.WriteString(head + " VALUES ")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	return b.String()
}

// eventRow appends to args the arguments of qInsertEvents for event e of session sk in
// generation gen, with its stored chain hash (nil for none, store.ChainStored). Its key rid is sk * 2^32 + seq (migration 0010: the
// events table is a rowid table so that its interior pages hold integer keys, not whole rows).
func eventRow(args []any, sk, gen int64, e *store.StoredEvent, hash []byte) []any {
	return append(args, sk<<32+e.Sequence, sk, e.Sequence, gen, e.EventID, e.IdempotencyKey, e.EventType, e.RunID, e.Data, hash)
}

// maxSequence is the highest sequence a session's log can hold: a sequence is the low 32 bits
// of an event row's key (eventRow).
const maxSequence = 1<<32 - 1

// writeStmts are the writer's prepared statements, all on its one connection.
type writeStmts struct {
	sessionSeq, eventAt, openRows, eventByKey, eventByID, genKeys, genIDs, sealKeys, sealIDs      *sql.Stmt
	loadFilter, storeFilter, runByID, activeRuns, updateRun, runLease, appendHeartbeat, batchRuns *sql.Stmt
	insertSession, sessionRow, updateSession, heartbeat, lastChange, setHead                      *sql.Stmt
	all                                                                                           []*sql.Stmt
	control                                                                                       map[string]*sql.Stmt              // txControl
	insertRuns                                                                                    [maxRunsPerInsert + 1]*sql.Stmt   // insertRuns[n]: qInsertRuns(n), prepared when first used
	insertEvents                                                                                  [maxEventsPerInsert + 1]*sql.Stmt // insertEvents[n]: qInsertEvents(n), prepared when first used
	insertTail                                                                                    [maxEventsPerInsert + 1]*sql.Stmt // insertTail[n]: qInsertTail(n), the same
	flushTail, dropSessionTail, tailState, setTailMove, tailBound, copyTail, dropTail             *sql.Stmt                         // tail.go
	usageDay, usageTool                                                                           *sql.Stmt                         // usage.go, prepared when first used
}

// insertEventsStmt returns the statement inserting n events (qInsertEvents) into event_tail
// when tail, else into events, preparing it on conn the first time.
func (st *writeStmts) insertEventsStmt(ctx context.Context, conn *sql.Conn, tail bool, n int) (*sql.Stmt, error) {
	if tail {
		return st.prepareOnce(ctx, conn, &st.insertTail[n], "the insert of events", func() string { return qInsertTail(n) })
	}
	return st.prepareOnce(ctx, conn, &st.insertEvents[n], "the insert of events", func() string { return qInsertEvents(n) })
}

// insertRunsStmt returns the statement inserting n runs (qInsertRuns), preparing it on conn the
// first time.
func (st *writeStmts) insertRunsStmt(ctx context.Context, conn *sql.Conn, n int) (*sql.Stmt, error) {
	return st.prepareOnce(ctx, conn, &st.insertRuns[n], "the insert of runs", func() string { return qInsertRuns(n) })
}

// prepareOnce returns *slot, first preparing the statement q gives (what it is, for an error)
// on conn when *slot is nil.
func (st *writeStmts) prepareOnce(ctx context.Context, conn *sql.Conn, slot **sql.Stmt, what string, q func() string) (*sql.Stmt, error) {
	if *slot != nil {
		return *slot, nil
	}
	s, err := conn.PrepareContext(ctx, q())
	if err != nil {
		return nil, fmt.Errorf("prepare %s: %w", what, err)
	}
	*slot = s
	st.all = append(st.all, s)
	return s, nil
}

func (st *writeStmts) prepare(ctx context.Context, conn *sql.Conn) error {
	for _, p := range []struct {
		s **sql.Stmt
		q string
	}{
		{&st.sessionSeq, `SELECT sk, ` + lastSeqExpr + `, (SELECT h.head_hash FROM session_heads AS h WHERE h.sk = sessions.sk) FROM sessions WHERE id = ?`},
		{&st.eventAt, inBothTables(`SELECT event_id, idem_key, data FROM %[1]s WHERE rid = (?1 << 32) + ?2`)},
		{&st.openRows, inBothTables(`SELECT seq, event_id, idem_key FROM %[1]s WHERE rid >= (?1 << 32) + ?2 AND rid < ((?1 + 1) << 32)`)},
		{&st.eventByKey, inBothTables(`SELECT k.seq, e.data FROM event_keys AS k JOIN %[1]s AS e ON e.rid = (k.sk << 32) + k.seq WHERE k.sk = ?1 AND k.gen = ?2 AND k.idem_key = ?3`)},
		{&st.eventByID, inBothTables(`SELECT k.seq FROM event_ids AS k JOIN %[1]s AS e ON e.rid = (k.sk << 32) + k.seq WHERE k.sk = ?1 AND k.gen = ?2 AND k.event_id = ?3`)},
		{&st.flushTail, qFlushTail},
		{&st.dropSessionTail, qDropSessionTail},
		{&st.tailState, qTailState},
		{&st.setTailMove, qSetTailMove},
		{&st.tailBound, qTailBound},
		{&st.copyTail, qCopyTail},
		{&st.dropTail, qDropTail},
		{&st.genKeys, `SELECT idem_key FROM event_keys WHERE sk = ? AND gen = ?`},
		{&st.genIDs, `SELECT event_id FROM event_ids WHERE sk = ? AND gen = ?`},
		{&st.sealKeys, qSealKeys},
		{&st.sealIDs, qSealIDs},
		{&st.loadFilter, `SELECT bits FROM event_filters WHERE sk = ? AND gen = ?`},
		{&st.storeFilter, `INSERT OR REPLACE INTO event_filters (sk, gen, bits) VALUES (?, ?, ?)`},
		{&st.runByID, `SELECT ord, data FROM runs WHERE sk = ? AND run_id = ?`},
		{&st.activeRuns, `SELECT ord, data FROM runs WHERE sk = ? AND status NOT IN ('stopped', 'completed', 'failed') ORDER BY ord`},
		{&st.updateRun, qUpdateRun},
		{&st.runLease, `SELECT lease_id, lease_token, lease_expires_ms FROM runs WHERE sk = ? AND run_id = ?`},
		{&st.batchRuns, qBatchRuns},
		{&st.appendHeartbeat, qAppendHeartbeat},
		{&st.setHead, `INSERT INTO session_heads (sk, last_seq, head_hash) VALUES (?1, ?2, ?3) ON CONFLICT (sk) DO UPDATE SET last_seq = ?2, head_hash = ?3`},
		{&st.insertSession, `INSERT INTO sessions (id, status, agent_id, project, record, snapshot, lineage, active_branch) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`},
		{&st.sessionRow, `SELECT ` + sessionCols + ` FROM sessions WHERE id = ?`},
		{&st.updateSession, `UPDATE sessions SET status = ?, agent_id = ?, project = ?, record = ?, snapshot = ?, lineage = ?, active_branch = ? WHERE sk = ?`},
		{&st.heartbeat, qHeartbeat},
		{&st.lastChange, qLastChange},
	} {
		s, err := conn.PrepareContext(ctx, p.q)
		if err != nil {
			st.close()
			return fmt.Errorf("prepare %q: %w", p.q, err)
		}
		*p.s = s
		st.all = append(st.all, s)
	}
	st.control = map[string]*sql.Stmt{}
	for _, q := range txControl {
		s, err := conn.PrepareContext(ctx, q)
		if err != nil {
			st.close()
			return fmt.Errorf("prepare %q: %w", q, err)
		}
		st.control[q] = s
		st.all = append(st.all, s)
	}
	return nil
}

func (st *writeStmts) close() {
	for _, s := range st.all {
		s.Close()
	}
	st.all = nil
	clear(st.insertRuns[:])
	clear(st.insertEvents[:])
	clear(st.insertTail[:])
	st.usageDay, st.usageTool = nil, nil
}
