package server

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store"
)

// TestMetricsDuplicates: an answered append's duplicates are counted.
func TestMetricsDuplicates(t *testing.T) {
	m := NewMetrics()
	m.duplicates([]store.AppendResult{{Duplicate: true}, {}, {Duplicate: true}})
	if got := testutil.ToFloat64(m.eventDuplicates); got != 2 {
		t.Errorf("duplicates = %v, want 2", got)
	}
}

// TestMetricsStreamHasNoDuration: a stream request is counted but its duration is not
// observed, and its route gets no duration series at all (an empty histogram would show on
// /metrics and give a NaN quantile); a request of the same route and status that is not a
// stream is observed.
func TestMetricsStreamHasNoDuration(t *testing.T) {
	m := NewMetrics()
	const route = "GET /v1/sessions/{id}/events/stream"
	m.request(route, 200, time.Second, true)
	m.request(route, 200, time.Second, true)
	if got := testutil.ToFloat64(m.httpRequests.WithLabelValues(route, "200")); got != 2 {
		t.Errorf("requests = %v, want 2", got)
	}
	if n := testutil.CollectAndCount(m.httpDuration); n != 0 {
		t.Errorf("duration series after stream requests only: %d, want 0", n)
	}
	m.request(route, 200, time.Second, false)
	if n := testutil.CollectAndCount(m.httpDuration); n != 1 {
		t.Errorf("duration series after a request that is not a stream: %d, want 1", n)
	}
}

// BenchmarkMetricsPerAppend is what metrics add to one HTTP append of 100 events: the request
// counter and histogram, the batch's counts, the append histogram, and the store's
// group-commit and sync hooks (as if each append were a group of its own: the worst case).
// Compare with BenchmarkHTTPAppend's cpu-ns/event × 100 (docs/operations.md).
func BenchmarkMetricsPerAppend(b *testing.B) {
	m := NewMetrics()
	obs := m.StoreObserver()
	results := make([]store.AppendResult, 100)
	b.ReportAllocs()
	for b.Loop() {
		m.stored(session.OriginAPI, "message", 100)
		m.duplicates(results)
		m.appendTook(3 * time.Millisecond)
		obs.GroupCommitted(1, 100)
		obs.Synced(2*time.Millisecond, 1)
		m.request("POST /v1/sessions/{id}/events", 201, 4*time.Millisecond, false)
	}
}

// BenchmarkScrape is one scrape of GET /metrics with every series of a busy server present.
// Nothing in the metrics is per session or per stream, so a scrape costs the same under
// 1,000 streams as under one (the issue asks at most 50 ms).
func BenchmarkScrape(b *testing.B) {
	m := NewMetrics()
	for _, kind := range contract.EventTypes {
		for _, o := range session.Origins {
			m.eventsAppended.WithLabelValues(string(o), kind).Inc()
		}
	}
	for _, c := range []string{"CONTRACT_VIOLATION", "SEQUENCE_CONFLICT", "MALFORMED_REQUEST"} {
		m.rejected(contract.ErrorCode(c))
	}
	for _, ct := range contract.CommandTypes {
		m.command(ct, "accepted")
	}
	for i := range 30 {
		m.request(fmt.Sprintf("GET /route/%d", i), 200, time.Millisecond, false)
	}
	m.subscriber(1000)
	h := m.Handler()
	req := httptest.NewRequest("GET", "/metrics", nil)
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatal(rec.Code)
		}
	}
}

// TestMetricsDocumented: every sessiond_ metric the server registers is listed in
// docs/operations.md's table.
func TestMetricsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics()
	// A vector shows in a scrape once it has a series.
	m.request("GET /healthz", 200, time.Millisecond, false)
	m.eventsAppended.WithLabelValues("api", "message")
	m.appendRejected.WithLabelValues("CONTRACT_VIOLATION")
	m.command("stop", "accepted")
	m.sweep(0, 0, 0, 0, nil)
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range fams {
		if name := f.GetName(); strings.HasPrefix(name, "sessiond_") {
			n++
			if !strings.Contains(string(doc), "| `"+name+"` |") {
				t.Errorf("%s is not in docs/operations.md's table of metrics", name)
			}
		}
	}
	if n < 20 {
		t.Fatalf("found %d sessiond_ metrics; the registry changed shape", n)
	}
}
