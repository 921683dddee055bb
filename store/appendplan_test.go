package store_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/storetest"
)

const sid = "S-plan"

// fakeLog is an AppendLookup over an in-memory log and run table; it counts the questions
// asked and can fail any of them.
type fakeLog struct {
	events []store.StoredEvent
	runs   []store.StoredRun
	leases map[string]*store.Lease // the lease held on each run (leases_test.go)
	fail   string                  // the method to fail: "StoredKey", "Stored", "Run", "ActiveRuns", "Lease"
	calls  map[string]int
}

var errLookup = errors.New("lookup failed")

func (f *fakeLog) count(m string) error {
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[m]++
	if f.fail == m {
		return errLookup
	}
	return nil
}

func (f *fakeLog) StoredKey(key string) (int64, []byte, bool, error) {
	if err := f.count("StoredKey"); err != nil {
		return 0, nil, false, err
	}
	for _, e := range f.events {
		if e.IdempotencyKey == key {
			return e.Sequence, e.Data, true, nil
		}
	}
	return 0, nil, false, nil
}

func (f *fakeLog) Stored(ev *contract.EncodedEvent, _ int64, _ []byte) (store.StoredMatch, error) {
	if err := f.count("Stored"); err != nil {
		return store.StoredMatch{}, err
	}
	var m store.StoredMatch
	for _, e := range f.events {
		if e.IdempotencyKey == ev.IdempotencyKey {
			return store.StoredMatch{KeyFound: true, KeySeq: e.Sequence, KeyData: e.Data}, nil
		}
		if e.EventID == ev.EventID && !m.IDFound {
			m = store.StoredMatch{IDFound: true, IDSeq: e.Sequence}
		}
	}
	return m, nil
}

func (f *fakeLog) Run(runID string) (store.StoredRun, bool, error) {
	if err := f.count("Run"); err != nil {
		return store.StoredRun{}, false, err
	}
	for _, r := range f.runs {
		if r.Run.RunID == runID {
			c := *r.Run
			return store.StoredRun{Run: &c, Ord: r.Ord}, true, nil
		}
	}
	return store.StoredRun{}, false, nil
}

func (f *fakeLog) ActiveRuns() ([]store.StoredRun, error) {
	if err := f.count("ActiveRuns"); err != nil {
		return nil, err
	}
	var out []store.StoredRun
	for _, r := range f.runs {
		if !contract.IsTerminal(r.Run.Status) {
			c := *r.Run
			out = append(out, store.StoredRun{Run: &c, Ord: r.Ord})
		}
	}
	return out, nil
}

// last is the log's last sequence.
func (f *fakeLog) Lease(runID string) (*store.Lease, error) {
	if err := f.count("Lease"); err != nil {
		return nil, err
	}
	return f.leases[runID], nil
}

func (f *fakeLog) last() int64 { return int64(len(f.events)) - 1 }

// logOf stores evs at sequences 0, 1, ...
func logOf(evs ...*contract.EncodedEvent) []store.StoredEvent {
	out := make([]store.StoredEvent, len(evs))
	for i, ev := range evs {
		out[i] = store.StoredEvent{Sequence: int64(i), EventID: ev.EventID, IdempotencyKey: ev.IdempotencyKey, EventType: ev.EventType, RunID: ev.RunID, Data: ev.JSON(int64(i))}
	}
	return out
}

func ev(t *testing.T, id, key, chunk string) *contract.EncodedEvent {
	return storetest.EventWithID(t, sid, id, key, chunk)
}

func run(t *testing.T, key, runID, msg, status string) *contract.EncodedEvent {
	return storetest.RunStatusEvent(t, sid, key, runID, msg, status)
}

func storedRun(id, msg, status string, ord int64) store.StoredRun {
	return store.StoredRun{Run: &contract.Run{RunID: id, SessionID: sid, SourceMessageID: msg, Status: status}, Ord: ord}
}

func seq(n int64) *int64 { return &n }

// res is a compact result: "seq" for a new event, "seq dup" for a duplicate.
func res(rs []store.AppendResult) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprint(r.Sequence)
		if r.Duplicate {
			parts[i] += " dup"
		}
	}
	return strings.Join(parts, ", ")
}

// runs is a compact list of run writes: "id status created|stored ord".
func runs(ws []store.RunWrite) string {
	parts := make([]string, len(ws))
	for i, w := range ws {
		kind := "stored"
		if w.Created {
			kind = "created"
		}
		parts[i] = fmt.Sprintf("%s %s %s %d", w.Run.RunID, w.Run.Status, kind, w.Ord)
	}
	return strings.Join(parts, "; ")
}

// TestPlanAppend covers each rule of the planner: results, added events, run writes and the
// last sequence, or the typed error, and which questions the lookup was asked.
func TestPlanAppend(t *testing.T) {
	a, b, c := ev(t, "ev-a", "k-a", "a"), ev(t, "ev-b", "k-b", "b"), ev(t, "ev-c", "k-c", "c")
	aOther := ev(t, "ev-a", "k-a", "other content")
	aNewKey := ev(t, "ev-a", "k-a2", "a")
	bKeyAID := ev(t, "ev-a", "k-b", "b other") // b's key with other content, a's eventId
	type want struct {
		results string // res(...)
		added   int
		runs    string // runs(...)
		last    int64
		err     string // the error's text; "" for none
		check   func(t *testing.T, err error)
		calls   map[string]int // lookup calls expected (only the ones listed)
	}
	cases := []struct {
		name   string
		log    []*contract.EncodedEvent
		stored []store.StoredRun
		batch  []*contract.EncodedEvent
		exp    *int64
		fail   string
		want   want
	}{
		{name: "new events on an empty log take 0, 1, ...", batch: []*contract.EncodedEvent{a, b},
			want: want{results: "0, 1", added: 2, last: 1, calls: map[string]int{"Stored": 2, "StoredKey": 0}}},
		{name: "new events continue after the last sequence", log: []*contract.EncodedEvent{a}, batch: []*contract.EncodedEvent{b, c},
			want: want{results: "1, 2", added: 2, last: 2}},
		{name: "empty batch answers an empty list", log: []*contract.EncodedEvent{a}, batch: []*contract.EncodedEvent{},
			want: want{results: "", last: 0, calls: map[string]int{"Stored": 0}}},
		{name: "stored key with the same content is a duplicate and takes no sequence", log: []*contract.EncodedEvent{a}, batch: []*contract.EncodedEvent{a, b},
			want: want{results: "0 dup, 1", added: 1, last: 1}},
		{name: "stored key with other content is a key conflict", log: []*contract.EncodedEvent{a, b}, batch: []*contract.EncodedEvent{c, aOther},
			want: want{err: `event 1: idempotencyKey "k-a" was already used for different content (sequence 0); use a new key for a new event`,
				check: wantConflict(1, store.ConflictIdempotencyKey, 0)}},
		{name: "stored eventId under another key is an eventId conflict", log: []*contract.EncodedEvent{b, a}, batch: []*contract.EncodedEvent{aNewKey},
			want: want{err: `event 0: eventId "ev-a" is already used by the event at sequence 1 under another idempotencyKey; give a new event an eventId of its own`,
				check: wantConflict(0, store.ConflictEventID, 1)}},
		{name: "the key decides before the eventId", log: []*contract.EncodedEvent{a, b}, batch: []*contract.EncodedEvent{bKeyAID},
			want: want{check: wantConflict(0, store.ConflictIdempotencyKey, 1)}},
		{name: "a key repeated in the batch with the same content is a duplicate of its first", batch: []*contract.EncodedEvent{a, b, a},
			want: want{results: "0, 1, 0 dup", added: 2, last: 1, calls: map[string]int{"Stored": 2}}},
		{name: "a repeat of a stored duplicate in the batch answers the stored sequence", log: []*contract.EncodedEvent{b, a}, batch: []*contract.EncodedEvent{a, c, a},
			want: want{results: "1 dup, 2, 1 dup", added: 1, last: 2}},
		{name: "a key repeated in the batch with other content is a key conflict", log: []*contract.EncodedEvent{c}, batch: []*contract.EncodedEvent{a, aOther},
			want: want{check: wantConflict(1, store.ConflictIdempotencyKey, 1)}},
		{name: "an eventId repeated in the batch under another key is an eventId conflict", batch: []*contract.EncodedEvent{b, a, aNewKey},
			want: want{check: wantConflict(2, store.ConflictEventID, 1), calls: map[string]int{"Stored": 2}}},
		{name: "an event over MaxEventBytes is a limit error", batch: []*contract.EncodedEvent{a, storetest.BigEvent(t, sid, "k-big", store.MaxEventBytes)},
			want: want{check: func(t *testing.T, err error) {
				var le *store.LimitError
				if !errors.As(err, &le) || le.What != "event" || le.Index != 1 || le.Limit != store.MaxEventBytes || le.Got <= store.MaxEventBytes {
					t.Errorf("err = %v, want an event LimitError for index 1", err)
				}
			}, calls: map[string]int{"Stored": 1}}},
		{name: "expected sequence that holds appends", log: []*contract.EncodedEvent{a}, batch: []*contract.EncodedEvent{b}, exp: seq(0),
			want: want{results: "1", added: 1, last: 1}},
		{name: "expected sequence moved: a new event is a sequence conflict", log: []*contract.EncodedEvent{a, b}, batch: []*contract.EncodedEvent{a, c}, exp: seq(0),
			want: want{err: `session "S-plan": expected last sequence 0, but the log ends at 1; read the new events and retry with expectedSequence 1`,
				check: func(t *testing.T, err error) {
					var se *store.SequenceConflictError
					if !errors.As(err, &se) || se.Expected != 0 || se.Actual != 1 || se.SessionID != sid {
						t.Errorf("err = %v, want a SequenceConflictError 0/1", err)
					}
				}, calls: map[string]int{"StoredKey": 2, "Stored": 0}}},
		{name: "expected sequence moved: all duplicates answer the duplicates", log: []*contract.EncodedEvent{a, b, c}, batch: []*contract.EncodedEvent{b, c, b}, exp: seq(0),
			want: want{results: "1 dup, 2 dup, 1 dup", last: 2, calls: map[string]int{"StoredKey": 2, "Stored": 0}}},
		{name: "expected sequence moved: a changed repeat is a sequence conflict", log: []*contract.EncodedEvent{a, b}, batch: []*contract.EncodedEvent{aOther}, exp: seq(0),
			want: want{check: wantSequenceConflict}},
		{name: "expected sequence moved: an empty batch is a sequence conflict", log: []*contract.EncodedEvent{a}, batch: []*contract.EncodedEvent{}, exp: seq(-1),
			want: want{check: wantSequenceConflict, calls: map[string]int{"StoredKey": 0}}},
		{name: "a run status event creates a run", batch: []*contract.EncodedEvent{a, run(t, "r1", "R-1", "M-1", "queued")},
			want: want{results: "0, 1", added: 2, last: 1, runs: "R-1 queued created 0", calls: map[string]int{"Run": 1, "ActiveRuns": 1}}},
		{name: "a run changed several times is written once, as the batch leaves it",
			batch: []*contract.EncodedEvent{run(t, "r1", "R-1", "M-1", "queued"), run(t, "r2", "R-1", "M-1", "running"), run(t, "r3", "R-1", "M-1", "completed")},
			want:  want{results: "0, 1, 2", added: 3, last: 2, runs: "R-1 completed created 0", calls: map[string]int{"Run": 1, "ActiveRuns": 1}}},
		{name: "a stored run changes in place", stored: []store.StoredRun{storedRun("R-0", "M-0", "completed", 0), storedRun("R-1", "M-1", "queued", 1)},
			batch: []*contract.EncodedEvent{run(t, "r2", "R-1", "M-1", "running")},
			want:  want{results: "0", added: 1, last: 0, runs: "R-1 running stored 1", calls: map[string]int{"Run": 1, "ActiveRuns": 0}}},
		{name: "an illegal transition is a run error", stored: []store.StoredRun{storedRun("R-1", "M-1", "completed", 0)}, batch: []*contract.EncodedEvent{a, run(t, "r2", "R-1", "M-1", "running")},
			want: want{err: `event 1: run "R-1" is completed, which is final; it cannot become running`, check: wantRunError[*contract.TransitionError](1)}},
		{name: "another source message is a run error", stored: []store.StoredRun{storedRun("R-1", "M-1", "queued", 0)}, batch: []*contract.EncodedEvent{run(t, "r2", "R-1", "M-9", "running")},
			want: want{err: `event 0: run "R-1" was started by message "M-1"; this event names "M-9"`, check: func(t *testing.T, err error) {
				var re *store.RunError
				if !errors.As(err, &re) || re.Index != 0 {
					t.Errorf("err = %v, want a RunError for index 0", err)
				}
			}}},
		{name: "a new run while a stored run is active is a run error", stored: []store.StoredRun{storedRun("R-1", "M-1", "running", 0)}, batch: []*contract.EncodedEvent{run(t, "r2", "R-2", "M-2", "queued")},
			want: want{err: `event 0: run "R-2" cannot start: run "R-1" is still running; a session has one active run at a time, so stop it or let it finish first`,
				check: wantRunError[*contract.ActiveRunError](0)}},
		{name: "a new run while a run of the batch is active is a run error",
			batch: []*contract.EncodedEvent{run(t, "r1", "R-1", "M-1", "queued"), run(t, "r2", "R-2", "M-2", "queued")},
			want:  want{check: wantRunError[*contract.ActiveRunError](1), calls: map[string]int{"ActiveRuns": 1}}},
		{name: "a new run after the batch finished the active one", stored: []store.StoredRun{storedRun("R-1", "M-1", "running", 3)},
			batch: []*contract.EncodedEvent{run(t, "r1", "R-1", "M-1", "completed"), run(t, "r2", "R-2", "M-2", "queued"), run(t, "r3", "R-2", "M-2", "failed"), run(t, "r4", "R-3", "M-3", "running")},
			want:  want{results: "0, 1, 2, 3", added: 4, last: 3, runs: "R-1 completed stored 3; R-2 failed created 0; R-3 running created 1", calls: map[string]int{"ActiveRuns": 1, "Run": 3}}},
		{name: "the earliest created active run is the one named", stored: []store.StoredRun{storedRun("R-b", "M-b", "queued", 1), storedRun("R-a", "M-a", "running", 0)},
			batch: []*contract.EncodedEvent{run(t, "r1", "R-new", "M-1", "queued")},
			want:  want{err: `event 0: run "R-new" cannot start: run "R-a" is still running; a session has one active run at a time, so stop it or let it finish first`}},
		{name: "a duplicate status event is not applied again", log: []*contract.EncodedEvent{run(t, "r1", "R-1", "M-1", "running")}, stored: []store.StoredRun{storedRun("R-1", "M-1", "completed", 0)},
			batch: []*contract.EncodedEvent{run(t, "r1", "R-1", "M-1", "running")},
			want:  want{results: "0 dup", last: 0, calls: map[string]int{"Run": 0}}},
		{name: "Stored failing stops the plan", batch: []*contract.EncodedEvent{a}, fail: "Stored", want: want{check: wantLookupError}},
		{name: "StoredKey failing stops the plan", log: []*contract.EncodedEvent{a}, batch: []*contract.EncodedEvent{a}, exp: seq(5), fail: "StoredKey", want: want{check: wantLookupError}},
		{name: "Run failing stops the plan", batch: []*contract.EncodedEvent{run(t, "r1", "R-1", "M-1", "queued")}, fail: "Run", want: want{check: wantLookupError}},
		{name: "ActiveRuns failing stops the plan", batch: []*contract.EncodedEvent{run(t, "r1", "R-1", "M-1", "queued")}, fail: "ActiveRuns", want: want{check: wantLookupError}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeLog{events: logOf(tc.log...), runs: tc.stored, fail: tc.fail}
			plan, err := store.PlanAppend(sid, f.last(), tc.batch, store.AppendOptions{ExpectedSequence: tc.exp}, f)
			w := tc.want
			if w.check != nil {
				w.check(t, err)
			}
			if w.err != "" && (err == nil || err.Error() != w.err) {
				t.Errorf("err = %v\nwant %s", err, w.err)
			}
			for m, n := range w.calls {
				if f.calls[m] != n {
					t.Errorf("%s called %d times, want %d", m, f.calls[m], n)
				}
			}
			if w.check != nil || w.err != "" {
				if err != nil && (plan.Results != nil || plan.Added != nil || plan.Runs != nil) {
					t.Errorf("a refused plan carries %+v", plan)
				}
				return
			}
			if err != nil {
				t.Fatalf("PlanAppend: %v", err)
			}
			if plan.Results == nil || res(plan.Results) != w.results {
				t.Errorf("results %q (nil: %t), want %q", res(plan.Results), plan.Results == nil, w.results)
			}
			if len(plan.Added) != w.added || plan.Last != w.last || runs(plan.Runs) != w.runs {
				t.Errorf("added %d, last %d, runs %q; want %d, %d, %q", len(plan.Added), plan.Last, runs(plan.Runs), w.added, w.last, w.runs)
			}
			checkAdded(t, tc.batch, plan)
		})
	}
}

// checkAdded: each added event is the batch's event with its new sequence, in sequence order
// ending at Last.
func checkAdded(t *testing.T, batch []*contract.EncodedEvent, plan store.AppendPlan) {
	t.Helper()
	first := plan.Last - int64(len(plan.Added)) + 1
	k := 0
	for i, r := range plan.Results {
		if r.Duplicate {
			continue
		}
		e, ev := plan.Added[k], batch[i]
		if e.Sequence != first+int64(k) || r.Sequence != e.Sequence || string(e.Data) != string(ev.JSON(e.Sequence)) ||
			e.EventID != ev.EventID || e.IdempotencyKey != ev.IdempotencyKey || e.EventType != ev.EventType || e.RunID != ev.RunID {
			t.Errorf("added[%d] = %+v for result %+v", k, e, r)
		}
		k++
	}
}

func wantConflict(index int, reason string, existing int64) func(*testing.T, error) {
	return func(t *testing.T, err error) {
		t.Helper()
		var ce *store.ConflictError
		if !errors.As(err, &ce) || ce.Index != index || ce.Reason != reason || ce.Existing != existing {
			t.Errorf("err = %v, want a %s conflict of event %d with sequence %d", err, reason, index, existing)
		}
	}
}

func wantSequenceConflict(t *testing.T, err error) {
	t.Helper()
	var se *store.SequenceConflictError
	if !errors.As(err, &se) {
		t.Errorf("err = %v, want a SequenceConflictError", err)
	}
}

func wantRunError[E error](index int) func(*testing.T, error) {
	return func(t *testing.T, err error) {
		t.Helper()
		var re *store.RunError
		var inner E
		if !errors.As(err, &re) || re.Index != index || !errors.As(err, &inner) {
			t.Errorf("err = %v, want a RunError of event %d wrapping %T", err, index, inner)
		}
	}
}

func wantLookupError(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, errLookup) || err != errLookup {
		t.Errorf("err = %v, want the lookup's error unchanged", err)
	}
}

// TestCheckBatch: the batch rules and their exact messages.
func TestCheckBatch(t *testing.T) {
	ok := ev(t, "ev-a", "k-a", "a")
	other := storetest.EventWithID(t, "S-other", "ev-o", "k-o", "o")
	tooMany := make([]*contract.EncodedEvent, store.MaxBatchEvents+1)
	for i := range tooMany {
		tooMany[i] = ok
	}
	cases := []struct {
		name  string
		batch []*contract.EncodedEvent
		want  string
		is    func(error) bool
	}{
		{"a full batch passes", tooMany[:store.MaxBatchEvents], "", nil},
		{"an empty batch passes", nil, "", nil},
		{"too many events", tooMany, `append to session "S-plan": batch has 1001 events; at most 1000 are allowed per append`,
			func(err error) bool { var le *store.LimitError; return errors.As(err, &le) && le.What == "batch" }},
		{"a nil event", []*contract.EncodedEvent{ok, nil}, `append to session "S-plan": event 1 is nil`, nil},
		{"another session's event", []*contract.EncodedEvent{ok, other}, `append to session "S-plan": event 1 has sessionId "S-other" but is appended to session "S-plan"`,
			func(err error) bool { var me *store.SessionMismatchError; return errors.As(err, &me) && me.Index == 1 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := store.CheckBatch(sid, tc.batch)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("CheckBatch: %v", err)
				}
				return
			}
			if err == nil || err.Error() != tc.want || (tc.is != nil && !tc.is(err)) {
				t.Errorf("err = %v\nwant %s", err, tc.want)
			}
		})
	}
}

// TestPlanAppendAllocations: planning a batch of new events costs one allocation per event
// (its canonical bytes) and a fixed number per batch, whatever the batch's size.
func TestPlanAppendAllocations(t *testing.T) {
	batch := storetest.Batch(t, sid, "k", 64)
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := store.PlanAppend(sid, -1, batch, store.AppendOptions{}, nopLookup{}); err != nil {
			t.Fatal(err)
		}
	})
	// 64 canonical encodings, results, datas, the two maps of the batch (and their buckets),
	// the added events.
	if allocs > 64+16 {
		t.Errorf("%v allocations for a batch of 64, want at most %d", allocs, 64+16)
	}
}

// nopLookup is a log with nothing stored.
type nopLookup struct{}

func (nopLookup) StoredKey(string) (int64, []byte, bool, error) { return 0, nil, false, nil }
func (nopLookup) Stored(*contract.EncodedEvent, int64, []byte) (store.StoredMatch, error) {
	return store.StoredMatch{}, nil
}
func (nopLookup) Run(string) (store.StoredRun, bool, error) { return store.StoredRun{}, false, nil }
func (nopLookup) ActiveRuns() ([]store.StoredRun, error)    { return nil, nil }
func (nopLookup) Lease(string) (*store.Lease, error)        { return nil, nil }

// BenchmarkPlanAppend: the planner alone, a batch of 64 new events against an empty log.
func BenchmarkPlanAppend(b *testing.B) {
	batch := storetest.Batch(b, sid, "k", 64)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := store.PlanAppend(sid, -1, batch, store.AppendOptions{}, nopLookup{}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestStoredDuplicates: a batch answers as duplicates only when every event is stored with the
// same content under its key (a repeat within the batch is looked up like the others), and the
// lookups stop at the first event that is not.
func TestStoredDuplicates(t *testing.T) {
	a, b, c := ev(t, "ev-a", "key-a", "x"), ev(t, "ev-b", "key-b", "x"), ev(t, "ev-c", "key-c", "x")
	stored := map[string]struct {
		seq  int64
		data []byte
	}{"key-a": {3, a.JSON(3)}, "key-b": {7, b.JSON(7)}, "key-c": {9, []byte(`{"other":"content"}`)}}
	lookups := 0
	lookup := func(batch []*contract.EncodedEvent) func(i int) (int64, bool, error) {
		return func(i int) (int64, bool, error) {
			lookups++
			s, ok := stored[batch[i].IdempotencyKey]
			return s.seq, ok && batch[i].SameContent(s.data), nil
		}
	}
	for _, tc := range []struct {
		name  string
		batch []*contract.EncodedEvent
		ok    bool
		seqs  []int64
		asked int // lookups made: none after the first miss
	}{
		{"one", []*contract.EncodedEvent{a}, true, []int64{3}, 1},
		{"two and a repeat", []*contract.EncodedEvent{b, a, b}, true, []int64{7, 3, 7}, 3},
		{"other content", []*contract.EncodedEvent{a, c, b}, false, nil, 2},
		{"a new event", []*contract.EncodedEvent{a, ev(t, "ev-n", "key-n", "x")}, false, nil, 2},
		{"empty", nil, false, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lookups = 0
			res, ok, err := store.StoredDuplicates(tc.batch, lookup(tc.batch))
			if err != nil || ok != tc.ok || lookups != tc.asked {
				t.Fatalf("ok = %v, %v after %d lookups; want %v after %d", ok, err, lookups, tc.ok, tc.asked)
			}
			for i, r := range res {
				if !r.Duplicate || r.Sequence != tc.seqs[i] || r.EventID != tc.batch[i].EventID {
					t.Errorf("result %d: %+v; want a duplicate at %d", i, r, tc.seqs[i])
				}
			}
		})
	}
}

// TestUnconditional: the batches Unconditional accepts are accepted whole by PlanAppend, as
// AcceptAll says, whatever else the log holds (other events, runs, a leased run); the ones it
// refuses can be decided by something else than their keys and eventIds.
func TestUnconditional(t *testing.T) {
	withRun := func(evs ...*contract.EncodedEvent) []*contract.EncodedEvent {
		for _, e := range evs {
			e.RunID = "R-1"
		}
		return evs
	}
	cases := []struct {
		name  string
		batch []*contract.EncodedEvent
		opts  store.AppendOptions
		want  bool
	}{
		{"one", []*contract.EncodedEvent{ev(t, "ev-a", "a", "x")}, store.AppendOptions{}, true},
		{"three", []*contract.EncodedEvent{ev(t, "ev-a", "a", "x"), ev(t, "ev-b", "b", "x"), ev(t, "ev-c", "c", "y")}, store.AppendOptions{}, true},
		{"heartbeat and empty fence", []*contract.EncodedEvent{ev(t, "ev-a", "a", "x")}, store.AppendOptions{Heartbeat: time.Now(), Fence: &store.Fence{}}, true},
		{"expected sequence", []*contract.EncodedEvent{ev(t, "ev-a", "a", "x")}, store.AppendOptions{ExpectedSequence: seq(1)}, true},
		{"run id without fence", withRun(ev(t, "ev-a", "a", "x")), store.AppendOptions{}, true},
		{"empty", nil, store.AppendOptions{}, false},
		{"run status", []*contract.EncodedEvent{run(t, "a", "R-2", "M-1", contract.RunStatusQueued)}, store.AppendOptions{}, false},
		{"run id under a fence", withRun(ev(t, "ev-a", "a", "x")), store.AppendOptions{Fence: &store.Fence{}}, false},
		{"key twice", []*contract.EncodedEvent{ev(t, "ev-a", "a", "x"), ev(t, "ev-b", "a", "x")}, store.AppendOptions{}, false},
		{"event id twice", []*contract.EncodedEvent{ev(t, "ev-a", "a", "x"), ev(t, "ev-a", "b", "x")}, store.AppendOptions{}, false},
		{"too big at a long sequence", []*contract.EncodedEvent{nearLimit(t)}, store.AppendOptions{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := store.Unconditional(tc.batch, tc.opts); got != tc.want {
				t.Fatalf("Unconditional = %v, want %v", got, tc.want)
			}
			if !tc.want {
				return
			}
			// A log with other events and a leased, active run: none of it matters.
			f := &fakeLog{events: logOf(ev(t, "ev-o1", "o1", "x"), ev(t, "ev-o2", "o2", "x")),
				runs:   []store.StoredRun{storedRun("R-1", "M-1", contract.RunStatusRunning, 0)},
				leases: map[string]*store.Lease{"R-1": {LeaseID: "L-1", Token: 1, ExpiresAt: time.Now().Add(time.Hour)}}}
			plan, err := store.PlanAppend(sid, f.last(), tc.batch, tc.opts, f)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := res(plan.Results), res(store.AcceptAll(f.last(), tc.batch)); got != want {
				t.Errorf("PlanAppend = %s, AcceptAll = %s", got, want)
			}
			checkAdded(t, tc.batch, plan)
			if plan.Last != f.last()+int64(len(tc.batch)) {
				t.Errorf("Last = %d, want %d", plan.Last, f.last()+int64(len(tc.batch)))
			}
		})
	}
	// The refused ones: the lease of a stored run decides an event under a fence.
	f := &fakeLog{runs: []store.StoredRun{storedRun("R-1", "M-1", contract.RunStatusRunning, 0)},
		leases: map[string]*store.Lease{"R-1": {LeaseID: "L-1", Token: 1, ExpiresAt: time.Now().Add(time.Hour)}}}
	if _, err := store.PlanAppend(sid, -1, withRun(ev(t, "ev-a", "a", "x")), store.AppendOptions{Fence: &store.Fence{}}, f); err == nil {
		t.Error("an event of a leased run without the lease was accepted")
	}
}

// nearLimit returns an event within MaxEventBytes at sequence 0 but not at the largest sequence.
func nearLimit(t *testing.T) *contract.EncodedEvent {
	over := len(storetest.BigEvent(t, sid, "big", 1000).JSON(0)) - 1000 // the bytes around the chunk
	e := storetest.BigEvent(t, sid, "big", store.MaxEventBytes-over-5)
	if n := len(e.JSON(0)); n > store.MaxEventBytes || n+18 <= store.MaxEventBytes {
		t.Fatalf("the event has %d bytes, want within %d but not with 19 digits", n, store.MaxEventBytes)
	}
	return e
}
