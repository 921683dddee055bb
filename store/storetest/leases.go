package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// t0 is the suite's clock for leases: leases expire relative to it.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// queue creates session id (spec) with run runID queued, and waits 2 ms so that runs queued one
// after the other have distinct queue times.
func queue(t *testing.T, ctx context.Context, st store.Store, id, runID string, spec SessionSpec) {
	t.Helper()
	if err := st.CreateSession(ctx, NewSession(id, spec)); err != nil {
		t.Fatalf("CreateSession %s: %v", id, err)
	}
	mustAppend(t, ctx, st, id, []*contract.EncodedEvent{RunStatusEvent(t, id, "q-"+runID, runID, "M-"+runID, "queued")}, store.AppendOptions{})
	time.Sleep(2 * time.Millisecond)
}

// claim claims with f and fails the test on error.
func claim(t *testing.T, ctx context.Context, st store.Store, f store.ClaimFilter, leaseID string) store.Claim {
	t.Helper()
	c, err := st.ClaimRun(ctx, f, leaseID, t0.Add(time.Minute))
	if err != nil {
		t.Fatalf("ClaimRun(%s): %v", leaseID, err)
	}
	return c
}

func (s *suite) testLeases(t *testing.T) {
	t.Run("ClaimOldestFirst", func(t *testing.T) {
		t.Parallel()
		ctx, st, _ := s.setup(t)
		if _, err := st.ClaimRun(ctx, store.ClaimFilter{}, "L-0", t0.Add(time.Minute)); !errors.Is(err, store.ErrNothingToClaim) {
			t.Fatalf("claim with nothing queued: %v, want ErrNothingToClaim", err)
		}
		queue(t, ctx, st, "S-b", "R-b", SessionSpec{})
		queue(t, ctx, st, "S-a", "R-a", SessionSpec{})
		c := claim(t, ctx, st, store.ClaimFilter{}, "L-1")
		if c.SessionID != "S-b" || c.Run.RunID != "R-b" || c.Run.Status != contract.RunStatusQueued || c.Lease.LeaseID != "L-1" || c.Lease.Token != 1 || c.Attempt != 1 || !c.Lease.ExpiresAt.Equal(t0.Add(time.Minute)) {
			t.Errorf("first claim = %+v, want R-b of S-b (queued first), token 1, attempt 1", c)
		}
		if c := claim(t, ctx, st, store.ClaimFilter{}, "L-2"); c.Run.RunID != "R-a" || c.Lease.Token != 1 {
			t.Errorf("second claim = %+v, want R-a", c)
		}
		if _, err := st.ClaimRun(ctx, store.ClaimFilter{}, "L-3", t0.Add(time.Minute)); !errors.Is(err, store.ErrNothingToClaim) {
			t.Errorf("third claim: %v, want ErrNothingToClaim (both runs are leased)", err)
		}
	})

	t.Run("ClaimFilters", func(t *testing.T) {
		t.Parallel()
		ctx, st, _ := s.setup(t)
		queue(t, ctx, st, "S-1", "R-1", SessionSpec{Project: "p1"})
		queue(t, ctx, st, "S-2", "R-2", SessionSpec{AgentID: "agent-2"})
		queue(t, ctx, st, "S-3", "R-3", SessionSpec{Role: "reviewer"})
		queue(t, ctx, st, "S-4", "R-4", SessionSpec{MCP: true})
		for _, tc := range []struct {
			name string
			f    store.ClaimFilter
			want string // run id, "" for nothing
		}{
			{"project", store.ClaimFilter{Project: "p1"}, "R-1"},
			{"agent", store.ClaimFilter{AgentID: "agent-2"}, "R-2"},
			{"role", store.ClaimFilter{Role: "reviewer"}, "R-3"},
			{"capability", store.ClaimFilter{Capabilities: []string{"mcp", "tools", "text"}}, "R-4"},
			{"a capability no session has", store.ClaimFilter{Capabilities: []string{"shell"}}, ""},
			{"filters together", store.ClaimFilter{Project: "p1", Role: "reviewer"}, ""},
			{"an unknown project", store.ClaimFilter{Project: "nope"}, ""},
		} {
			c, err := st.ClaimRun(ctx, tc.f, "L-"+tc.name, t0.Add(time.Minute))
			switch {
			case tc.want == "" && !errors.Is(err, store.ErrNothingToClaim):
				t.Errorf("%s: claim = %+v, %v; want ErrNothingToClaim", tc.name, c, err)
			case tc.want != "" && (err != nil || c.Run.RunID != tc.want):
				t.Errorf("%s: claim = %+v, %v; want %s", tc.name, c, err, tc.want)
			}
		}
	})

	t.Run("RenewRelease", func(t *testing.T) {
		t.Parallel()
		ctx, st, _ := s.setup(t)
		queue(t, ctx, st, "S-1", "R-1", SessionSpec{})
		c := claim(t, ctx, st, store.ClaimFilter{}, "L-1")
		ref := c.Lease.Ref()
		l, err := st.RenewLease(ctx, "S-1", "R-1", ref, t0.Add(30*time.Second), t0.Add(90*time.Second))
		if err != nil || !l.ExpiresAt.Equal(t0.Add(90*time.Second)) || l.Token != 1 {
			t.Fatalf("renew = %+v, %v; want expiry t0+90s", l, err)
		}
		for _, tc := range []struct {
			name   string
			sid    string
			run    string
			ref    store.LeaseRef
			now    time.Time
			target error
			reason string
		}{
			{"a stale token", "S-1", "R-1", store.LeaseRef{LeaseID: "L-1", Token: 0}, t0, nil, store.LeaseLost},
			{"a forged lease", "S-1", "R-1", store.LeaseRef{LeaseID: "L-x", Token: 1}, t0, nil, store.LeaseLost},
			{"after its expiry", "S-1", "R-1", ref, t0.Add(90 * time.Second), nil, store.LeaseLost},
			{"an unknown run", "S-1", "R-9", ref, t0, store.ErrRunNotFound, ""},
			{"an unknown session", "S-9", "R-1", ref, t0, store.ErrSessionNotFound, ""},
		} {
			_, err := st.RenewLease(ctx, tc.sid, tc.run, tc.ref, tc.now, tc.now.Add(time.Minute))
			if tc.target != nil {
				if !errors.Is(err, tc.target) {
					t.Errorf("renew with %s: %v, want %v", tc.name, err, tc.target)
				}
				continue
			}
			if le := errorAs[*store.LeaseError](t, "renew with "+tc.name, err); le.Reason != tc.reason {
				t.Errorf("renew with %s: reason %q, want %q", tc.name, le.Reason, tc.reason)
			}
		}
		if err := st.ReleaseLease(ctx, "S-1", "R-1", store.LeaseRef{LeaseID: "L-1", Token: 7}, t0); err == nil {
			t.Errorf("release with a wrong token: nil, want a LeaseError")
		}
		// An expired lease is the expirer's: its holder cannot release it.
		if le := errorAs[*store.LeaseError](t, "release after its expiry", st.ReleaseLease(ctx, "S-1", "R-1", ref, t0.Add(90*time.Second))); le.Reason != store.LeaseLost {
			t.Errorf("release after its expiry: reason %q, want %q", le.Reason, store.LeaseLost)
		}
		if leases, err := st.RunLeases(ctx, "S-1"); err != nil || len(leases) != 1 || leases[0].Held == nil || leases[0].Held.LeaseID != "L-1" {
			t.Errorf("after a refused release, RunLeases = %+v, %v; want R-1 still held by L-1", leases, err)
		}
		if err := st.ReleaseLease(ctx, "S-1", "R-1", ref, t0.Add(30*time.Second)); err != nil {
			t.Fatalf("release: %v", err)
		}
		if err := st.ReleaseLease(ctx, "S-1", "R-1", ref, t0.Add(30*time.Second)); err == nil {
			t.Errorf("second release: nil, want a LeaseError (no lease held)")
		}
		// A released queued run is claimable again, with the next token.
		if c := claim(t, ctx, st, store.ClaimFilter{}, "L-2"); c.Run.RunID != "R-1" || c.Lease.Token != 2 {
			t.Errorf("claim after release = %+v, want R-1 with token 2", c)
		}
		leases, err := st.RunLeases(ctx, "S-1")
		if err != nil || len(leases) != 1 || leases[0].Held == nil || leases[0].Held.LeaseID != "L-2" || leases[0].Token != 2 || leases[0].Attempt != 1 {
			t.Errorf("RunLeases = %+v, %v; want R-1 held by L-2, token 2, attempt 1", leases, err)
		}
		if _, err := st.RunLeases(ctx, "S-9"); !errors.Is(err, store.ErrSessionNotFound) {
			t.Errorf("RunLeases of an unknown session: %v, want ErrSessionNotFound", err)
		}
	})

	t.Run("ReleaseIsReported", func(t *testing.T) {
		t.Parallel()
		ctx, st, _ := s.setup(t)
		// A release adds no event, so Subscribe cannot tell waiting claims: SubscribeReleases
		// does, after the release committed (the run is claimable by then); a refused release
		// is not reported.
		queue(t, ctx, st, "S-rel", "R-1", SessionSpec{})
		c := claim(t, ctx, st, store.ClaimFilter{}, "L-1")
		heard := make(chan string, 4)
		cancel := st.SubscribeReleases(func(id string) {
			if _, err := st.ClaimRun(context.Background(), store.ClaimFilter{}, "L-probe", t0.Add(time.Minute)); err == nil {
				heard <- id + " claimable"
				return
			}
			heard <- id
		})
		defer cancel()
		if err := st.ReleaseLease(ctx, "S-rel", "R-1", store.LeaseRef{LeaseID: "L-forged", Token: c.Lease.Token}, t0); err == nil {
			t.Fatal("a forged release was accepted")
		}
		if err := st.ReleaseLease(ctx, "S-rel", "R-1", c.Lease.Ref(), t0); err != nil {
			t.Fatalf("ReleaseLease: %v", err)
		}
		select {
		case got := <-heard:
			if got != "S-rel claimable" {
				t.Fatalf("SubscribeReleases heard %q, want \"S-rel claimable\" (once the release committed)", got)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the release was not reported")
		}
	})

	t.Run("Fencing", func(t *testing.T) {
		t.Parallel()
		ctx, st, _ := s.setup(t)
		const id = "S-1"
		queue(t, ctx, st, id, "R-1", SessionSpec{})
		old := claim(t, ctx, st, store.ClaimFilter{}, "L-old").Lease.Ref()
		if err := st.ReleaseLease(ctx, id, "R-1", old, t0); err != nil {
			t.Fatal(err)
		}
		cur := claim(t, ctx, st, store.ClaimFilter{}, "L-cur").Lease.Ref()
		mustAppend(t, ctx, st, id, []*contract.EncodedEvent{RunStatusEvent(t, id, "r", "R-1", "M-R-1", "running")}, store.AppendOptions{Fence: &store.Fence{Lease: &cur}})
		before := lastSeq(t, ctx, st, id)
		for _, tc := range []struct {
			name   string
			fence  *store.Fence
			reason string
		}{
			{"no lease", &store.Fence{}, store.LeaseRequired},
			{"the previous holder's lease", &store.Fence{Lease: &old}, store.LeaseLost},
			{"a forged token", &store.Fence{Lease: &store.LeaseRef{LeaseID: "L-cur", Token: 9}}, store.LeaseLost},
		} {
			_, err := st.Append(ctx, id, []*contract.EncodedEvent{RunEvent(t, id, "x-"+tc.name, "R-1", "late")}, store.AppendOptions{Fence: tc.fence})
			if le := errorAs[*store.LeaseError](t, tc.name, err); le.Reason != tc.reason || le.Index != 0 {
				t.Errorf("%s: %+v, want reason %q at index 0", tc.name, le, tc.reason)
			}
		}
		if got := lastSeq(t, ctx, st, id); got != before {
			t.Errorf("refused appends moved the log from %d to %d", before, got)
		}
		// The server's own appends (no fence) are not checked; the run is no longer claimable.
		mustAppend(t, ctx, st, id, []*contract.EncodedEvent{RunEvent(t, id, "srv", "R-1", "server")}, store.AppendOptions{})
		if _, err := st.ClaimRun(ctx, store.ClaimFilter{}, "L-x", t0.Add(time.Minute)); !errors.Is(err, store.ErrNothingToClaim) {
			t.Errorf("claim of a running run: %v, want ErrNothingToClaim", err)
		}
		// The holder ends the run: the lease goes with it.
		mustAppend(t, ctx, st, id, []*contract.EncodedEvent{RunStatusEvent(t, id, "c", "R-1", "M-R-1", "completed")}, store.AppendOptions{Fence: &store.Fence{Lease: &cur}})
		leases, err := st.RunLeases(ctx, id)
		if err != nil || len(leases) != 1 || leases[0].Held != nil || leases[0].Token != 2 {
			t.Errorf("RunLeases after the run ended = %+v, %v; want no lease held, token 2", leases, err)
		}
		if exp, err := st.ExpiredLeases(ctx, t0.Add(time.Hour), 10); err != nil || len(exp) != 0 {
			t.Errorf("ExpiredLeases = %+v, %v; want none (the run ended)", exp, err)
		}
	})

	t.Run("FencingSeesEachChange", func(t *testing.T) {
		// A fenced append decides on the run's lease as the writes before it left it: a
		// driver that remembers a lease between appends must see a release, a new claim, a
		// renewal and the run's end.
		t.Parallel()
		ctx, st, _ := s.setup(t)
		const id = "S-1"
		queue(t, ctx, st, id, "R-1", SessionSpec{})
		first := claim(t, ctx, st, store.ClaimFilter{}, "L-1").Lease.Ref()
		n := 0
		fenced := func(what string, ref store.LeaseRef, expiredBy time.Time, want string) {
			t.Helper()
			n++
			ev := RunEvent(t, id, fmt.Sprintf("k-%d", n), "R-1", what)
			_, err := st.Append(ctx, id, []*contract.EncodedEvent{ev}, store.AppendOptions{Fence: &store.Fence{Lease: &ref, ExpiredBy: expiredBy}})
			if want == "" {
				if err != nil {
					t.Errorf("%s: %v, want the event appended", what, err)
				}
				return
			}
			if le := errorAs[*store.LeaseError](t, what, err); le.Reason != want {
				t.Errorf("%s: reason %q, want %q", what, le.Reason, want)
			}
		}
		fenced("the holder", first, time.Time{}, "")
		if err := st.ReleaseLease(ctx, id, "R-1", first, t0); err != nil {
			t.Fatal(err)
		}
		fenced("the holder after its release", first, time.Time{}, store.LeaseLost)
		second := claim(t, ctx, st, store.ClaimFilter{}, "L-2").Lease.Ref()
		fenced("the new holder", second, time.Time{}, "")
		fenced("the released holder", first, time.Time{}, store.LeaseLost)
		fenced("the expirer after the expiry", second, t0.Add(2*time.Minute), "")
		if _, err := st.RenewLease(ctx, id, "R-1", second, t0.Add(30*time.Second), t0.Add(5*time.Minute)); err != nil {
			t.Fatal(err)
		}
		fenced("the expirer after a renewal", second, t0.Add(2*time.Minute), store.LeaseLost)
		mustAppend(t, ctx, st, id, []*contract.EncodedEvent{RunStatusEvent(t, id, "r", "R-1", "M-R-1", "running")}, store.AppendOptions{Fence: &store.Fence{Lease: &second}})
		fenced("the holder of the running run", second, time.Time{}, "")
		mustAppend(t, ctx, st, id, []*contract.EncodedEvent{RunStatusEvent(t, id, "c", "R-1", "M-R-1", "completed")}, store.AppendOptions{Fence: &store.Fence{Lease: &second}})
		fenced("the holder after the run ended", second, time.Time{}, store.LeaseLost)
	})

	t.Run("Expiry", func(t *testing.T) {
		t.Parallel()
		ctx, st, _ := s.setup(t)
		queue(t, ctx, st, "S-1", "R-1", SessionSpec{})
		queue(t, ctx, st, "S-2", "R-2", SessionSpec{})
		a, err := st.ClaimRun(ctx, store.ClaimFilter{}, "L-a", t0.Add(20*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.ClaimRun(ctx, store.ClaimFilter{}, "L-b", t0.Add(10*time.Second)); err != nil {
			t.Fatal(err)
		}
		exp, err := st.ExpiredLeases(ctx, t0.Add(15*time.Second), 10)
		if err != nil || len(exp) != 1 || exp[0].RunID != "R-2" || exp[0].SessionID != "S-2" || exp[0].Lease.LeaseID != "L-b" || exp[0].Attempt != 1 {
			t.Fatalf("ExpiredLeases(t0+15s) = %+v, %v; want R-2's lease L-b", exp, err)
		}
		if exp, err = st.ExpiredLeases(ctx, t0.Add(time.Minute), 10); err != nil || len(exp) != 2 || exp[0].RunID != "R-2" || exp[1].RunID != "R-1" {
			t.Fatalf("ExpiredLeases(t0+1m) = %+v, %v; want R-2 then R-1 (earliest first)", exp, err)
		}
		// The expirer fails R-1 under its lease and queues attempt 2; a renewal first would
		// have refused it.
		ref := a.Lease.Ref()
		if _, err := st.Append(ctx, "S-1", []*contract.EncodedEvent{RunStatusEvent(t, "S-1", "f", "R-1", "M-R-1", "failed")},
			store.AppendOptions{Fence: &store.Fence{Lease: &ref, ExpiredBy: t0.Add(19 * time.Second)}}); errorAs[*store.LeaseError](t, "expirer before the expiry", err).Reason != store.LeaseLost {
			t.Errorf("expirer before the expiry: %v, want LEASE_LOST", err)
		}
		mustAppend(t, ctx, st, "S-1", []*contract.EncodedEvent{
			RunStatusEvent(t, "S-1", "f", "R-1", "M-R-1", "failed"),
			RunStatusEvent(t, "S-1", "q2", "R-1a2", "M-R-1", "queued"),
		}, store.AppendOptions{Fence: &store.Fence{Lease: &ref, ExpiredBy: t0.Add(time.Minute)}, Attempts: map[string]int{"R-1a2": 2}})
		c := claim(t, ctx, st, store.ClaimFilter{}, "L-c")
		if c.Run.RunID != "R-1a2" || c.Attempt != 2 || c.Lease.Token != 1 {
			t.Errorf("claim after the expiry = %+v, want R-1a2, attempt 2", c)
		}
		if exp, err = st.ExpiredLeases(ctx, t0.Add(time.Minute), 1); err != nil || len(exp) != 1 || exp[0].RunID != "R-2" {
			t.Errorf("ExpiredLeases limit 1 = %+v, %v; want R-2 only", exp, err)
		}
	})

	t.Run("QueuedRuns", func(t *testing.T) {
		t.Parallel()
		ctx, st, _ := s.setup(t)
		// Runs queued at the caller's times (AppendOptions.Now): R-2 at t0+1s, R-1 at t0+2s,
		// R-3 behind R-1's active run (not claimable: no queue time until R-1 ends).
		at := func(id, runID string, sec int, enqueue bool) {
			t.Helper()
			if err := st.CreateSession(ctx, NewSession(id, SessionSpec{})); err != nil && !errors.Is(err, store.ErrSessionExists) {
				t.Fatal(err)
			}
			mustAppend(t, ctx, st, id, []*contract.EncodedEvent{RunStatusEvent(t, id, "q-"+runID, runID, "M-"+runID, "queued")},
				store.AppendOptions{Now: t0.Add(time.Duration(sec) * time.Second), Enqueue: enqueue})
		}
		at("S-2", "R-2", 1, false)
		at("S-1", "R-1", 2, false)
		at("S-1", "R-3", 3, true)
		ids := func(cutoff time.Duration, limit int) string {
			t.Helper()
			q, err := st.QueuedRuns(ctx, t0.Add(cutoff), limit)
			if err != nil {
				t.Fatal(err)
			}
			out := ""
			for _, r := range q {
				out += fmt.Sprintf("%s/%s@%s ", r.SessionID, r.RunID, r.QueuedAt.Sub(t0))
			}
			return out
		}
		if got := ids(time.Second-time.Millisecond, 10); got != "" {
			t.Errorf("QueuedRuns(t0+999ms) = %q, want none", got)
		}
		if got := ids(time.Hour, 10); got != "S-2/R-2@1s S-1/R-1@2s " {
			t.Errorf("QueuedRuns(t0+1h) = %q, want R-2 then R-1 (R-3 waits behind R-1)", got)
		}
		if got := ids(time.Hour, 1); got != "S-2/R-2@1s " {
			t.Errorf("QueuedRuns limit 1 = %q, want R-2", got)
		}
		// A claimed run is not waiting for its first claim, nor is it after a release.
		c := claim(t, ctx, st, store.ClaimFilter{}, "L-1")
		if err := st.ReleaseLease(ctx, c.SessionID, c.Run.RunID, c.Lease.Ref(), t0); err != nil {
			t.Fatal(err)
		}
		// R-1 ends at t0+5s: R-3 becomes claimable then.
		mustAppend(t, ctx, st, "S-1", []*contract.EncodedEvent{RunStatusEvent(t, "S-1", "f-R-1", "R-1", "M-R-1", "failed")},
			store.AppendOptions{Now: t0.Add(5 * time.Second)})
		if got := ids(time.Hour, 10); got != "S-1/R-3@5s " {
			t.Errorf("QueuedRuns after R-2's claim and R-1's end = %q, want R-3 alone, since t0+5s", got)
		}
	})

	t.Run("ClaimConcurrency", func(t *testing.T) {
		t.Parallel()
		ctx, st, _ := s.setup(t)
		const sessions, workers = 40, 8
		for i := range sessions {
			id := fmt.Sprintf("S-%03d", i)
			if err := st.CreateSession(ctx, NewSession(id, SessionSpec{})); err != nil {
				t.Fatal(err)
			}
			mustAppend(t, ctx, st, id, []*contract.EncodedEvent{RunStatusEvent(t, id, "q", "R-1", "M-1", "queued")}, store.AppendOptions{})
		}
		var (
			mu  sync.Mutex
			got = map[string]int{}
			wg  sync.WaitGroup
		)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; ; n++ {
					c, err := st.ClaimRun(ctx, store.ClaimFilter{}, fmt.Sprintf("L-%d-%d", w, n), t0.Add(time.Minute))
					if errors.Is(err, store.ErrNothingToClaim) {
						return
					}
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					got[c.SessionID]++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if len(got) != sessions {
			t.Errorf("%d runs claimed, want %d", len(got), sessions)
		}
		for id, n := range got {
			if n != 1 {
				t.Errorf("the run of %s was claimed %d times, want once", id, n)
			}
		}
	})
}
