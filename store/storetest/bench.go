package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// QueueRuns creates n sessions "S-q<i>" in st, each with one queued run "R-1", with 16 writers.
func QueueRuns(b testing.TB, st store.Store, n int) {
	b.Helper()
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				id := fmt.Sprintf("S-q%06d", i)
				if err := st.CreateSession(ctx, NewSession(id, SessionSpec{})); err != nil {
					errs <- err
					return
				}
				ev := RunStatusEvent(b, id, "q", "R-1", "M-1", contract.RunStatusQueued)
				if _, err := st.Append(ctx, id, []*contract.EncodedEvent{ev}, store.AppendOptions{}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// BenchClaim measures claims: each op drains runs queued runs (QueueRuns made them) with
// workers goroutines claiming at once, then, off the clock, releases every lease so that the
// runs are claimable again. It reports claims/s and the median and 99th percentile latency of
// one claim (ms), and fails if a run was claimed twice in one drain.
func BenchClaim(b *testing.B, st store.Store, runs, workers int) {
	ctx := context.Background()
	QueueRuns(b, st, runs)
	now := time.Now()
	var lat []time.Duration
	var claimed time.Duration
	b.ResetTimer()
	for range b.N {
		var (
			mu    sync.Mutex
			got   = make([]store.Claim, 0, runs)
			ds    = make([]time.Duration, 0, runs)
			wg    sync.WaitGroup
			fails atomic.Int64
		)
		start := time.Now()
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; ; n++ {
					t := time.Now()
					c, err := st.ClaimRun(ctx, store.ClaimFilter{}, fmt.Sprintf("L-%d-%d", w, n), now.Add(time.Hour))
					d := time.Since(t)
					if err != nil {
						if err != store.ErrNothingToClaim {
							fails.Add(1)
							b.Error(err)
						}
						return
					}
					mu.Lock()
					got, ds = append(got, c), append(ds, d)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		claimed += time.Since(start)
		b.StopTimer()
		if len(got) != runs || fails.Load() > 0 {
			b.Fatalf("%d claims in a drain of %d runs", len(got), runs)
		}
		seen := make(map[string]bool, runs)
		for _, c := range got {
			if seen[c.SessionID] {
				b.Fatalf("the run of %s was claimed twice", c.SessionID)
			}
			seen[c.SessionID] = true
		}
		lat = append(lat, ds...)
		releaseAll(b, st, got)
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(b.N*runs)/claimed.Seconds(), "claims/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(0, "ns/op")
}

// releaseAll releases the leases of claims (an hour long), 16 at a time.
func releaseAll(b *testing.B, st store.Store, claims []store.Claim) {
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(len(claims)) {
					return
				}
				c := claims[i]
				if err := st.ReleaseLease(context.Background(), c.SessionID, c.Run.RunID, c.Lease.Ref(), time.Now()); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// BenchWake measures how soon a waiting claim answers once a run is queued: each op starts
// claim (a claim that waits for a run) on a goroutine, lets it park for 5 ms off the clock,
// calls queue(i) (which returns once the queued run is committed), and waits for the claim to
// answer. It reports the median and 99th percentile time from queue's return to the claim's
// answer (ms). claim must return an error unless it got a run.
func BenchWake(b *testing.B, claim func(context.Context) error, queue func(i int)) {
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		done := make(chan error, 1)
		var answered time.Time
		go func() {
			err := claim(ctx)
			answered = time.Now()
			done <- err
		}()
		time.Sleep(5 * time.Millisecond)
		b.StartTimer()
		queue(i)
		queued := time.Now()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		lat = append(lat, answered.Sub(queued))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
