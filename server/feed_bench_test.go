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

	"github.com/sessiond/sessiond/internal/testenv"
	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/store/sqlite"
	"github.com/sessiond/sessiond/store/storetest"
)

// BenchmarkChangeFeed: 1,000 SSE subscribers follow GET /v1/events/stream while one writer
// creates sessions on a SQLite store, one commit each, at 50 or 200 per second for 3 s. The
// subscribers are raw HTTP readers, one connection and goroutine each: in this process
// (subscribers=in-process; every tenth filtered by ?project=p0, which every session has), or
// in a child process (subscribers=child-process, the test binary re-run as TestFanoutClients,
// none filtered), so that this process holds only the server and the writer, as in a
// deployment. The commit time of each change is taken by a SubscribeChanges callback
// registered before the server's (so: when the commit is durable and the store reports it); a
// delivery is stamped when the subscriber's Read returns the block. Reported: p50/p99/max of
// commit-to-delivery over all deliveries (1,000 x the changes of one op); CPU time per
// delivered change: of the server's process (server-cpu-ns/delivery, child-process only) and
// of server and subscribers (cpu-ns/delivery); and in-process, the changes one write of the
// server carries on average (deliveries over the chunks received after the opening one). The
// CPU figures and changes/write depend far less on the machine's load than the latencies do.
func BenchmarkChangeFeed(b *testing.B) {
	const subscribers = 1000
	raiseOpenFiles(b, 2*subscribers+256)
	for _, rate := range []int{50, 200} {
		for _, mode := range []string{"in-process", "child-process"} {
			b.Run(fmt.Sprintf("changes-per-s=%d/subscribers=%s", rate, mode), func(b *testing.B) {
				var p50s, p99s, maxs, cpus, srvCPUs, perWrite []float64
				for range b.N {
					var r feedResult
					if mode == "in-process" {
						r = runChangeFeed(b, subscribers, rate, 3*rate)
					} else {
						r = runChangeFeedSplit(b, subscribers, rate, 3*rate)
					}
					p50s, p99s, maxs = append(p50s, r.p50), append(p99s, r.p99), append(maxs, r.max)
					cpus, srvCPUs, perWrite = append(cpus, r.cpuPerDelivery), append(srvCPUs, r.serverCPUPerDelivery), append(perWrite, r.perWrite)
				}
				med := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
				b.ReportMetric(med(p50s), "p50-ms")
				b.ReportMetric(med(p99s), "p99-ms")
				b.ReportMetric(med(maxs), "max-ms")
				b.ReportMetric(med(cpus), "cpu-ns/delivery")
				if mode == "in-process" {
					b.ReportMetric(med(perWrite), "changes/write")
				} else {
					b.ReportMetric(med(srvCPUs), "server-cpu-ns/delivery")
				}
			})
		}
	}
}

// feedResult is what one run of BenchmarkChangeFeed measured.
type feedResult struct {
	p50, p99, max        float64 // milliseconds
	cpuPerDelivery       float64 // ns, server and subscribers
	serverCPUPerDelivery float64 // ns, the server's process alone (child-process)
	perWrite             float64 // changes per write of the server (in-process)
}

// feedBench is a server on a fresh SQLite store, with the commit time of every change.
type feedBench struct {
	st          *sqlite.Store
	addr        string
	commitNanos []atomic.Int64 // by change sequence
	close       func()
}

func newFeedBench(b *testing.B, changes int) *feedBench {
	st, err := sqlite.Open(context.Background(), b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	fb := &feedBench{st: st, commitNanos: make([]atomic.Int64, changes+2)}
	var stamped atomic.Int64 // changes up to here have their commit time
	stopSub := st.SubscribeChanges(func(seq int64) {
		now := time.Now().UnixNano()
		for n := stamped.Load() + 1; n <= seq && n < int64(len(fb.commitNanos)); n++ {
			fb.commitNanos[n].Store(now)
		}
		stamped.Store(max(stamped.Load(), seq))
	})
	srv := newServer(b, st, server.Options{})
	ts := httptest.NewServer(srv)
	fb.addr = strings.TrimPrefix(ts.URL, "http://")
	fb.close = func() { srv.Close(); ts.Close(); stopSub(); st.Close() }
	return fb
}

// write creates changes sessions, one commit each, at rate per second.
func (fb *feedBench) write(b *testing.B, rate, changes int) {
	ctx := context.Background()
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for i := range changes {
		<-tick.C
		if err := fb.st.CreateSession(ctx, storetest.NewSession(fmt.Sprintf("S-%d", i), storetest.SessionSpec{Project: "p0"})); err != nil {
			b.Fatal(err)
		}
	}
}

func runChangeFeed(b *testing.B, subscribers, rate, changes int) feedResult {
	b.StopTimer()
	fb := newFeedBench(b, changes)
	defer fb.close()
	commitNanos := fb.commitNanos
	subs := openSubscribers(b, fb.addr, "/v1/events/stream", subscribers*9/10, 16<<10)
	subs = append(subs, openSubscribers(b, fb.addr, "/v1/events/stream?project=p0", subscribers-len(subs), 16<<10)...)

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
	cpu0 := testenv.ProcessCPU()
	fb.write(b, rate, changes)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		b.Fatal("the subscribers did not receive every change within 30 s")
	}
	b.StopTimer()
	cpu := testenv.ProcessCPU() - cpu0
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

// runChangeFeedSplit is runChangeFeed with the subscribers in a child process (as
// runFanoutSplit): the child stamps every delivery, then gets the commit times by sequence
// and answers with the percentiles.
func runChangeFeedSplit(b *testing.B, subscribers, rate, changes int) feedResult {
	b.StopTimer()
	fb := newFeedBench(b, changes)
	defer fb.close()
	total := int64(changes) + 1 // sequences 1 to changes
	cl := startFanoutClients(b, fb.addr, "/v1/events/stream", subscribers, total, 1)
	defer cl.close()
	b.StartTimer()
	cpu0 := testenv.ProcessCPU()
	fb.write(b, rate, changes)
	v := cl.result(b, total, func(i int64) (commit, send int64) {
		c := fb.commitNanos[i].Load()
		return c, c
	})
	cpu := testenv.ProcessCPU() - cpu0
	b.StopTimer()
	deliveries := float64(subscribers) * float64(changes)
	return feedResult{p50: v[0], p99: v[1], max: v[2],
		cpuPerDelivery:       (float64(cpu.Nanoseconds()) + v[4]) / deliveries,
		serverCPUPerDelivery: float64(cpu.Nanoseconds()) / deliveries}
}
