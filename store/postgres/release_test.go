package postgres

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/postgres/pgtest"
	"github.com/sessiond/sessiond/store/storetest"
)

// heldRuns creates n sessions through st, each with one queued run R-1, claims every run
// there and returns the leases, by session id S-h<i>.
func heldRuns(t testing.TB, st *Store, n int) map[string]store.Lease {
	t.Helper()
	ctx := context.Background()
	out := make(map[string]store.Lease, n)
	for i := range n {
		id := fmt.Sprintf("S-h%d", i)
		if err := st.CreateSession(ctx, storetest.NewSession(id, storetest.SessionSpec{})); err != nil {
			t.Fatal(err)
		}
		ev := storetest.RunStatusEvent(t, id, "q", "R-1", "M-1", contract.RunStatusQueued)
		if _, err := st.Append(ctx, id, []*contract.EncodedEvent{ev}, store.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		c, err := st.ClaimRun(ctx, store.ClaimFilter{}, fmt.Sprintf("L-%d", len(out)), time.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		out[c.SessionID] = c.Lease
	}
	return out
}

// TestReleaseWakesAClaimOnAnotherInstance: a claim waiting on instance B answers with the run
// whose lease instance A released, well before the end of its wait (a release commits no
// event: without its own notification, B would answer 204 after the whole wait).
func TestReleaseWakesAClaimOnAnotherInstance(t *testing.T) {
	url := pgtest.Schema(t)
	a, b := openURL(t, url), openURL(t, url)
	leases := heldRuns(t, a, 1)
	svc := session.New(b, session.Options{})
	defer svc.Close()
	got := make(chan *store.Claim, 1)
	go func() {
		c, err := svc.Claim(context.Background(), store.ClaimFilter{}, 20*time.Second, time.Minute)
		if err != nil {
			t.Error(err)
		}
		got <- c
	}()
	time.Sleep(100 * time.Millisecond) // the claim parks
	released := time.Now()
	if err := session.New(a, session.Options{}).ReleaseLease(context.Background(), "S-h0", "R-1", leases["S-h0"].Ref()); err != nil {
		t.Fatal(err)
	}
	c := <-got
	if c == nil || c.SessionID != "S-h0" {
		t.Fatalf("the waiting claim on B answered %+v after %v, want S-h0's run", c, time.Since(released))
	}
	if d := time.Since(released); d > 5*time.Second {
		t.Fatalf("the waiting claim on B answered %v after the release on A", d)
	}
}

// BenchmarkClaimWakeOnReleaseAcrossInstances: a claim waiting on one instance (Service.Claim
// with a wait) is answered once another instance releases the lease of a queued run; the wake
// travels through the release's own NOTIFY. The figure is the time from the release's return
// to the claim's answer (which includes the claim's own commit). Target: p99 at most 50 ms.
func BenchmarkClaimWakeOnReleaseAcrossInstances(b *testing.B) {
	url := pgtest.Schema(b)
	waiter, releaser := openURL(b, url), openURL(b, url)
	leases := heldRuns(b, releaser, b.N)
	svc := session.New(waiter, session.Options{})
	defer svc.Close()
	rel := session.New(releaser, session.Options{})
	storetest.BenchWake(b, waitingClaim(svc), func(i int) {
		id := fmt.Sprintf("S-h%d", i)
		if err := rel.ReleaseLease(context.Background(), id, "R-1", leases[id].Ref()); err != nil {
			b.Fatal(err)
		}
	})
}

// waitingClaim is a claim through svc that waits up to 10 s for a run, for storetest.BenchWake:
// an error unless it got one.
func waitingClaim(svc *session.Service) func(context.Context) error {
	return func(ctx context.Context) error {
		c, err := svc.Claim(ctx, store.ClaimFilter{}, 10*time.Second, time.Minute)
		if err == nil && c == nil {
			err = errors.New("the claim waited 10s in vain")
		}
		return err
	}
}
