package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// wantChange is the part of a store.Change a test checks.
type wantChange struct {
	kind, session, run, status, previous string
}

func (w wantChange) String() string {
	return fmt.Sprintf("%s %s %s %s<-%s", w.kind, w.session, w.run, w.status, w.previous)
}

// gotChanges reduces changes to what the tests check, and fails the test unless their
// sequences are from+1, from+2, ... without a gap.
func gotChanges(t *testing.T, from int64, cs []store.Change) []wantChange {
	t.Helper()
	out := make([]wantChange, len(cs))
	for i, c := range cs {
		if c.Seq != from+int64(i)+1 {
			t.Fatalf("change %d has seq %d, want %d (no gap): %+v", i, c.Seq, from+int64(i)+1, cs)
		}
		if c.At.IsZero() {
			t.Errorf("change %d has no time", c.Seq)
		}
		out[i] = wantChange{c.Kind, c.SessionID, c.RunID, c.Status, c.Previous}
	}
	return out
}

// readAllChanges reads every change after after matching f, page by page (pages of limit).
func readAllChanges(t *testing.T, ctx context.Context, st store.Store, after int64, f store.ChangeFilter, limit int) []store.Change {
	t.Helper()
	var out []store.Change
	for {
		cs, err := st.ReadChanges(ctx, after, f, limit)
		if err != nil {
			t.Fatalf("ReadChanges(%d, %+v): %v", after, f, err)
		}
		out = append(out, cs...)
		if len(cs) < store.ChangesLimit(limit) {
			return out
		}
		after = cs[len(cs)-1].Seq
	}
}

// waitChanges waits until the store's last change is at least n: a driver may number changes
// right after their commit rather than in it (store/changes.go).
func waitChanges(t *testing.T, ctx context.Context, st store.Store, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		last, err := st.LastChange(ctx)
		if err != nil {
			t.Fatalf("LastChange: %v", err)
		}
		if last >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the last change is %d after 10 s, want %d", last, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// setStatus sets the session's record status with UpdateSession.
func setStatus(t *testing.T, ctx context.Context, st store.Store, id, status string) {
	t.Helper()
	if _, err := st.UpdateSession(ctx, id, func(s *store.Session) error { s.Record.Status = status; return nil }); err != nil {
		t.Fatalf("UpdateSession %s to %s: %v", id, status, err)
	}
}

func (s *suite) testChanges(t *testing.T) {
	t.Run("KindsOrderAndFilters", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		st := s.h.Open(t)
		if n, err := st.LastChange(ctx); err != nil || n != 0 {
			t.Fatalf("LastChange of an empty store = %d, %v; want 0", n, err)
		}
		queue(t, ctx, st, "S-1", "R-1", SessionSpec{Project: "p1", AgentID: "a1"})
		if err := st.CreateSession(ctx, NewSession("S-2", SessionSpec{Project: "p2", AgentID: "a2"})); err != nil {
			t.Fatal(err)
		}
		c := claim(t, ctx, st, store.ClaimFilter{}, "L-1")
		ref := c.Lease.Ref()
		mustAppend(t, ctx, st, "S-1", []*contract.EncodedEvent{
			RunStatusEvent(t, "S-1", "run-1", "R-1", "M-R-1", "running"),
			RunStatusEvent(t, "S-1", "done-1", "R-1", "M-R-1", "completed"),
		}, store.AppendOptions{Fence: &store.Fence{Lease: &ref}})
		// A refused append (a transition the projection refuses) records nothing.
		if _, err := st.Append(ctx, "S-1", []*contract.EncodedEvent{RunStatusEvent(t, "S-1", "again-1", "R-1", "M-R-1", "running")}, store.AppendOptions{}); err == nil {
			t.Fatal("Append of completed -> running succeeded; want a refusal")
		}
		setStatus(t, ctx, st, "S-2", "paused")
		setStatus(t, ctx, st, "S-2", "paused") // no change, no record
		setStatus(t, ctx, st, "S-2", "stale")
		// A heartbeat brings a stale session back to running.
		mustAppend(t, ctx, st, "S-2", Batch(t, "S-2", "hb", 1), store.AppendOptions{Heartbeat: t0})
		if _, _, err := st.UpdateLifecycle(ctx, "S-1", func(s *store.Session, _ *store.Lifecycle) error {
			s.Record.Status = contract.SessionStatusArchived
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		setStatus(t, ctx, st, "S-1", "closed")

		all := []wantChange{
			{store.ChangeSessionCreated, "S-1", "", "running", ""},
			{store.ChangeRunQueued, "S-1", "R-1", "queued", ""},
			{store.ChangeSessionCreated, "S-2", "", "running", ""},
			{store.ChangeRunClaimed, "S-1", "R-1", "queued", ""},
			{store.ChangeRunFinished, "S-1", "R-1", "completed", "queued"}, // the status before the commit
			{store.ChangeSessionStatus, "S-2", "", "paused", "running"},
			{store.ChangeSessionStatus, "S-2", "", "stale", "paused"},
			{store.ChangeSessionStatus, "S-2", "", "running", "stale"},
			{store.ChangeSessionArchived, "S-1", "", "archived", "running"},
			{store.ChangeSessionRestored, "S-1", "", "closed", "archived"},
		}
		waitChanges(t, ctx, st, int64(len(all)))
		cs := readAllChanges(t, ctx, st, 0, store.ChangeFilter{}, 0)
		if got := gotChanges(t, 0, cs); !slices.Equal(got, all) {
			t.Fatalf("changes:\n got %v\nwant %v", got, all)
		}
		if cs[3].Token != 1 || cs[3].Attempt != 1 || cs[0].Project != "p1" || cs[0].AgentID != "a1" {
			t.Errorf("claimed change %+v / created change %+v: want token 1, attempt 1, project p1, agent a1", cs[3], cs[0])
		}
		if n, err := st.LastChange(ctx); err != nil || n != int64(len(all)) {
			t.Errorf("LastChange = %d, %v; want %d", n, err, len(all))
		}
		for _, tc := range []struct {
			name  string
			after int64
			f     store.ChangeFilter
			limit int
			want  []int64 // seqs
		}{
			{"all in pages of 3", 0, store.ChangeFilter{}, 3, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
			{"after 8", 8, store.ChangeFilter{}, 0, []int64{9, 10}},
			{"after the end", 10, store.ChangeFilter{}, 0, nil},
			{"project p1", 0, store.ChangeFilter{Project: "p1"}, 0, []int64{1, 2, 4, 5, 9, 10}},
			{"project p2 in pages of 1", 0, store.ChangeFilter{Project: "p2"}, 1, []int64{3, 6, 7, 8}},
			{"agent a2 after 6", 6, store.ChangeFilter{AgentID: "a2"}, 0, []int64{7, 8}},
			{"project and agent", 0, store.ChangeFilter{Project: "p1", AgentID: "a2"}, 0, nil},
			{"unknown project", 0, store.ChangeFilter{Project: "nope"}, 0, nil},
		} {
			var got []int64
			for _, c := range readAllChanges(t, ctx, st, tc.after, tc.f, tc.limit) {
				if !tc.f.Match(&c) {
					t.Errorf("%s: change %+v does not match the filter", tc.name, c)
				}
				got = append(got, c.Seq)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s: seqs %v, want %v", tc.name, got, tc.want)
			}
		}
	})

	t.Run("ManyRunsInOneBatch", func(t *testing.T) {
		// A batch that creates many runs (more than a driver may write in one statement) and
		// changes a stored one records their changes in the order the batch changed them, and
		// the runs keep the order they were created in.
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		st := s.h.Open(t)
		if err := st.CreateSession(ctx, NewSession("S-1", SessionSpec{})); err != nil {
			t.Fatal(err)
		}
		var evs []*contract.EncodedEvent
		want := []wantChange{{store.ChangeSessionCreated, "S-1", "", "running", ""}}
		var order []string
		ends := []string{"completed", "failed"}
		for i := range 70 {
			run, end := fmt.Sprintf("R-%02d", i), ends[i%len(ends)]
			evs = append(evs, RunStatusEvent(t, "S-1", run+"-a", run, "M-"+run, "running"),
				RunStatusEvent(t, "S-1", run+"-b", run, "M-"+run, end))
			want = append(want, wantChange{store.ChangeRunFinished, "S-1", run, end, ""})
			order = append(order, run)
		}
		evs = append(evs, RunStatusEvent(t, "S-1", "Q-a", "Q", "M-Q", "queued"))
		want = append(want, wantChange{store.ChangeRunQueued, "S-1", "Q", "queued", ""})
		order = append(order, "Q")
		mustAppend(t, ctx, st, "S-1", evs, store.AppendOptions{Fence: &store.Fence{}})
		// The stored run first, then new runs after it.
		mustAppend(t, ctx, st, "S-1", []*contract.EncodedEvent{
			RunStatusEvent(t, "S-1", "Q-b", "Q", "M-Q", "running"),
			RunStatusEvent(t, "S-1", "Q-c", "Q", "M-Q", "completed"),
			RunStatusEvent(t, "S-1", "N-a", "N", "M-N", "running"),
			RunStatusEvent(t, "S-1", "N-b", "N", "M-N", "completed"),
			RunStatusEvent(t, "S-1", "O-a", "O", "M-O", "queued"),
		}, store.AppendOptions{Fence: &store.Fence{}})
		want = append(want, wantChange{store.ChangeRunFinished, "S-1", "Q", "completed", "queued"},
			wantChange{store.ChangeRunFinished, "S-1", "N", "completed", ""},
			wantChange{store.ChangeRunQueued, "S-1", "O", "queued", ""})
		order = append(order, "N", "O")
		waitChanges(t, ctx, st, int64(len(want)))
		if got := gotChanges(t, 0, readAllChanges(t, ctx, st, 0, store.ChangeFilter{}, 0)); !slices.Equal(got, want) {
			t.Fatalf("changes:\n got %v\nwant %v", got, want)
		}
		runs, err := st.Runs(ctx, "S-1")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range runs {
			got = append(got, r.RunID)
		}
		if !slices.Equal(got, order) {
			t.Fatalf("runs in order %v, want %v", got, order)
		}
		leases, err := st.RunLeases(ctx, "S-1")
		if err != nil {
			t.Fatal(err)
		}
		if len(leases) != len(order) || leases[len(leases)-1].RunID != "O" || leases[len(leases)-1].Attempt != 1 {
			t.Fatalf("run leases %+v: want %d, the last O with attempt 1", leases, len(order))
		}
		c := claim(t, ctx, st, store.ClaimFilter{}, "L-1")
		if c.SessionID != "S-1" || c.Run.RunID != "O" {
			t.Fatalf("claimed %s %s, want S-1 O", c.SessionID, c.Run.RunID)
		}
	})

	t.Run("SubscribeAndResumeAfterReopen", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		st := s.h.Open(t)
		heard := make(chan int64, 100)
		stop := st.SubscribeChanges(func(seq int64) {
			select {
			case heard <- seq:
			default:
			}
		})
		if err := st.CreateSession(ctx, NewSession("S-1", SessionSpec{})); err != nil {
			t.Fatal(err)
		}
		waitHeard(t, heard, 1)
		// A commit without a change (an append of a plain event) says nothing new.
		mustAppend(t, ctx, st, "S-1", Batch(t, "S-1", "k", 1), store.AppendOptions{})
		queue(t, ctx, st, "S-2", "R-2", SessionSpec{})
		waitHeard(t, heard, 3)
		stop()
		if s.h.Reopen == nil {
			return
		}
		st = s.h.Reopen(t, st)
		waitChanges(t, ctx, st, 3)
		cs := readAllChanges(t, ctx, st, 1, store.ChangeFilter{}, 0)
		if got := gotChanges(t, 1, cs); len(got) != 2 || got[1].kind != store.ChangeRunQueued {
			t.Fatalf("after reopen, changes after 1 = %v; want session.created S-2, run.queued R-2", got)
		}
		if err := st.CreateSession(ctx, NewSession("S-3", SessionSpec{})); err != nil {
			t.Fatal(err)
		}
		waitChanges(t, ctx, st, 4)
		if got := gotChanges(t, 3, readAllChanges(t, ctx, st, 3, store.ChangeFilter{}, 0)); len(got) != 1 || got[0].session != "S-3" {
			t.Errorf("the first change after reopen = %v; want seq 4, S-3 created", got)
		}
	})

	t.Run("ConcurrentWritersNoGap", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		st := s.h.Open(t)
		stores := []store.Store{st}
		if s.h.Second != nil {
			stores = append(stores, s.h.Second(t, st))
		}
		const writers, each = 8, 10
		// A reader follows the feed while the writers write: every read must continue the
		// previous one without a gap, whichever instance committed.
		done := make(chan struct{})
		readErr := make(chan error, 1)
		go func() {
			var last int64
			rd := stores[len(stores)-1]
			for {
				select {
				case <-done:
					readErr <- nil
					return
				default:
				}
				cs, err := rd.ReadChanges(ctx, last, store.ChangeFilter{}, 0)
				if err != nil {
					readErr <- err
					return
				}
				for _, c := range cs {
					if c.Seq != last+1 {
						readErr <- fmt.Errorf("read seq %d after %d: a gap", c.Seq, last)
						return
					}
					last = c.Seq
				}
			}
		}()
		var wg sync.WaitGroup
		errs := make(chan error, writers*each)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				wst := stores[w%len(stores)]
				for i := range each {
					id := fmt.Sprintf("S-%d-%d", w, i)
					if err := wst.CreateSession(ctx, NewSession(id, SessionSpec{})); err != nil {
						errs <- err
						return
					}
					if i%3 == 0 {
						if _, err := wst.UpdateSession(ctx, id, func(s *store.Session) error { s.Record.Status = "paused"; return nil }); err != nil {
							errs <- err
							return
						}
					}
				}
			}()
		}
		wg.Wait()
		close(done)
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if err := <-readErr; err != nil {
			t.Fatal(err)
		}
		want := writers * (each + (each+2)/3)
		waitChanges(t, ctx, stores[0], int64(want))
		cs := readAllChanges(t, ctx, stores[0], 0, store.ChangeFilter{}, 0)
		got := gotChanges(t, 0, cs)
		if len(got) != want {
			t.Fatalf("%d changes, want %d", len(got), want)
		}
		created := map[string]int{}
		for _, c := range got {
			if c.kind == store.ChangeSessionCreated {
				created[c.session]++
			} else if created[c.session] != 1 {
				t.Errorf("%v comes before the session's creation", c)
			}
		}
		if len(created) != writers*each {
			t.Errorf("%d sessions created in the feed, want %d", len(created), writers*each)
		}
	})
}

// waitHeard waits until the change subscriber hears of seq or a later one.
func waitHeard(t *testing.T, heard <-chan int64, seq int64) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case n := <-heard:
			if n >= seq {
				return
			}
		case <-timeout:
			t.Fatalf("SubscribeChanges did not report seq %d within 10 s", seq)
		}
	}
}
