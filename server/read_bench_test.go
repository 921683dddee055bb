package server_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/benchkit"
	"github.com/sessiond/sessiond/internal/testenv"
	"github.com/sessiond/sessiond/server"
)

// BenchmarkReadLog100k is the server's side of W5 of the peer benchmark (docs/benchmarks.md):
// one client reads a 100,000-event session (the peer benchmark's ~470-byte agent events) from
// its start through a real loopback server on SQLite, paged (GET /v1/sessions/{id}/events,
// pages of 10,000) or in one streamed answer (GET /v1/sessions/{id}/events/export). The client
// only counts the bytes, so that the process's CPU per event (cpu-µs/event) is nearly all the
// server's; one op is one read of the whole session.
//
//	go test ./server/ -run '^$' -bench ReadLog100k -benchtime 5x -count 5
func BenchmarkReadLog100k(b *testing.B) {
	const n = 100_000
	bd := setup(b, server.Options{})
	const sid = "S-read100k"
	bd.createSession(b, sid)
	g := benchkit.NewGenerator(benchkit.RandomIDs, 0)
	for i := 0; i < n; i += 1000 {
		var body bytes.Buffer
		for _, e := range g.Batch(sid, 1000) {
			body.Write(e.Data)
			body.WriteByte('\n')
		}
		if r := bd.do(b, "POST", "/v1/sessions/"+sid+"/events", "application/x-ndjson", body.String()); r.status != http.StatusCreated {
			b.Fatalf("load: %d %s", r.status, r.body)
		}
	}
	hc := bd.ts.Client()
	get := func(path string) int {
		resp, err := hc.Get(bd.ts.URL + path)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		got, err := io.Copy(io.Discard, resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %d, %v", path, resp.StatusCode, err)
		}
		return int(got)
	}
	for _, way := range []string{"paged", "export"} {
		b.Run(way, func(b *testing.B) {
			cpu0, start, bytesRead := testenv.ProcessCPU(), time.Now(), 0
			for range b.N {
				if way == "export" {
					bytesRead += get("/v1/sessions/" + sid + "/events/export")
					continue
				}
				for after := -1; after < n-1; after += 10000 {
					bytesRead += get(fmt.Sprintf("/v1/sessions/%s/events?limit=10000&after=%d", sid, after))
				}
			}
			events := float64(b.N * n)
			b.ReportMetric(events/time.Since(start).Seconds(), "events/s")
			b.ReportMetric(float64((testenv.ProcessCPU()-cpu0).Microseconds())/events, "cpu-µs/event")
			b.ReportMetric(float64(bytesRead)/events, "bytes/event")
		})
	}
}
