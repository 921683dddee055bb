package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// testMultitask checks the runs an append enqueues behind the active one
// (AppendOptions.Enqueue): accepted only when asked for and created queued, claimable only
// once every run created before them has ended, in order; and AppendOptions.Unfenced.
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

		// The server stops R-2 on a person's behalf although a worker holds it: Unfenced.
		stop := []*contract.EncodedEvent{RunStatusEvent(t, id, "r2-stopping", "R-2", "M-R-2", "stopping")}
		var lerr *store.LeaseError
		if _, err := st.Append(ctx, id, stop, store.AppendOptions{Fence: &store.Fence{}}); !errors.As(err, &lerr) {
			t.Fatalf("a fenced stop of a leased run: %v, want a LeaseError", err)
		}
		mustAppend(t, ctx, st, id, stop, store.AppendOptions{Fence: &store.Fence{}, Unfenced: 1})
		mustAppend(t, ctx, st, id, []*contract.EncodedEvent{RunStatusEvent(t, id, "r2-stopped", "R-2", "M-R-2", "stopped")}, store.AppendOptions{})
		if c := claim(t, ctx, st, store.ClaimFilter{}, "L-3"); c.Run.RunID != "R-3" {
			t.Fatalf("claim after R-2 stopped = %+v, want R-3", c)
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
