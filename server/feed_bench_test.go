package server_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/store/sqlite"
	"github.com/sessiond/sessiond/store/storetest"
)

// BenchmarkChangeFeed: 1,000 SSE subscribers follow GET /v1/events/stream (raw HTTP readers,
// one connection and goroutine each; every tenth filtered by ?project=p0, which every session
// has) while one writer creates sessions on a SQLite store, one commit each, at 50 or 200 per
// second for 3 s. The commit time of each change is taken by a SubscribeChanges callback
// registered before the server's (so: when the commit is durable and the store reports it); a
// delivery is stamped when the subscriber's Read returns the block. Reported: p50/p99/max of
// commit-to-delivery over all deliveries (1,000 x the changes of one op), the process's CPU
// time (server, subscribers and writer) per delivered change, and the changes one write of the
// server carries on average (deliveries over the chunks received after the opening one); the
// last two depend far less on the machine's load than the latencies do.
func BenchmarkChangeFeed(b *testing.B) {
	const subscribers = 1000
	raiseOpenFiles(b, 2*subscribers+256)
	for _, rate := range []int{50, 200} {
		b.Run(fmt.Sprintf("changes-per-s=%d", rate), func(b *testing.B) {
			var p50s, p99s, maxs, cpus, perWrite []float64
			for range b.N {
				r := runChangeFeed(b, subscribers, rate, 3*rate)
				p50s, p99s, maxs = append(p50s, r.p50), append(p99s, r.p99), append(maxs, r.max)
				cpus, perWrite = append(cpus, r.cpuPerDelivery), append(perWrite, r.perWrite)
			}
			med := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
			b.ReportMetric(med(p50s), "p50-ms")
			b.ReportMetric(med(p99s), "p99-ms")
			b.ReportMetric(med(maxs), "max-ms")
			b.ReportMetric(med(cpus), "cpu-ns/delivery")
			b.ReportMetric(med(perWrite), "changes/write")
		})
	}
}

// feedResult is what one run of BenchmarkChangeFeed measured.
type feedResult struct {
	p50, p99, max  float64 // milliseconds
	cpuPerDelivery float64 // ns
	perWrite       float64 // changes per write of the server
}

func runChangeFeed(b *testing.B, subscribers, rate, changes int) feedResult {
	b.StopTimer()
	st, err := sqlite.Open(context.Background(), b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	commitNanos := make([]atomic.Int64, changes+2)
	var stamped atomic.Int64 // changes up to here have their commit time
	stopSub := st.SubscribeChanges(func(seq int64) {
		now := time.Now().UnixNano()
		for n := stamped.Load() + 1; n <= seq && n < int64(len(commitNanos)); n++ {
			commitNanos[n].Store(now)
		}
		stamped.Store(max(stamped.Load(), seq))
	})
	defer stopSub()
	srv := server.New(st, server.Options{})
	ts := httptest.NewServer(srv)
	defer func() { srv.Close(); ts.Close() }()
	addr := strings.TrimPrefix(ts.URL, "http://")
	subs := openSubscribers(b, addr, "/v1/events/stream", subscribers*9/10, 16<<10)
	subs = append(subs, openSubscribers(b, addr, "/v1/events/stream?project=p0", subscribers-len(subs), 16<<10)...)

	lat := make([][]int32, len(subs)) // microseconds
	var wg sync.WaitGroup
	for i, s := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 16<<10)
			got := 0
			for got < changes {
				err := s.pump(buf, func(now, id int64, data, _ bool) {
					if data && id > 0 && id < int64(len(commitNanos)) {
						lat[i] = append(lat[i], int32((now-commitNanos[id].Load())/1000))
						got++
					}
				})
				if err != nil {
					return
				}
			}
		}()
	}
	b.StartTimer()
	cpu0 := processCPU()
	ctx := context.Background()
	tick := time.NewTicker(time.Second / time.Duration(rate))
	for i := range changes {
		<-tick.C
		if err := st.CreateSession(ctx, storetest.NewSession(fmt.Sprintf("S-%d", i), storetest.SessionSpec{Project: "p0"})); err != nil {
			b.Fatal(err)
		}
	}
	tick.Stop()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		b.Fatal("the subscribers did not receive every change within 30 s")
	}
	b.StopTimer()
	cpu := processCPU() - cpu0
	for _, s := range subs {
		s.conn.Close()
	}
	var all []int32
	chunks := 0
	for _, s := range subs {
		chunks += s.chunks - 1 // not the opening block
	}
	for i, l := range lat {
		if len(l) != changes {
			b.Fatalf("subscriber %d received %d changes, want %d", i, len(l), changes)
		}
		all = append(all, l...)
	}
	slices.Sort(all)
	pct := func(p float64) float64 { return float64(all[min(len(all)-1, int(float64(len(all))*p))]) / 1000 }
	return feedResult{p50: pct(0.5), p99: pct(0.99), max: float64(all[len(all)-1]) / 1000,
		cpuPerDelivery: float64(cpu.Nanoseconds()) / float64(len(all)), perWrite: float64(len(all)) / float64(chunks)}
}
