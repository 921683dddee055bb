package postgres

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/postgres/pgtest"
	"github.com/sessiond/sessiond/store/sqlite"
	"github.com/sessiond/sessiond/store/storetest"
)

// The benchmarks need SESSIOND_TEST_POSTGRES (they skip without it). Events are built and
// validated before the timer starts: they measure the stores, not the contract parser. Each
// event is a terminal event of about 330 bytes.

const benchChunk = "go test ./... ok  github.com/example/project/internal/foo 0.042s coverage: 81.3% of statements; " +
	"ok  github.com/example/project/internal/bar 0.107s coverage: 77.0% of statements; FAIL none; " +
	"all packages built"

// benchBatches returns n batches of size events for session id, keys "<prefix>-<batch>-<i>".
func benchBatches(b *testing.B, id, prefix string, n, size int) [][]*contract.EncodedEvent {
	b.Helper()
	out := make([][]*contract.EncodedEvent, n)
	for i := range out {
		out[i] = make([]*contract.EncodedEvent, size)
		for j := range out[i] {
			key := fmt.Sprintf("%s-%d-%d", prefix, i, j)
			out[i][j] = storetest.EventWithID(b, id, "ev-"+key, key, benchChunk)
		}
	}
	return out
}

// BenchmarkAppendBatch64x8Sessions: 8 writers, each appending batches of 64 events to its own
// session, on SQLite and on PostgreSQL in the same run. PostgreSQL runs with
// synchronous_commit=on (checked): every commit is flushed. One op is one batch; the figure is
// events/s. Target for PostgreSQL: at least 20,000 events/s.
func BenchmarkAppendBatch64x8Sessions(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) {
		st, err := sqlite.Open(context.Background(), b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		benchBatch64x8(b, st)
	})
	b.Run("postgres", func(b *testing.B) {
		st := openURL(b, pgtest.Schema(b))
		var sc string
		if err := st.pool.QueryRow(context.Background(), `SHOW synchronous_commit`).Scan(&sc); err != nil || sc != "on" {
			b.Fatalf("synchronous_commit = %q (%v), want on", sc, err)
		}
		benchBatch64x8(b, st)
	})
}

func benchBatch64x8(b *testing.B, st store.Store) {
	const sessions, size = 8, 64
	ctx := context.Background()
	per := (b.N + sessions - 1) / sessions
	work := make([][][]*contract.EncodedEvent, sessions)
	for s := range work {
		id := fmt.Sprintf("S-bench-%d", s)
		if err := st.CreateSession(ctx, storetest.NewSession(id, storetest.SessionSpec{})); err != nil {
			b.Fatal(err)
		}
		work[s] = benchBatches(b, id, "k", per, size)
	}
	var next atomic.Int64
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for s := range work {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("S-bench-%d", s)
			for _, batch := range work[s] {
				if next.Add(1) > int64(b.N) {
					return
				}
				if _, err := st.Append(ctx, id, batch, store.AppendOptions{}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	d := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N*size)/d.Seconds(), "events/s")
}

// BenchmarkCrossInstanceDelivery: two Stores on one schema, as two sessiond instances would
// be. A writer appends 1,000 events/s to one session through A (every millisecond the events
// due by then, in one append); a follower on B waits for Commits from Subscribe and reads the
// new events with ReadEvents. Latency is from just before the Append that carries an event to
// the moment the follower has read it (so it includes the commit's flush). One op is 3 s of
// traffic; reported: p50, p99 and max latency in ms. Target: p99 at most 50 ms.
func BenchmarkCrossInstanceDelivery(b *testing.B) {
	u := pgtest.Schema(b)
	a, bb := openURL(b, u), openURL(b, u)
	ctx := context.Background()
	var lats []time.Duration
	for n := 0; n < b.N; n++ {
		id := fmt.Sprintf("S-deliver-%d", n)
		if err := a.CreateSession(ctx, storetest.NewSession(id, storetest.SessionSpec{})); err != nil {
			b.Fatal(err)
		}
		const rate, dur = 1000, 3 * time.Second
		total := int(rate * dur / time.Second)
		evs := benchBatches(b, id, "d", 1, total)[0]
		sent := make([]atomic.Int64, total) // unix nanos before the append that carried the event
		wake := make(chan struct{}, 1)
		cancel := bb.Subscribe(func(c store.Commit) {
			if c.SessionID == id {
				select {
				case wake <- struct{}{}:
				default:
				}
			}
		})
		done := make(chan []time.Duration)
		go func() {
			var got []time.Duration
			next := int64(0)
			for next < int64(total) {
				<-wake
				for {
					page, err := bb.ReadEvents(ctx, id, next-1, 0)
					if err != nil {
						b.Error(err)
						done <- got
						return
					}
					now := time.Now().UnixNano()
					for _, e := range page {
						if e.Sequence != next {
							b.Errorf("got sequence %d, want %d", e.Sequence, next)
						}
						got = append(got, time.Duration(now-sent[e.Sequence].Load()))
						next++
					}
					if len(page) == 0 {
						break
					}
				}
			}
			done <- got
		}()
		b.ResetTimer()
		start := time.Now()
		i := 0
		for i < total {
			due := min(int(time.Since(start)*rate/time.Second)+1, total)
			if due <= i {
				time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / rate)))
				continue
			}
			now := time.Now().UnixNano()
			for j := i; j < due; j++ {
				sent[j].Store(now)
			}
			if _, err := a.Append(ctx, id, evs[i:due], store.AppendOptions{}); err != nil {
				b.Fatal(err)
			}
			i = due
		}
		select {
		case got := <-done:
			lats = append(lats, got...)
		case <-time.After(30 * time.Second):
			b.Fatal("the follower on B did not receive every event")
		}
		b.StopTimer()
		cancel()
	}
	sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
	q := func(p float64) float64 {
		return float64(lats[min(len(lats)-1, int(p*float64(len(lats))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(float64(lats[len(lats)-1])/float64(time.Millisecond), "max-ms")
}
