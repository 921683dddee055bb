package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/store/sqlite"
)

// BenchmarkSearchUpkeep measures what the search index costs W1 on SQLite (8 clients appending
// batches of 64 ~470-byte message events to a session each, 40,960 events a round), side by
// side in one run: each iteration runs a round on a server without the index, then a round on
// a server with it (each over a store of its own), so that both see the same load. With the
// index on, the indexer runs in the server as in production (asynchronously, woken by the
// commits) and the round ends when the index is level with the logs, so that the work it
// defers is counted. Reported per server (off-, on-): events/s, the appends' throughput
// (acknowledged); level-events/s, the events over the time until all were searchable;
// cpu-µs/event, the process's CPU over that time; and for the index, lag-p99-ms and
// lag-max-ms, its lag (the age of the oldest commit not yet indexed) sampled every 2 ms while
// the clients append; ratio-level is on-level-events/s over off-level-events/s.
func BenchmarkSearchUpkeep(b *testing.B) {
	off, on := newUpkeep(b, false), newUpkeep(b, true)
	for round := 0; round < b.N; round++ {
		off.round(b, round)
		on.round(b, round)
	}
	off.report(b, "off-")
	on.report(b, "on-")
	b.ReportMetric(on.level.rate()/off.level.rate(), "ratio-level")
	b.ReportMetric(on.acked.rate()/off.acked.rate(), "ratio-acked")
	b.ReportMetric(0, "ns/op")
}

// upkeep is one side of BenchmarkSearchUpkeep: a server, with the index or without.
type upkeep struct {
	on    bool
	srv   *server.Server
	ts    *httptest.Server
	bd    *bundle
	hc    *http.Client
	n     int64
	acked workloadTotals
	level workloadTotals
	lags  []time.Duration
}

func (t workloadTotals) rate() float64 { return float64(t.events) / t.took.Seconds() }

func newUpkeep(b *testing.B, on bool) *upkeep {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	opt := server.Options{}
	if on {
		if opt.Search, err = st.Search(ctx); err != nil {
			b.Fatal(err)
		}
	}
	u := &upkeep{on: on, srv: newServer(b, st, opt)}
	u.ts = httptest.NewServer(u.srv)
	u.bd = &bundle{st: st, srv: u.srv, ts: u.ts}
	u.hc = &http.Client{Transport: benchTransport(8)}
	b.Cleanup(func() { u.hc.CloseIdleConnections(); u.srv.Close(); u.ts.Close(); st.Close() })
	return u
}

func (u *upkeep) round(b *testing.B, round int) {
	const clients, batch, batches = 8, 64, 80
	ctx := context.Background()
	ids := idStyles[0]
	b.StopTimer()
	bodies := make([][][]byte, clients)
	urls := make([]string, clients)
	for c := range clients {
		sid := fmt.Sprintf("S-up-%d-%d", round, c)
		u.bd.createSession(b, sid)
		urls[c] = u.ts.URL + "/v1/sessions/" + sid + "/events"
		for range batches {
			var body []byte
			for range batch {
				id, key := ids.ids(u.n)
				u.n++
				body = append(workloadEvent(body, sid, id, key), '\n')
			}
			bodies[c] = append(bodies[c], body)
		}
	}
	var (
		stop    = make(chan struct{})
		sampled sync.WaitGroup
		lags    []time.Duration
	)
	if u.on {
		if _, err := u.srv.SearchIndexer().CatchUp(ctx, nil); err != nil {
			b.Fatal(err)
		}
		sampled.Add(1)
		go func() {
			defer sampled.Done()
			t := time.NewTicker(2 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					lag, _ := u.srv.SearchIndexer().Lag()
					lags = append(lags, lag)
				}
			}
		}()
	}
	b.StartTimer()
	run := startRun()
	err := parallel(clients, func(c int) error {
		for _, body := range bodies[c] {
			if err := post(u.hc, urls[c], "application/x-ndjson", body, http.StatusCreated); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	u.acked.took += time.Since(run.start)
	u.acked.events += clients * batch * batches
	close(stop)
	if u.on {
		sampled.Wait()
		u.lags = append(u.lags, lags...)
		// The work the index deferred: until it is level with the logs.
		for {
			lag, behind := u.srv.SearchIndexer().Lag()
			if lag == 0 && behind == 0 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		if _, err := u.srv.SearchIndexer().CatchUp(ctx, nil); err != nil {
			b.Fatal(err)
		}
	}
	u.level.add(run, clients*batch*batches)
}

func (u *upkeep) report(b *testing.B, prefix string) {
	b.ReportMetric(u.acked.rate(), prefix+"events/s")
	b.ReportMetric(u.level.rate(), prefix+"level-events/s")
	b.ReportMetric(float64(u.level.cpu.Microseconds())/float64(u.level.events), prefix+"cpu-µs/event")
	if len(u.lags) > 0 {
		sort.Slice(u.lags, func(i, j int) bool { return u.lags[i] < u.lags[j] })
		b.ReportMetric(float64(u.lags[len(u.lags)*99/100].Microseconds())/1000, prefix+"lag-p99-ms")
		b.ReportMetric(float64(u.lags[len(u.lags)-1].Microseconds())/1000, prefix+"lag-max-ms")
	}
}
