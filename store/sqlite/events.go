package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// submit hands r to the writer and waits for its answer. If ctx ends before the writer has
// taken r into a transaction, r is withdrawn and submit returns ctx's error: nothing of it is
// written. Once the writer has taken r, its outcome is decided by the commit and submit waits
// for it whatever ctx does, so a caller never sees an answer that hides a write: the rest of
// the time the writer keeps r's group open (until about the end of the sync in flight, or
// until the next sync starts, see commitWait) and then the sync of its commit.
func (s *Store) submit(ctx context.Context, r *request) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.inflight.Done()
	r.done = make(chan struct{})
	select {
	case s.reqs <- r:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		if r.state.CompareAndSwap(statePending, stateCancelled) {
			return ctx.Err()
		}
		<-r.done
		return nil
	}
}

// Append adds events to the session's log as documented on store.Store: atomically, durably
// (the commit is synced before Append returns), each new event taking the next sequence and
// each repeat of a stored idempotency key answered as a duplicate. The canonical bytes stored
// for an event are ev.JSON(sequence). Concurrent appends share one transaction and one sync
// (group commit) but each is all or nothing on its own. See submit for how ctx is honoured.
func (s *Store) Append(ctx context.Context, sessionID string, events []*contract.EncodedEvent, opts store.AppendOptions) ([]store.AppendResult, error) {
	if err := store.CheckBatch(sessionID, events); err != nil {
		return nil, err
	}
	// The content sums are computed here, by the caller's goroutine, not by the writer: a
	// duplicate is answered from them, and the writer keeps those of the events it inserts.
	sums := contentSums(events)
	if res, ok := s.storedDuplicates(ctx, sessionID, events, sums); ok {
		return res, nil
	}
	r := &request{ctx: ctx, sessionID: sessionID, events: events, sums: sums, opts: opts}
	if err := s.submit(ctx, r); err != nil {
		return nil, fmt.Errorf("append to session %q: %w", sessionID, err)
	}
	if r.err != nil {
		if errors.Is(r.err, store.ErrSessionNotFound) {
			return nil, r.err // already says which session
		}
		return nil, fmt.Errorf("append to session %q: %w", sessionID, r.err)
	}
	return r.results, nil
}

// storedDuplicates answers a batch that only repeats stored events (store.StoredDuplicates)
// without the writer: each key is looked up in the open index the writer publishes. An entry
// with the event's content sum (sums[i]) whose commit has been numbered answers at once: the
// sum stands for the content comparison (contentSum), and the commit is then waited for (see
// below). Otherwise the candidates are read through the read pool (so only committed events
// count) and compared with EncodedEvent.SameContent, as the sums are missing for the events
// the index was rebuilt from. The answer waits for the commits it rests on to be synced. ok is
// false, and the writer plans the append, when the session has no published index or an event
// is not found that way (a new event is told apart with one hash lookup, before any read).
func (s *Store) storedDuplicates(ctx context.Context, sessionID string, events []*contract.EncodedEvent, sums []contentSum) (res []store.AppendResult, ok bool) {
	if len(events) == 0 {
		return nil, false
	}
	if err := s.enter(); err != nil {
		return nil, false
	}
	defer s.inflight.Done()
	sk, err := s.sessionKey(ctx, sessionID)
	if err != nil {
		return nil, false
	}
	v, found := s.openIdx.Load(sk)
	if !found {
		return nil, false
	}
	x := v.(*openIndex)
	fromSums := false
	res, ok, err = store.StoredDuplicates(events, func(i int) (int64, bool, error) {
		key := events[i].IdempotencyKey
		var buf [4]sumCandidate
		cands, _ := x.readSums(buf[:0], keyHash('k', key), s.bits)
		for _, c := range cands {
			if c.sum != (contentSum{}) && c.sum == sums[i] {
				fromSums = true
				return c.seq, true, nil
			}
		}
		for _, c := range cands {
			var k string
			var data []byte
			err := s.rd.keyAt.QueryRowContext(ctx, sk, c.seq).Scan(&k, &data)
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				return 0, false, err
			}
			if k == key {
				return c.seq, events[i].SameContent(data), nil
			}
		}
		return 0, false, nil
	})
	if err != nil || !ok || s.visible(ctx) != nil {
		return nil, false
	}
	// A sum is published once its commit is numbered, before COMMIT runs: visible has waited
	// for that commit to be settled, and had it failed, the writer would have dropped the
	// index first (writer.failAll).
	if fromSums && x.isDead() {
		return nil, false
	}
	return res, true
}

// sessionKey returns a session's internal key, or store.ErrSessionNotFound.
func (s *Store) sessionKey(ctx context.Context, id string) (int64, error) {
	if v, ok := s.sessKeys.Load(id); ok {
		return v.(int64), nil
	}
	var sk int64
	err := s.settle(ctx, s.rd.sessionKey.QueryRowContext(ctx, id).Scan(&sk))
	if errors.Is(err, sql.ErrNoRows) {
		return 0, store.ErrSessionNotFound
	}
	if err != nil {
		return 0, err
	}
	s.sessKeys.Store(id, sk)
	return sk, nil
}

// readArenaBytes is the size of the chunks ReadEvents copies events' bytes into: one
// allocation for a few hundred events rather than one each.
const readArenaBytes = 256 << 10

// ReadEvents returns the committed events of the session with sequence > after, in order, at
// most limit (default and cap 10000). It returns store.ErrSessionNotFound for an unknown
// session.
func (s *Store) ReadEvents(ctx context.Context, sessionID string, after int64, limit int) ([]store.StoredEvent, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.inflight.Done()
	limit = store.ReadLimit(limit)
	if after < -1 {
		after = -1
	}
	sk, err := s.sessionKey(ctx, sessionID)
	if err != nil {
		return nil, fmt.Errorf("read events of session %q: %w", sessionID, err)
	}
	// Sequences are gap-free, so the page holds min(limit, last-after) events: size it once.
	// The last sequence is read before the rows are opened: a second query while the rows
	// hold a pooled connection would need another one, and readers doing that at once can
	// take every connection of the pool and wait for each other forever.
	size := min(limit, 64)
	if limit > 64 {
		var last int64
		if err := s.rd.lastSeq.QueryRowContext(ctx, sessionID).Scan(&last); err == nil {
			size = int(min(int64(limit), max(last-after, 0)))
		}
	}
	rows, err := s.rd.events.QueryContext(ctx, sk, after, limit)
	if err != nil {
		return nil, fmt.Errorf("read events of session %q: %w", sessionID, err)
	}
	defer rows.Close()
	out := make([]store.StoredEvent, 0, size)
	var et, run, data sql.RawBytes
	var lastType, lastRun string
	var arena []byte // the events' bytes, copied into chunks shared by many events
	for rows.Next() {
		var e store.StoredEvent
		if err := rows.Scan(&e.Sequence, &e.EventID, &e.IdempotencyKey, &et, &run, &data); err != nil {
			return nil, fmt.Errorf("read events of session %q: %w", sessionID, err)
		}
		if len(arena)+len(data) > cap(arena) {
			arena = make([]byte, 0, max(readArenaBytes, len(data)))
		}
		start := len(arena)
		arena = append(arena, data...)
		e.Data = arena[start:len(arena):len(arena)] // full: an append by the caller copies
		// Event types and run ids repeat from event to event: share the strings.
		if string(et) != lastType {
			lastType = string(et)
		}
		if string(run) != lastRun {
			lastRun = string(run)
		}
		e.EventType, e.RunID = lastType, lastRun
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read events of session %q: %w", sessionID, err)
	}
	if err := s.visible(ctx); err != nil {
		return nil, fmt.Errorf("read events of session %q: %w", sessionID, err)
	}
	return out, nil
}

// maxReadGuess caps the room AppendEventsData makes in one step from its guess of a page's size
// (a page of 10,000 events of 470 bytes is 4.7 MB).
const maxReadGuess = 16 << 20

// AppendEventsData appends to dst the stored bytes of the events ReadEvents returns, sep between
// two of them (store.EventsDataAppender): one column per row, copied once, straight from the
// row into dst.
func (s *Store) AppendEventsData(ctx context.Context, sessionID string, after int64, limit int, sep byte, dst []byte) ([]byte, int, error) {
	if err := s.enter(); err != nil {
		return dst, 0, err
	}
	defer s.inflight.Done()
	limit = store.ReadLimit(limit)
	if after < -1 {
		after = -1
	}
	fail := func(err error) ([]byte, int, error) {
		return dst, 0, fmt.Errorf("read events of session %q: %w", sessionID, err)
	}
	sk, err := s.sessionKey(ctx, sessionID)
	if err != nil {
		return fail(err)
	}
	// How many events the page holds (see ReadEvents), to size dst once from the first: growing
	// it by append's steps (a quarter at a time for large slices) copied a 10,000-event page
	// about four times over.
	want := min(limit, 64)
	if limit > 64 {
		var last int64
		if err := s.rd.lastSeq.QueryRowContext(ctx, sessionID).Scan(&last); err == nil {
			want = int(min(int64(limit), max(last-after, 0)))
		}
	}
	rows, err := s.rd.eventsData.QueryContext(ctx, sk, after, limit)
	if err != nil {
		return fail(err)
	}
	defer rows.Close()
	out, n := dst, 0
	var data sql.RawBytes
	for rows.Next() {
		if err := rows.Scan(&data); err != nil {
			return fail(err)
		}
		if need := len(data) + 1; cap(out)-len(out) < need {
			// Room for the events left, each taken as large as this one and an eighth (at most
			// maxReadGuess: one large event must not size the page), and at least double: a
			// wrong guess costs one more copy.
			left := max(want-n, 1)
			out = slices.Grow(out, max(need, min(need*left+need*left/8, maxReadGuess), len(out)))
		}
		if n > 0 {
			out = append(out, sep)
		}
		out = append(out, data...)
		n++
	}
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	if err := s.visible(ctx); err != nil {
		return fail(err)
	}
	return out, n, nil
}

// LastSequence returns the sequence of the session's last committed event, -1 when its log is
// empty, or store.ErrSessionNotFound. For a session appended to since Open the answer is the
// syncer's (noteDurableLast: set once the commit is durable, before its caller is answered), with
// no query; a duplicate-only append asks for it on every request (session.Service.appended).
func (s *Store) LastSequence(ctx context.Context, sessionID string) (int64, error) {
	if err := s.enter(); err != nil {
		return 0, err
	}
	defer s.inflight.Done()
	if v, ok := s.durableLast.Load(sessionID); ok && s.dur.err() == nil {
		return v.(*atomic.Int64).Load(), nil
	}
	var last int64
	err := s.settle(ctx, s.rd.lastSeq.QueryRowContext(ctx, sessionID).Scan(&last))
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("last sequence of session %q: %w", sessionID, store.ErrSessionNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("last sequence of session %q: %w", sessionID, err)
	}
	return last, nil
}

// EventByID returns the session's event with that eventId, store.ErrEventNotFound when there is
// none, or store.ErrSessionNotFound for an unknown session.
func (s *Store) EventByID(ctx context.Context, sessionID, eventID string) (store.StoredEvent, error) {
	return s.eventBy(ctx, 'i', sessionID, eventID)
}

// EventByIdempotencyKey returns the session's event with that idempotency key,
// store.ErrEventNotFound when there is none, or store.ErrSessionNotFound for an unknown session.
func (s *Store) EventByIdempotencyKey(ctx context.Context, sessionID, key string) (store.StoredEvent, error) {
	return s.eventBy(ctx, 'k', sessionID, key)
}

// eventBy finds the event whose id (kind 'i') or key (kind 'k') is val (generation.go): in the
// open generation through the writer's index when it has one for the generation this read
// sees, else by a scan of that generation's rows; in the sealed generations through their
// tables, newest first.
func (s *Store) eventBy(ctx context.Context, kind byte, sessionID, val string) (store.StoredEvent, error) {
	what := "idempotencyKey"
	if kind == 'i' {
		what = "eventId"
	}
	var e store.StoredEvent
	if err := s.enter(); err != nil {
		return e, err
	}
	defer s.inflight.Done()
	fail := func(err error) (store.StoredEvent, error) {
		return store.StoredEvent{}, fmt.Errorf("event with %s %q in session %q: %w", what, val, sessionID, err)
	}
	sk, err := s.sessionKey(ctx, sessionID)
	if err != nil {
		return fail(err)
	}
	var last int64
	if err := s.rd.lastSeq.QueryRowContext(ctx, sessionID).Scan(&last); err != nil {
		return fail(err)
	}
	open := (last + 1) >> s.bits
	scanOpen := true
	if v, ok := s.openIdx.Load(sk); ok {
		x := v.(*openIndex)
		var buf [4]int64
		cands, live := x.readCandidates(buf[:0], keyHash(kind, val), s.bits, open)
		if live {
			scanOpen = false
			for _, seq := range cands {
				err := s.rd.eventAt.QueryRowContext(ctx, sk, seq).Scan(&e.Sequence, &e.EventID, &e.IdempotencyKey, &e.EventType, &e.RunID, &e.Data)
				if errors.Is(err, sql.ErrNoRows) {
					continue
				}
				if err != nil {
					return fail(err)
				}
				if (kind == 'i' && e.EventID == val) || (kind == 'k' && e.IdempotencyKey == val) {
					if err := s.visible(ctx); err != nil {
						return fail(err)
					}
					return e, nil
				}
			}
		}
	}
	stmt := s.rd.eventByKey
	if kind == 'i' {
		stmt = s.rd.eventByID
	}
	err = s.settle(ctx, stmt.QueryRowContext(ctx, sk, val, open-1, scanOpen, open<<s.bits).Scan(&e.Sequence, &e.EventID, &e.IdempotencyKey, &e.EventType, &e.RunID, &e.Data))
	if errors.Is(err, sql.ErrNoRows) {
		return fail(store.ErrEventNotFound)
	}
	if err != nil {
		return fail(err)
	}
	return e, nil
}

// Runs returns the session's runs in the order they were created, or store.ErrSessionNotFound.
func (s *Store) Runs(ctx context.Context, sessionID string) ([]contract.Run, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.inflight.Done()
	sk, err := s.sessionKey(ctx, sessionID)
	if err != nil {
		return nil, fmt.Errorf("runs of session %q: %w", sessionID, err)
	}
	rows, err := s.rd.runs.QueryContext(ctx, sk)
	if err != nil {
		return nil, fmt.Errorf("runs of session %q: %w", sessionID, err)
	}
	defer rows.Close()
	out := []contract.Run{}
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&data); err != nil {
			return nil, fmt.Errorf("runs of session %q: %w", sessionID, err)
		}
		var r contract.Run
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("runs of session %q: decode stored run: %w", sessionID, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("runs of session %q: %w", sessionID, err)
	}
	if err := s.visible(ctx); err != nil {
		return nil, fmt.Errorf("runs of session %q: %w", sessionID, err)
	}
	return out, nil
}

// Run returns one run of the session, store.ErrRunNotFound when there is none, or
// store.ErrSessionNotFound for an unknown session.
func (s *Store) Run(ctx context.Context, sessionID, runID string) (contract.Run, error) {
	var r contract.Run
	if err := s.enter(); err != nil {
		return r, err
	}
	defer s.inflight.Done()
	sk, err := s.sessionKey(ctx, sessionID)
	if err != nil {
		return r, fmt.Errorf("run %q of session %q: %w", runID, sessionID, err)
	}
	var data []byte
	err = s.settle(ctx, s.rd.run.QueryRowContext(ctx, sk, runID).Scan(&data))
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("run %q of session %q: %w", runID, sessionID, store.ErrRunNotFound)
	}
	if err != nil {
		return r, fmt.Errorf("run %q of session %q: %w", runID, sessionID, err)
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("run %q of session %q: decode stored run: %w", runID, sessionID, err)
	}
	return r, nil
}

// readStmts are the prepared statements of the read-only pool.
type readStmts struct {
	session, sessionKey, lastSeq, events, eventsData, eventAt, keyAt, eventByID, eventByKey, runs, run *sql.Stmt
	all                                                                                                []*sql.Stmt
}

const eventCols = `seq, event_id, idem_key, event_type, run_id, data`

// The reads of session ?1's events: after sequence ?2, at most ?3, in order (each arm in key
// order, and a session's rows in events before its rows in the tail: inBothTables); the event
// at sequence ?2.
var (
	qReadEvents     = inBothTables(`SELECT `+eventCols+` FROM %[1]s WHERE rid > (?1 << 32) + ?2 AND rid < ((?1 + 1) << 32)`) + ` LIMIT ?3`
	qReadEventsData = inBothTables(`SELECT data FROM %[1]s WHERE rid > (?1 << 32) + ?2 AND rid < ((?1 + 1) << 32)`) + ` LIMIT ?3`
	qEventAt        = inBothTables(`SELECT ` + eventCols + ` FROM %[1]s WHERE rid = (?1 << 32) + ?2`)
	qKeyAt          = inBothTables(`SELECT idem_key, data FROM %[1]s WHERE rid = (?1 << 32) + ?2`)
)

// eventByGen is the query that finds the event with a given col (?2) in a session (?1): in the
// open generation's rows, from sequence ?5 on, when ?4; in the sealed generations ?3 down to 0,
// through table, one index lookup each (generation.go).
func eventByGen(table, col string) string {
	open := fmt.Sprintf(`SELECT seq, event_id, idem_key, event_type, run_id, data FROM %%[1]s
WHERE ?4 AND rid >= (?1 << 32) + ?5 AND rid < ((?1 + 1) << 32) AND %[1]s = ?2`, col)
	sealed := fmt.Sprintf(`SELECT * FROM (
    WITH RECURSIVE g(n) AS (SELECT ?3 WHERE ?3 >= 0 UNION ALL SELECT n - 1 FROM g WHERE n > 0)
    SELECT e.seq, e.event_id, e.idem_key, e.event_type, e.run_id, e.data
    FROM g CROSS JOIN %[1]s AS k ON k.sk = ?1 AND k.gen = g.n AND k.%[2]s = ?2
    JOIN %%[1]s AS e ON e.rid = (?1 << 32) + k.seq
)`, table, col)
	return inBothTables(open) + "\nUNION ALL\n" + inBothTables(sealed) + "\nLIMIT 1"
}

func (st *readStmts) prepare(ctx context.Context, db *sql.DB) error {
	for _, p := range []struct {
		s **sql.Stmt
		q string
	}{
		{&st.session, `SELECT ` + sessionCols + ` FROM sessions WHERE id = ?`},
		{&st.sessionKey, `SELECT sk FROM sessions WHERE id = ?`},
		{&st.lastSeq, `SELECT ` + lastSeqExpr + ` FROM sessions WHERE id = ?`},
		{&st.events, qReadEvents},
		{&st.eventsData, qReadEventsData},
		{&st.eventAt, qEventAt},
		{&st.keyAt, qKeyAt},
		{&st.eventByID, eventByGen("event_ids", "event_id")},
		{&st.eventByKey, eventByGen("event_keys", "idem_key")},
		{&st.runs, `SELECT data FROM runs WHERE sk = ? ORDER BY ord`},
		{&st.run, `SELECT data FROM runs WHERE sk = ? AND run_id = ?`},
	} {
		s, err := db.PrepareContext(ctx, p.q)
		if err != nil {
			st.close()
			return fmt.Errorf("prepare %q: %w", p.q, err)
		}
		*p.s = s
		st.all = append(st.all, s)
	}
	return nil
}

func (st *readStmts) close() {
	for _, s := range st.all {
		s.Close()
	}
	st.all = nil
}
