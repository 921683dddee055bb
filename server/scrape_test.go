package server_test

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/server"
)

// TestScrapeUnder1000Streams opens 1,000 live SSE streams (100 sessions of 10), appends to
// every session, and scrapes GET /metrics: the scrape
// answers within 50 ms (the fastest of 7, so that a loaded machine's pauses do not decide)
// and holds as many series as with one stream open, since no series is per stream or per
// session.
func TestScrapeUnder1000Streams(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 1,000 streams")
	}
	b := setup(t, server.Options{})
	scrape := func() (string, time.Duration) {
		t.Helper()
		start := time.Now()
		resp, err := b.ts.Client().Get(b.ts.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("scrape: %d %v", resp.StatusCode, err)
		}
		return string(body), took
	}
	series := func(body string) int {
		n := 0
		for _, l := range strings.Split(body, "\n") {
			if l != "" && !strings.HasPrefix(l, "#") && !strings.HasPrefix(l, "go_") && !strings.HasPrefix(l, "process_") {
				n++
			}
		}
		return n
	}
	b.createSession(t, "S-s0")
	first := openStream(t, b, "/v1/sessions/S-s0/events/stream", nil)
	if _, err := first.next(); err != nil {
		t.Fatal(err)
	}
	b.mustDo(t, "POST", "/v1/sessions/S-s0/events", "application/json", event("S-s0", 1), 201)
	if e, err := first.next(); err != nil || e.id != "0" {
		t.Fatalf("the live event: %+v, %v", e, err)
	}
	scrape() // the first scrape's own route series appear from the second on
	one, _ := scrape()

	for i := 1; i < 100; i++ {
		b.createSession(t, fmt.Sprintf("S-s%d", i))
	}
	for i := range 100 {
		for j := range 10 {
			if i == 0 && j == 0 {
				continue // opened above
			}
			openStream(t, b, fmt.Sprintf("/v1/sessions/S-s%d/events/stream", i), nil)
		}
	}
	waitMetric(t, b, "sessiond_sse_subscribers", 1000)
	for i := 1; i < 100; i++ {
		id := fmt.Sprintf("S-s%d", i)
		b.mustDo(t, "POST", "/v1/sessions/"+id+"/events", "application/json", event(id, 1), 201)
	}
	var took []time.Duration
	var body string
	for range 7 {
		var d time.Duration
		body, d = scrape()
		took = append(took, d)
	}
	slices.Sort(took)
	t.Logf("scrape under 1,000 streams: fastest %s, median %s, slowest %s (of 7)", took[0], took[3], took[6])
	if took[0] > 50*time.Millisecond {
		t.Errorf("the fastest of 7 scrapes under 1,000 streams took %s; want at most 50 ms", took[0])
	}
	if n, m := series(body), series(one); n != m {
		t.Errorf("%d series under 1,000 streams, %d under one: something is per stream or per session", n, m)
	}
}

// waitMetric waits up to 30 s for a metric to reach at least want.
func waitMetric(t *testing.T, b *bundle, name string, want float64) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); metricValue(t, b.srv.Metrics(), name) < want; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v after 30 s; want %v", name, metricValue(t, b.srv.Metrics(), name), want)
		}
	}
}
