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
// batches of 64 ~470-byte message events to a session each, 40,960 events a round), with the
// index off and on, alternated in one run (-count N runs off, on, off, on, ...). With the
// index on, the indexer runs in the server as in production (asynchronously, woken by the
// commits) and each round ends when the index is level with the logs, so that the work it
// defers is counted: events/s is the appends' throughput (acknowledged), level-events/s the
// events over the time until they were all searchable, cpu-µs/event the process's CPU over
// the same time, and lag-p99-ms and lag-max-ms the indexer's lag (the age of the oldest
// commit not yet indexed) sampled every 2 ms while the clients append.
func BenchmarkSearchUpkeep(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "index=off"
		if on {
			name = "index=on"
		}
		b.Run(name, func(b *testing.B) { benchUpkeep(b, on) })
	}
}

func benchUpkeep(b *testing.B, on bool) {
	const clients, batch, batches = 8, 64, 80
	ctx := context.Background()
	st, err := sqlite.Open(ctx, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	opt := server.Options{}
	if on {
		if opt.Search, err = st.Search(ctx); err != nil {
			b.Fatal(err)
		}
	}
	srv := server.New(st, opt)
	ts := httptest.NewServer(srv)
	defer func() { srv.Close(); ts.Close() }()
	bd := &bundle{st: st, srv: srv, ts: ts}
	hc := &http.Client{Transport: benchTransport(clients)}
	defer hc.CloseIdleConnections()
	var (
		n             int64
		acked, level  workloadTotals
		lags          []time.Duration
		ids           = idStyles[0]
		sampleStop    chan struct{}
		sampleDone    sync.WaitGroup
		sampleLagsOut []time.Duration
	)
	for round := 0; round < b.N; round++ {
		b.StopTimer()
		bodies := make([][][]byte, clients)
		urls := make([]string, clients)
		for c := range clients {
			sid := fmt.Sprintf("S-up-%d-%d", round, c)
			bd.createSession(b, sid)
			urls[c] = ts.URL + "/v1/sessions/" + sid + "/events"
			for range batches {
				var body []byte
				for range batch {
					id, key := ids.ids(n)
					n++
					body = append(workloadEvent(body, sid, id, key), '\n')
				}
				bodies[c] = append(bodies[c], body)
			}
		}
		if on {
			if _, err := srv.SearchIndexer().CatchUp(ctx, nil); err != nil {
				b.Fatal(err)
			}
			sampleStop, sampleLagsOut = make(chan struct{}), nil
			sampleDone.Add(1)
			go func() {
				defer sampleDone.Done()
				t := time.NewTicker(2 * time.Millisecond)
				defer t.Stop()
				for {
					select {
					case <-sampleStop:
						return
					case <-t.C:
						lag, _ := srv.SearchIndexer().Lag()
						sampleLagsOut = append(sampleLagsOut, lag)
					}
				}
			}()
		}
		b.StartTimer()
		run := startRun()
		err := parallel(clients, func(c int) error {
			for _, body := range bodies[c] {
				if err := post(hc, urls[c], "application/x-ndjson", body, http.StatusCreated); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		acked.took += time.Since(run.start)
		acked.events += clients * batch * batches
		if on {
			close(sampleStop)
			sampleDone.Wait()
			lags = append(lags, sampleLagsOut...)
			// The work the index deferred: until it is level with the logs.
			for {
				lag, behind := srv.SearchIndexer().Lag()
				if lag == 0 && behind == 0 {
					break
				}
				time.Sleep(time.Millisecond)
			}
			if _, err := srv.SearchIndexer().CatchUp(ctx, nil); err != nil {
				b.Fatal(err)
			}
		}
		level.add(run, clients*batch*batches)
	}
	b.ReportMetric(float64(acked.events)/acked.took.Seconds(), "events/s")
	b.ReportMetric(float64(level.events)/level.took.Seconds(), "level-events/s")
	b.ReportMetric(float64(level.cpu.Microseconds())/float64(level.events), "cpu-µs/event")
	b.ReportMetric(float64(level.written)/float64(level.events), "written-B/event")
	if on && len(lags) > 0 {
		sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
		b.ReportMetric(float64(lags[len(lags)*99/100].Microseconds())/1000, "lag-p99-ms")
		b.ReportMetric(float64(lags[len(lags)-1].Microseconds())/1000, "lag-max-ms")
	}
}
