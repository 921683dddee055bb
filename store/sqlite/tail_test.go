package sqlite

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/storetest"
)

// TestTail follows events through the two tables: small appends go to event_tail, the group
// that brings the tail to tail_rows starts a pass that copies a row into events with each
// commit and deletes the copied rows at its end, a large append goes to events directly, and
// reads (before and after a reopen) see one log in order throughout, each event once.
func TestTail(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	setTailRows(t, dir, 4) // a pass copies max(4/moveChunks, 1) = 1 row per group
	st := openAt(t, dir)
	const id = "S-tail"
	if err := st.CreateSession(ctx, storetest.NewSession(id, storetest.SessionSpec{})); err != nil {
		t.Fatal(err)
	}
	var sent, other []*contract.EncodedEvent // the events of id, and those of S-big
	single := func(st *Store) {
		t.Helper()
		e := storetest.EventWithID(t, id, fmt.Sprintf("e-%d", len(sent)), fmt.Sprintf("k-%d", len(sent)), "small")
		if _, err := st.Append(ctx, id, []*contract.EncodedEvent{e}, store.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
		sent = append(sent, e)
	}
	// check reads the log and returns the rows of events and event_tail, and the live rows of
	// the tail (not copied by the pass yet).
	check := func(st *Store) (events, tail, live int) {
		t.Helper()
		if err := st.rdb.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM event_tail), (SELECT count(*) FROM event_tail_live)`).Scan(&events, &tail, &live); err != nil {
			t.Fatal(err)
		}
		if events+live != len(sent)+len(other) {
			t.Fatalf("after %d events: %d rows in events and %d live ones in event_tail", len(sent)+len(other), events, live)
		}
		// Each session's rows in events come before its live rows in the tail.
		var out int
		if err := st.rdb.QueryRowContext(ctx, `SELECT count(*) FROM sessions AS s
			WHERE (SELECT max(rid) FROM events WHERE rid >= (s.sk << 32) AND rid < ((s.sk + 1) << 32)) >
				(SELECT min(rid) FROM event_tail_live WHERE rid >= (s.sk << 32) AND rid < ((s.sk + 1) << 32))`).Scan(&out); err != nil || out != 0 {
			t.Fatalf("%d sessions with rows in events after rows in the tail (%v)", out, err)
		}
		got, err := st.ReadEvents(ctx, id, -1, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(sent) {
			t.Fatalf("read %d events, want %d", len(got), len(sent))
		}
		for i, e := range got {
			if e.Sequence != int64(i) || e.IdempotencyKey != sent[i].IdempotencyKey || string(e.Data) != string(sent[i].JSON(int64(i))) {
				t.Fatalf("event %d read as sequence %d key %q, want key %q", i, e.Sequence, e.IdempotencyKey, sent[i].IdempotencyKey)
			}
		}
		data, n, err := st.AppendEventsData(ctx, id, 1, 100, ',', nil)
		if err != nil || n != len(sent)-2 || !strings.HasPrefix(string(data), string(sent[2].JSON(2))) {
			t.Fatalf("AppendEventsData after sequence 1 = %d events, %v; want %d from sequence 2", n, err, len(sent)-2)
		}
		last, err := st.LastSequence(ctx, id)
		if err != nil || last != int64(len(sent)-1) {
			t.Fatalf("LastSequence = %d, %v; want %d", last, err, len(sent)-1)
		}
		return events, tail, live
	}
	for range 3 {
		single(st)
	}
	if e, tl, _ := check(st); e != 0 || tl != 3 {
		t.Fatalf("3 small appends: %d rows in events, %d in event_tail; want 0 and 3", e, tl)
	}
	single(st) // the fourth row: its group starts a pass and copies one row
	if e, tl, live := check(st); e != 1 || tl != 4 || live != 3 {
		t.Fatalf("a pass's first group: events %d, event_tail %d (%d live); want 1, 4 (3 live)", e, tl, live)
	}
	// A large append goes to events, after its session's live rows in the tail.
	big := func(id string) []*contract.EncodedEvent {
		var evs []*contract.EncodedEvent
		for i := range 10 {
			evs = append(evs, storetest.EventWithID(t, id, fmt.Sprintf("big-e-%d", i), fmt.Sprintf("big-k-%d", i), strings.Repeat(benchChunk, 4)))
		}
		if _, err := st.Append(ctx, id, evs, store.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
		return evs
	}
	if err := st.CreateSession(ctx, storetest.NewSession("S-big", storetest.SessionSpec{})); err != nil {
		t.Fatal(err)
	}
	other = big("S-big")
	if e, tl, _ := check(st); e != 13 || tl != 4 { // 10 written directly; the create and the append each copied 1
		t.Fatalf("a large append of another session: events %d, event_tail %d; want 13 and 4", e, tl)
	}
	sent = append(sent, big(id)...)
	if e, tl, _ := check(st); e != 24 || tl != 0 { // the session's rows left the tail with it
		t.Fatalf("a large append of a session with rows in the tail: events %d, event_tail %d; want 24 and 0", e, tl)
	}
	// Resent, every event is a duplicate of its sequence, wherever it is.
	for i, e := range sent {
		res, err := st.Append(ctx, id, []*contract.EncodedEvent{e}, store.AppendOptions{})
		if err != nil || !res[0].Duplicate || res[0].Sequence != int64(i) {
			t.Fatalf("resending event %d = %+v, %v; want a duplicate of sequence %d", i, res, err, i)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = openAt(t, dir)
	check(st)
	ended := false
	for range 12 {
		single(st)
		if _, tl, live := check(st); tl == live {
			ended = true // no copied row left behind: a pass has ended (or none runs)
		}
	}
	if !ended {
		t.Fatal("no pass ended in 12 groups")
	}
}

// TestTailKeepsUp: when groups bring more small-append rows than a pass of tail_rows copies
// per group (256 writers of 4 events each: up to 1,024 rows a group against 128), the chunks
// grow with the tail, which stays within about eight groups' worth of rows. With chunks of
// tail_rows/8 rows it grew to about 30,000 rows of the 40,960 appended.
func TestTailKeepsUp(t *testing.T) {
	ctx := context.Background()
	st := openAt(t, t.TempDir())
	const sessions, rounds = 256, 40
	for s := range sessions {
		if err := st.CreateSession(ctx, storetest.NewSession(fmt.Sprintf("S-%d", s), storetest.SessionSpec{})); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for s := range sessions {
		wg.Go(func() {
			id := fmt.Sprintf("S-%d", s)
			for r := range rounds {
				var evs []*contract.EncodedEvent
				for k := range 4 {
					evs = append(evs, storetest.EventWithID(t, id, fmt.Sprintf("e-%d-%d", r, k), fmt.Sprintf("k-%d-%d", r, k), "x"))
				}
				if _, err := st.Append(ctx, id, evs, store.AppendOptions{}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	var tail, events int
	if err := st.rdb.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM event_tail), (SELECT count(*) FROM events)`).Scan(&tail, &events); err != nil {
		t.Fatal(err)
	}
	t.Logf("after %d events: %d rows in event_tail, %d in events", sessions*rounds*4, tail, events)
	if max := 8*sessions*4 + 1024; tail > max {
		t.Errorf("the tail holds %d rows, more than eight groups' worth (%d): the move does not keep up", tail, max)
	}
}
