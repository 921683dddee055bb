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

// TestPlanAppendFence covers rule 3d of PlanAppend: which new events of a leased run a fenced
// append may write, and the refusals.
func TestPlanAppendFence(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	held := &store.Lease{LeaseID: "L-1", Token: 3, ExpiresAt: t0.Add(time.Minute)}
	leases := map[string]*store.Lease{"R-1": held}
	stored := []store.StoredRun{storedRun("R-1", "M-1", "running", 0), storedRun("R-2", "M-2", "completed", 1)}
	r1 := storetest.RunEvent(t, sid, "t1", "R-1", "out")
	r2 := storetest.RunEvent(t, sid, "t2", "R-2", "out")
	plain := ev(t, "ev-p", "k-p", "no run")
	ref := func(id string, tok int64) *store.LeaseRef { return &store.LeaseRef{LeaseID: id, Token: tok} }
	cases := []struct {
		name   string
		log    []*contract.EncodedEvent
		batch  []*contract.EncodedEvent
		fence  *store.Fence
		reason string // the LeaseError's reason; "" for an accepted batch
		index  int
		why    string // part of the error's text
		leases int    // Lease lookups expected
	}{
		{name: "no fence: the server's own appends are not checked", batch: []*contract.EncodedEvent{r1}, leases: 0},
		{name: "the current lease writes", batch: []*contract.EncodedEvent{r1, run(t, "s1", "R-1", "M-1", "completed")}, fence: &store.Fence{Lease: ref("L-1", 3)}, leases: 1},
		{name: "no lease given for a leased run is required", batch: []*contract.EncodedEvent{plain, r1}, fence: &store.Fence{}, reason: store.LeaseRequired, index: 1, why: "carries no lease", leases: 1},
		{name: "a stale token is lost", batch: []*contract.EncodedEvent{r1}, fence: &store.Fence{Lease: ref("L-1", 2)}, reason: store.LeaseLost, why: "fencing token is 3", leases: 1},
		{name: "a forged leaseId is lost", batch: []*contract.EncodedEvent{r1}, fence: &store.Fence{Lease: ref("L-forged", 3)}, reason: store.LeaseLost, why: "another lease holds the run", leases: 1},
		{name: "a lease given for a run without one is lost", batch: []*contract.EncodedEvent{r2}, fence: &store.Fence{Lease: ref("L-1", 3)}, reason: store.LeaseLost, why: "has no lease now", leases: 1},
		{name: "an unleased run takes events without a lease", batch: []*contract.EncodedEvent{r2, plain}, fence: &store.Fence{}, leases: 1},
		{name: "a run the session does not have yet is not checked", batch: []*contract.EncodedEvent{storetest.RunEvent(t, sid, "t9", "R-9", "new")}, fence: &store.Fence{Lease: ref("L-1", 3)}, leases: 1},
		{name: "a run the batch creates is not checked", batch: []*contract.EncodedEvent{run(t, "f1", "R-1", "M-1", "failed"), run(t, "q9", "R-9", "M-9", "queued"), storetest.RunEvent(t, sid, "t9", "R-9", "new")},
			fence: &store.Fence{Lease: ref("L-1", 3)}, reason: "", leases: 2},
		{name: "events without a runId are not checked", batch: []*contract.EncodedEvent{plain}, fence: &store.Fence{Lease: ref("L-x", 1)}, leases: 0},
		{name: "a duplicate is answered without a check", log: []*contract.EncodedEvent{r1}, batch: []*contract.EncodedEvent{r1}, fence: &store.Fence{Lease: ref("L-old", 1)}, leases: 0},
		{name: "the expirer writes under a lease that expired by then", batch: []*contract.EncodedEvent{r1}, fence: &store.Fence{Lease: ref("L-1", 3), ExpiredBy: t0.Add(2 * time.Minute)}, leases: 1},
		{name: "the expirer is refused after a renewal", batch: []*contract.EncodedEvent{r1}, fence: &store.Fence{Lease: ref("L-1", 3), ExpiredBy: t0}, reason: store.LeaseLost, why: "renewed until", leases: 1},
		{name: "one lookup per run", batch: []*contract.EncodedEvent{r1, storetest.RunEvent(t, sid, "t3", "R-1", "more")}, fence: &store.Fence{Lease: ref("L-1", 3)}, leases: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeLog{events: logOf(tc.log...), runs: stored, leases: leases}
			plan, err := store.PlanAppend(sid, f.last(), tc.batch, store.AppendOptions{Fence: tc.fence}, f)
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("err = %v, want none", err)
				}
				if len(plan.Results) != len(tc.batch) {
					t.Errorf("results = %d, want %d", len(plan.Results), len(tc.batch))
				}
			} else {
				var le *store.LeaseError
				if !errors.As(err, &le) || le.Reason != tc.reason || le.Index != tc.index {
					t.Fatalf("err = %v, want a LeaseError %q at index %d", err, tc.reason, tc.index)
				}
				if !contains(err.Error(), tc.why) {
					t.Errorf("err = %q, want it to say %q", err, tc.why)
				}
			}
			if got := f.calls["Lease"]; got != tc.leases {
				t.Errorf("Lease lookups = %d, want %d", got, tc.leases)
			}
		})
	}
	t.Run("a failing lookup stops the plan", func(t *testing.T) {
		f := &fakeLog{fail: "Lease"}
		if _, err := store.PlanAppend(sid, -1, []*contract.EncodedEvent{r1}, store.AppendOptions{Fence: &store.Fence{}}, f); !errors.Is(err, errLookup) {
			t.Errorf("err = %v, want the lookup's error", err)
		}
	})
}

// TestPlanAppendRunWrites covers what a run write says about claiming: queued, the attempt of a
// created run, and the lease a terminal run loses.
func TestPlanAppendRunWrites(t *testing.T) {
	cases := []struct {
		name     string
		stored   []store.StoredRun
		batch    []*contract.EncodedEvent
		attempts map[string]int
		want     string // "queued attempt endsLease" per write
	}{
		{name: "a created queued run is claimable, attempt 1", batch: []*contract.EncodedEvent{run(t, "q", "R-1", "M-1", "queued")}, want: "true 1 false"},
		{name: "a created run takes its attempt from the options", batch: []*contract.EncodedEvent{run(t, "q", "R-1", "M-1", "queued")}, attempts: map[string]int{"R-1": 3}, want: "true 3 false"},
		{name: "a run that starts is no longer claimable", stored: []store.StoredRun{storedRun("R-1", "M-1", "queued", 0)}, batch: []*contract.EncodedEvent{run(t, "s", "R-1", "M-1", "running")}, want: "false 0 false"},
		{name: "a run that ends loses its lease", stored: []store.StoredRun{storedRun("R-1", "M-1", "running", 0)}, batch: []*contract.EncodedEvent{run(t, "s", "R-1", "M-1", "failed")}, want: "false 0 true"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeLog{runs: tc.stored}
			plan, err := store.PlanAppend(sid, -1, tc.batch, store.AppendOptions{Attempts: tc.attempts}, f)
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.Runs) != 1 {
				t.Fatalf("runs = %d, want 1", len(plan.Runs))
			}
			w := plan.Runs[0]
			if got := fmtWrite(w); got != tc.want {
				t.Errorf("write = %q, want %q", got, tc.want)
			}
		})
	}
}

func fmtWrite(w store.RunWrite) string {
	b := func(v bool) string {
		if v {
			return "true"
		}
		return "false"
	}
	return b(w.Queued) + " " + itoa(w.Attempt) + " " + b(w.EndsLease)
}

func itoa(n int) string { return fmt.Sprint(n) }

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// TestCheckLease covers the decision RenewLease and ReleaseLease take, expiry included.
func TestCheckLease(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	held := &store.Lease{LeaseID: "L-1", Token: 2, ExpiresAt: t0}
	cases := []struct {
		name  string
		held  *store.Lease
		given *store.LeaseRef
		now   time.Time
		want  string // reason, "" for nil
	}{
		{"alive", held, &store.LeaseRef{LeaseID: "L-1", Token: 2}, t0.Add(-time.Second), ""},
		{"expired at its instant", held, &store.LeaseRef{LeaseID: "L-1", Token: 2}, t0, store.LeaseLost},
		{"expiry not checked", held, &store.LeaseRef{LeaseID: "L-1", Token: 2}, time.Time{}, ""},
		{"nothing given for a leased run", held, nil, t0, store.LeaseRequired},
		{"nothing held, nothing given", nil, nil, t0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := store.CheckLease("R-1", tc.held, tc.given, tc.now)
			var le *store.LeaseError
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("err = %v, want nil", err)
			case tc.want != "" && (!errors.As(err, &le) || le.Reason != tc.want || le.Index != -1):
				t.Errorf("err = %v, want reason %q", err, tc.want)
			}
		})
	}
}
