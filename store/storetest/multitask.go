package storetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// testMultitask checks the runs an append enqueues behind the active one
// (AppendOptions.Enqueue): accepted only when asked for and created queued, claimable only
// once every run created before them has ended, in order; and AppendOptions.Interrupt:
// decided in the appending transaction, never for a retried batch, once per run when racing.
func (s *suite) testMultitask(t *testing.T) {
	t.Run("EnqueueBehindActive", func(t *testing.T) {
		t.Parallel()
		ctx, st, _ := s.setup(t)
		const id = "S-mt"
		queue(t, ctx, st, id, "R-1", SessionSpec{})
		if c := claim(t, ctx, st, store.ClaimFilter{}, "L-1"); c.Run.RunID != "R-1" {
			t.Fatalf("claim = %+v, want R-1", c)
		}
		mustAppend(t, ctx, st, id, []*contract.EncodedEvent{RunStatusEvent(t, id, "r1-running", "R-1", "M-R-1", "running")}, store.AppendOptions{})

		// Without Enqueue a new run is refused while R-1 is active, queued or not.
		_, err := st.Append(ctx, id, []*contract.EncodedEvent{RunStatusEvent(t, id, "r2-queued", "R-2", "M-R-2", "queued")}, store.AppendOptions{})
		var active *contract.ActiveRunError
		if !errors.As(err, &active) || active.ActiveRunID != "R-1" || active.Status != "queued" {
			t.Fatalf("a new queued run without Enqueue: %v, want an ActiveRunError naming R-1", err)
		}
		// With it, only a run created queued waits.
		if _, err := st.Append(ctx, id, []*contract.EncodedEvent{RunStatusEvent(t, id, "r2-running", "R-2", "M-R-2", "running")}, store.AppendOptions{Enqueue: true}); !errors.As(err, &active) {
			t.Fatalf("a new running run with Enqueue: %v, want an ActiveRunError", err)
		}
		mustAppend(t, ctx, st, id, []*contract.EncodedEvent{RunStatusEvent(t, id, "r2-queued", "R-2", "M-R-2", "queued")}, store.AppendOptions{Enqueue: true})
		mustAppend(t, ctx, st, id, []*contract.EncodedEvent{RunStatusEvent(t, id, "r3-queued", "R-3", "M-R-3", "queued")}, store.AppendOptions{Enqueue: true})
		nothing := func(when string) {
			t.Helper()
			if c, err := st.ClaimRun(ctx, store.ClaimFilter{}, "L-x", t0.Add(time.Minute)); !errors.Is(err, store.ErrNothingToClaim) {
				t.Fatalf("%s: claim = %+v, %v; want ErrNothingToClaim", when, c, err)
			}
		}
		nothing("while R-1 runs")
		runs, err := st.Runs(ctx, id)
		if err != nil || len(runs) != 3 || runs[1].Status != "queued" || runs[2].Status != "queued" {
			t.Fatalf("Runs = %+v, %v", runs, err)
		}
		if cur := contract.CurrentRun(runs); cur.RunID != "R-1" {
			t.Errorf("current run = %s, want R-1 (the one working)", cur.RunID)
		}

		// R-1 ends: R-2 is claimable, R-3 still waits behind it. A driver whose commits carry
		// their events says so in the commit (the wake-up of waiting claims).
		seen := make(chan store.Commit, 4)
		unsubscribe := st.Subscribe(func(c store.Commit) {
			if c.SessionID == id {
				seen <- c
			}
		})
		mustAppend(t, ctx, st, id, []*contract.EncodedEvent{RunStatusEvent(t, id, "r1-completed", "R-1", "M-R-1", "completed")}, store.AppendOptions{})
		if st.Capabilities().CommitCarriesEvents {
			select {
			case c := <-seen:
				if !c.Claimable {
					t.Errorf("the commit that ended R-1 says no run became claimable: %+v", c)
				}
			case <-time.After(5 * time.Second):
				t.Error("no commit reported for the append that ended R-1")
			}
		}
		unsubscribe()
		if c := claim(t, ctx, st, store.ClaimFilter{}, "L-2"); c.Run.RunID != "R-2" || c.Run.Status != "queued" {
			t.Fatalf("claim after R-1 ended = %+v, want R-2", c)
		}
		nothing("while R-2 is held")

		// The server stops R-2 on a person's behalf although a worker holds it: the events of
		// an Interrupt are not fenced, the batch's are.
		stop := []*contract.EncodedEvent{RunStatusEvent(t, id, "r2-stopping", "R-2", "M-R-2", "stopping")}
		var lerr *store.LeaseError
		if _, err := st.Append(ctx, id, stop, store.AppendOptions{Fence: &store.Fence{}}); !errors.As(err, &lerr) {
			t.Fatalf("a fenced stop of a leased run: %v, want a LeaseError", err)
		}
		res := mustAppend(t, ctx, st, id, []*contract.EncodedEvent{RunStatusEvent(t, id, "r4-queued", "R-4", "M-R-4", "queued")},
			store.AppendOptions{Fence: &store.Fence{}, Enqueue: true, Interrupt: Interrupter(t, id)})
		if len(res) != 2 {
			t.Fatalf("the interrupting append answered %+v, want the stop of R-2 and R-4", res)
		}
		mustAppend(t, ctx, st, id, []*contract.EncodedEvent{RunStatusEvent(t, id, "r2-stopped", "R-2", "M-R-2", "stopped")}, store.AppendOptions{})
		if c := claim(t, ctx, st, store.ClaimFilter{}, "L-3"); c.Run.RunID != "R-3" {
			t.Fatalf("claim after R-2 stopped = %+v, want R-3", c)
		}
	})

	t.Run("InterruptInTheTransaction", func(t *testing.T) {
		t.Parallel()
		ctx, st, _ := s.setup(t)
		const id = "S-mt-int"
		queue(t, ctx, st, id, "R-1", SessionSpec{})
		c := claim(t, ctx, st, store.ClaimFilter{}, "L-1")
		mustAppend(t, ctx, st, id, []*contract.EncodedEvent{RunStatusEvent(t, id, "r1-running", "R-1", "M-R-1", "running")}, store.AppendOptions{})
		opts := store.AppendOptions{Enqueue: true}
		var seen []string
		opts.Interrupt = func(cur *contract.Run, held *store.Lease) ([]*contract.EncodedEvent, error) {
			if cur == nil {
				seen = append(seen, "none")
			} else {
				seen = append(seen, cur.RunID+":"+cur.Status+":"+fmt.Sprint(held != nil && held.LeaseID == c.Lease.LeaseID))
			}
			return Interrupter(t, id)(cur, held)
		}
		batch := []*contract.EncodedEvent{RunStatusEvent(t, id, "r2-queued", "R-2", "M-R-2", "queued")}
		res := mustAppend(t, ctx, st, id, batch, opts)
		if len(res) != 2 || res[0].Duplicate || res[1].Duplicate || res[1].Sequence != res[0].Sequence+1 {
			t.Fatalf("interrupt: %+v, want the stop of R-1, then R-2", res)
		}
		if fmt.Sprint(seen) != "[R-1:running:true]" {
			t.Errorf("Interrupt saw %v, want the running R-1 and its lease", seen)
		}
		// R-1 stops, R-2 runs and completes, R-3 runs: the same batch again is a retry,
		// answered from the log without asking Interrupt, and R-3 goes on.
		mustAppend(t, ctx, st, id, []*contract.EncodedEvent{RunStatusEvent(t, id, "r1-stopped", "R-1", "M-R-1", "stopped")}, store.AppendOptions{})
		mustAppend(t, ctx, st, id, []*contract.EncodedEvent{RunStatusEvent(t, id, "r2-running", "R-2", "M-R-2", "running"), RunStatusEvent(t, id, "r2-completed", "R-2", "M-R-2", "completed"),
			RunStatusEvent(t, id, "r3-queued", "R-3", "M-R-3", "queued"), RunStatusEvent(t, id, "r3-running", "R-3", "M-R-3", "running")}, store.AppendOptions{})
		seen = nil
		res = mustAppend(t, ctx, st, id, batch, opts)
		if len(res) != 1 || !res[0].Duplicate || seen != nil {
			t.Fatalf("the retried interrupt: %+v (Interrupt saw %v), want one duplicate and no stop", res, seen)
		}
		if r, err := st.Run(ctx, id, "R-3"); err != nil || r.Status != "running" {
			t.Fatalf("R-3 after the retry = %+v, %v; want running", r, err)
		}
		// A refused batch names its own event, not the interrupt's.
		bad := []*contract.EncodedEvent{RunStatusEvent(t, id, "r5-queued", "R-5", "M-R-5", "queued"), RunStatusEvent(t, id, "r5-done", "R-5", "M-R-5", "completed")}
		var runErr *store.RunError
		if _, err := st.Append(ctx, id, bad, opts); !errors.As(err, &runErr) || runErr.Index != 1 {
			t.Fatalf("queued then completed: %v, want a RunError at event 1", err)
		}
	})

	t.Run("RacingInterrupts", func(t *testing.T) {
		t.Parallel()
		ctx, st, _ := s.setup(t)
		// Racing interrupts of a running run: one stopping; of a queued run nobody holds:
		// each stops the run the one before it queued. Every append is accepted.
		for _, running := range []bool{true, false} {
			id := fmt.Sprintf("S-mt-race-%v", running)
			queue(t, ctx, st, id, "R-1", SessionSpec{})
			if running {
				claim(t, ctx, st, store.ClaimFilter{}, "L-1")
				mustAppend(t, ctx, st, id, []*contract.EncodedEvent{RunStatusEvent(t, id, "r1-running", "R-1", "M-R-1", "running")}, store.AppendOptions{})
			}
			const n = 8
			errs := make(chan error, n)
			for i := range n {
				go func() {
					rid := fmt.Sprintf("R-x%d", i)
					_, err := st.Append(ctx, id, []*contract.EncodedEvent{RunStatusEvent(t, id, "q-"+rid, rid, "M-"+rid, "queued")},
						store.AppendOptions{Enqueue: true, Interrupt: Interrupter(t, id)})
					errs <- err
				}()
			}
			for range n {
				if err := <-errs; err != nil {
					t.Errorf("running %v: a racing interrupt: %v", running, err)
				}
			}
			stopping := map[string]int{}
			for _, e := range readAll(t, ctx, st, id) {
				if e.EventType == "status" && strings.Contains(string(e.Data), `"status":"stopping"`) {
					stopping[e.RunID]++
				}
			}
			runs, err := st.Runs(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			active := 0
			for _, r := range runs {
				if stopping[r.RunID] > 1 {
					t.Errorf("running %v: run %s has %d stopping events", running, r.RunID, stopping[r.RunID])
				}
				if !contract.IsTerminal(r.Status) {
					active++
				}
			}
			// Running: R-1 stopping and the 8 queued behind it. Queued: every run stopped but
			// the last one queued.
			if want := map[bool]int{true: n + 1, false: 1}[running]; active != want {
				t.Errorf("running %v: %d active runs (%+v), want %d", running, active, runs, want)
			}
		}
	})

	t.Run("EndAndEnqueueInOneBatch", func(t *testing.T) {
		t.Parallel()
		ctx, st, _ := s.setup(t)
		const id = "S-mt2"
		queue(t, ctx, st, id, "R-1", SessionSpec{})
		// One batch ends R-1 and queues R-2: R-2 is claimable at once.
		mustAppend(t, ctx, st, id, []*contract.EncodedEvent{
			RunStatusEvent(t, id, "r1-failed", "R-1", "M-R-1", "failed"),
			RunStatusEvent(t, id, "r2-queued", "R-2", "M-R-2", "queued"),
		}, store.AppendOptions{Enqueue: true})
		if c := claim(t, ctx, st, store.ClaimFilter{}, "L-1"); c.Run.RunID != "R-2" {
			t.Fatalf("claim = %+v, want R-2", c)
		}
		// A queue of two behind a run that fails in the batch that queues them: only the first
		// is claimable.
		mustAppend(t, ctx, st, id, []*contract.EncodedEvent{
			RunStatusEvent(t, id, "r3-queued", "R-3", "M-R-3", "queued"),
			RunStatusEvent(t, id, "r2-failed", "R-2", "M-R-2", "failed"),
			RunStatusEvent(t, id, "r4-queued", "R-4", "M-R-4", "queued"),
		}, store.AppendOptions{Enqueue: true})
		if c := claim(t, ctx, st, store.ClaimFilter{}, "L-2"); c.Run.RunID != "R-3" {
			t.Fatalf("claim = %+v, want R-3", c)
		}
		if c, err := st.ClaimRun(ctx, store.ClaimFilter{}, "L-3", t0.Add(time.Minute)); !errors.Is(err, store.ErrNothingToClaim) {
			t.Fatalf("R-4 waits behind R-3: claim = %+v, %v", c, err)
		}
	})

	t.Run("ImportKeepsTheQueueOrder", func(t *testing.T) {
		t.Parallel()
		ctx, st, _ := s.setup(t)
		// R-1 works and wait behind it; the session is exported and imported (as a
		// restore does) into another store. Only the earliest active run may be claimable
		// there too, by the rule of the append (CheckNewRun, CurrentRun): nothing, until R-1
		// ends, then R-2.
		const id = "S-mt-import"
		queue(t, ctx, st, id, "R-1", SessionSpec{})
		mustAppend(t, ctx, st, id, []*contract.EncodedEvent{RunStatusEvent(t, id, "r1-running", "R-1", "M-R-1", "running")}, store.AppendOptions{})
		mustAppend(t, ctx, st, id, []*contract.EncodedEvent{RunStatusEvent(t, id, "r2-queued", "R-2", "M-R-2", "queued")}, store.AppendOptions{Enqueue: true})
		mustAppend(t, ctx, st, id, []*contract.EncodedEvent{RunStatusEvent(t, id, "r3-queued", "R-3", "M-R-3", "queued")}, store.AppendOptions{Enqueue: true})
		runs, err := st.Runs(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		sess, err := st.GetSession(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		other := s.h.Open(t)
		if err := other.ImportSession(ctx, &store.Import{Session: sess, Events: readAll(t, ctx, st, id), Runs: runs}); err != nil {
			t.Fatalf("ImportSession: %v", err)
		}
		if c, err := other.ClaimRun(ctx, store.ClaimFilter{}, "L-x", t0.Add(time.Minute)); !errors.Is(err, store.ErrNothingToClaim) {
			t.Fatalf("after the import, while R-1 runs: claim = %+v, %v; want ErrNothingToClaim (R-2 and R-3 wait behind R-1)", c.Run, err)
		}
		mustAppend(t, ctx, other, id, []*contract.EncodedEvent{RunStatusEvent(t, id, "r1-completed", "R-1", "M-R-1", "completed")}, store.AppendOptions{})
		if c := claim(t, ctx, other, store.ClaimFilter{}, "L-2"); c.Run.RunID != "R-2" {
			t.Fatalf("claim after R-1 ended = %+v, want R-2", c.Run)
		}
		if c, err := other.ClaimRun(ctx, store.ClaimFilter{}, "L-3", t0.Add(time.Minute)); !errors.Is(err, store.ErrNothingToClaim) {
			t.Fatalf("R-3 waits behind R-2: claim = %+v, %v", c.Run, err)
		}

		// A session whose earliest active run is queued: that one is claimable after the
		// import, and only that one.
		const id2 = "S-mt-import2"
		queue(t, ctx, st, id2, "R-1", SessionSpec{})
		mustAppend(t, ctx, st, id2, []*contract.EncodedEvent{RunStatusEvent(t, id2, "r2-queued", "R-2", "M-R-2", "queued")}, store.AppendOptions{Enqueue: true})
		runs, _ = st.Runs(ctx, id2)
		sess, _ = st.GetSession(ctx, id2)
		if err := other.ImportSession(ctx, &store.Import{Session: sess, Events: readAll(t, ctx, st, id2), Runs: runs}); err != nil {
			t.Fatalf("ImportSession: %v", err)
		}
		if c := claim(t, ctx, other, store.ClaimFilter{}, "L-4"); c.SessionID != id2 || c.Run.RunID != "R-1" {
			t.Fatalf("claim after importing %s = %+v, want its R-1", id2, c.Run)
		}
		if c, err := other.ClaimRun(ctx, store.ClaimFilter{}, "L-5", t0.Add(time.Minute)); !errors.Is(err, store.ErrNothingToClaim) {
			t.Fatalf("R-2 of %s waits behind R-1: claim = %+v, %v", id2, c.Run, err)
		}
	})
}

// Interrupter returns an AppendOptions.Interrupt for session id that stops the current run as
// the multitask strategy interrupt does: a stopping status, and a stopped one when the run is
// queued with no lease, with keys derived from the run; nothing when there is no current run
// or it is already stopping.
func Interrupter(t testing.TB, id string) func(*contract.Run, *store.Lease) ([]*contract.EncodedEvent, error) {
	return func(cur *contract.Run, held *store.Lease) ([]*contract.EncodedEvent, error) {
		if cur == nil || cur.Status == contract.RunStatusStopping {
			return nil, nil
		}
		out := []*contract.EncodedEvent{RunStatusEvent(t, id, "int-stopping-"+cur.RunID, cur.RunID, cur.SourceMessageID, "stopping")}
		if cur.Status == contract.RunStatusQueued && held == nil {
			out = append(out, RunStatusEvent(t, id, "int-stopped-"+cur.RunID, cur.RunID, cur.SourceMessageID, "stopped"))
		}
		return out, nil
	}
}
