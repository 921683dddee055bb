package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/sessiond/sessiond/client"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/sqlite"
)

// metricValue returns the value of the series of a metric with the given label pairs (a
// counter's or gauge's value, a histogram's count); 0 when there is no such series.
func metricValue(t testing.TB, m *server.Metrics, name string, labels ...string) float64 {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	series:
		for _, s := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				if !hasLabel(s, labels[i], labels[i+1]) {
					continue series
				}
			}
			switch {
			case s.Counter != nil:
				return s.Counter.GetValue()
			case s.Gauge != nil:
				return s.Gauge.GetValue()
			case s.Histogram != nil:
				return float64(s.Histogram.GetSampleCount())
			}
		}
	}
	return 0
}

func hasLabel(s *dto.Metric, name, value string) bool {
	for _, l := range s.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

// setupObserved is setup with the store's group commits and syncs reported to the server's
// metrics, as sessiond serve wires them.
func setupObserved(t testing.TB) *bundle {
	t.Helper()
	m := server.NewMetrics()
	st, err := sqlite.Open(context.Background(), t.TempDir(), sqlite.Options{Observer: m.StoreObserver()})
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, st, server.Options{Metrics: m})
	var h http.Handler = srv
	if _, bench := t.(*testing.B); !bench {
		h = validated(t, srv) // benchmarks measure the server alone
	}
	ts := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
		st.Close()
	})
	return &bundle{st: st, srv: srv, ts: ts, cl: client.New(ts.URL, ts.Client())}
}

// TestMetrics: each action moves the metrics it should, and GET /metrics serves them.
func TestMetrics(t *testing.T) {
	b := setupObserved(t)
	b.createSession(t, "S-m")
	batch := event("S-m", 1) + "\n" + event("S-m", 2) + "\n"
	cases := []struct {
		name   string
		do     func(t *testing.T)
		metric string
		labels []string
		want   float64
	}{
		{"two events appended", func(t *testing.T) { b.mustDo(t, "POST", "/v1/sessions/S-m/events", "application/x-ndjson", batch, 201) },
			"sessiond_events_appended_total", []string{"origin", "api", "kind", "message"}, 2},
		{"the same two again are duplicates", func(t *testing.T) { b.mustDo(t, "POST", "/v1/sessions/S-m/events", "application/x-ndjson", batch, 200) },
			"sessiond_event_duplicates_total", nil, 2},
		{"an append with a stale expectedSequence is refused", func(t *testing.T) {
			b.mustDo(t, "POST", "/v1/sessions/S-m/events?expectedSequence=0", "application/json", event("S-m", 3), 409)
		}, "sessiond_append_rejections_total", []string{"code", "SEQUENCE_CONFLICT"}, 1},
		{"every append that reached the store was timed", nil, "sessiond_append_duration_seconds", nil, 3},
		{"the store's syncs were timed", nil, "sessiond_store_sync_duration_seconds", nil, -1},
		{"the store's group commits were sized", nil, "sessiond_store_group_commit_appends", nil, -1},
		{"the database file has a size", nil, "sessiond_store_size_bytes", nil, -1},
		{"requests are counted by route and status", nil, "sessiond_http_requests_total", []string{"route", "POST /v1/sessions/{id}/events", "code", "201"}, 1},
		{"an unknown path is counted as unmatched", func(t *testing.T) { b.mustDo(t, "GET", "/v1/nothing", "", "", 404) },
			"sessiond_http_requests_total", []string{"route", "unmatched", "code", "404"}, 1},
		{"a stop without a run is a rejected command", func(t *testing.T) {
			if st, _ := b.command(t, "S-m", "stop", "r-none", "k-stop", -1, `{}`, ""); st != http.StatusConflict && st != http.StatusNotFound {
				t.Fatalf("stop: %d", st)
			}
		}, "sessiond_commands_total", []string{"type", "stop", "outcome", "rejected"}, 1},
		{"a sweep is counted", func(t *testing.T) { b.mustDo(t, "POST", "/v1/sweep", "", "", 200) },
			"sessiond_sweeps_total", []string{"result", "ok"}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.do != nil {
				c.do(t)
			}
			got := metricValue(t, b.srv.Metrics(), c.metric, c.labels...)
			if c.want < 0 && got <= 0 || c.want >= 0 && got != c.want {
				t.Errorf("%s%v = %v, want %v (-1: some)", c.metric, c.labels, got, c.want)
			}
		})
	}
	t.Run("GET /metrics serves them", func(t *testing.T) {
		resp := b.do(t, "GET", "/metrics", "", "")
		if resp.status != 200 || !strings.HasPrefix(resp.header.Get("Content-Type"), "text/plain") {
			t.Fatalf("GET /metrics: %d %s", resp.status, resp.header.Get("Content-Type"))
		}
		for _, want := range []string{`sessiond_events_appended_total{kind="message",origin="api"} 2`, "sessiond_sse_subscribers 0", "go_goroutines", "process_cpu_seconds_total"} {
			if !strings.Contains(resp.body, want) {
				t.Errorf("GET /metrics has no %q", want)
			}
		}
	})
	t.Run("OpenMetrics when the scraper asks for it", func(t *testing.T) {
		// Prometheus's own Accept header.
		req, _ := http.NewRequest("GET", b.ts.URL+"/metrics", nil)
		req.Header.Set("Accept", "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2")
		resp, err := b.ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text") || !strings.HasSuffix(string(body), "# EOF\n") {
			t.Errorf("GET /metrics with Prometheus's Accept: %s, body ending %q", ct, body[max(0, len(body)-20):])
		}
	})
}

// TestMetricsCountEveryStoredEvent: every event stored is counted, by who had it stored, not
// only those of POST …/events; every refused append is counted by its code, the refusals of
// the guard (415) included. Before, a chat POST's message and queued run, a stop command's
// status and a 415 were not counted at all.
func TestMetricsCountEveryStoredEvent(t *testing.T) {
	b := setupObserved(t)
	const sid, run = "S-orig", "run-m1"
	b.mustDo(t, "POST", "/v1/sessions", "application/json", fmt.Sprintf(bridgeCreate, sid), 201)
	chat := b.async(t, "POST", "/v1/sessions/"+sid+"/chat", `{"id":"S-orig","messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"hi"}]}],"trigger":"submit-message"}`)
	b.waitSequence(t, sid, 1) // the message and the queued run
	b.appendAll(t, sid, runtimeEvent(sid, run, 1, "status", `{"status":"running","startedAt":"2026-03-01T12:00:00Z"}`))
	b.mustDo(t, "POST", "/v1/sessions/"+sid+"/chat/stop", "", "", 200) // the stop command: stopping
	b.appendAll(t, sid, runtimeEvent(sid, run, 2, "status", `{"status":"stopped","stoppedAt":"2026-03-01T12:00:01Z","durationMs":1000}`))
	select {
	case <-chat:
	case <-time.After(30 * time.Second):
		t.Fatal("the chat stream did not end with its run")
	}
	b.mustDo(t, "POST", "/v1/sessions/"+sid+"/events", "text/plain", event(sid, 9), 415)
	b.mustDo(t, "POST", "/v1/sessions/"+sid+"/events?expectedSequence=x", "application/json", event(sid, 9), 400)

	for _, c := range []struct {
		metric string
		labels []string
		want   float64
	}{
		{"sessiond_events_appended_total", []string{"origin", "bridge", "kind", "message"}, 1},
		{"sessiond_events_appended_total", []string{"origin", "bridge", "kind", "status"}, 1},
		{"sessiond_events_appended_total", []string{"origin", "api", "kind", "status"}, 2},
		{"sessiond_events_appended_total", []string{"origin", "command", "kind", "status"}, 1},
		{"sessiond_append_rejections_total", []string{"code", "UNSUPPORTED_MEDIA_TYPE"}, 1},
		{"sessiond_append_rejections_total", []string{"code", "MALFORMED_REQUEST"}, 1},
	} {
		if got := metricValue(t, b.srv.Metrics(), c.metric, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.metric, c.labels, got, c.want)
		}
	}
	// Every event of the log is counted once, whoever stored it.
	total := 0.0
	for _, o := range session.Origins {
		for _, k := range contract.EventTypes {
			total += metricValue(t, b.srv.Metrics(), "sessiond_events_appended_total", "origin", string(o), "kind", k)
		}
	}
	if last := b.lastSequence(t, sid); total != float64(last+1) {
		t.Errorf("%v events counted, the log holds %d", total, last+1)
	}
}

// TestMetricsSubscribers: the subscribers gauge follows streams opening and closing; a live
// delivery is observed in the delivery lag.
func TestMetricsSubscribers(t *testing.T) {
	b := setup(t, server.Options{})
	b.createSession(t, "S-sub")
	s := openStream(t, b, "/v1/sessions/S-sub/events/stream", nil)
	if _, err := s.next(); err != nil {
		t.Fatal(err)
	}
	if n := metricValue(t, b.srv.Metrics(), "sessiond_sse_subscribers"); n != 1 {
		t.Fatalf("sessiond_sse_subscribers = %v with one stream open, want 1", n)
	}
	// A live event delivered is one observation of the delivery lag.
	b.mustDo(t, "POST", "/v1/sessions/S-sub/events", "application/json", event("S-sub", 1), 201)
	if e, err := s.next(); err != nil || e.id != "0" {
		t.Fatalf("the live event: %+v, %v", e, err)
	}
	for deadline := time.Now().Add(5 * time.Second); metricValue(t, b.srv.Metrics(), "sessiond_sse_delivery_lag_events") < 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("sessiond_sse_delivery_lag_events has no observation after a live event was delivered")
		}
	}
	s.resp.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for metricValue(t, b.srv.Metrics(), "sessiond_sse_subscribers") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("sessiond_sse_subscribers did not go back to 0 after the stream closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestMetricsDisabled: without metrics, GET /metrics says so, with what to do.
func TestMetricsDisabled(t *testing.T) {
	b := setup(t, server.Options{DisableMetrics: true})
	resp := b.do(t, "GET", "/metrics", "", "")
	if e := errorBody(t, resp.body); resp.status != http.StatusNotImplemented || e.Code != "NOT_CONFIGURED" || !strings.Contains(e.Message, "sessiond serve") {
		t.Fatalf("GET /metrics without metrics: %d %s", resp.status, resp.body)
	}
}

func (b *bundle) mustDo(t testing.TB, method, path, ct, body string, want int) response {
	t.Helper()
	resp := b.do(t, method, path, ct, body)
	if resp.status != want {
		t.Fatalf("%s %s: %d, want %d: %s", method, path, resp.status, want, resp.body)
	}
	return resp
}

// poolStore is a SQLite store that reports a pool and a listener, as the PostgreSQL driver does.
type poolStore struct {
	*sqlite.Store
	state store.PoolState
}

func (p poolStore) PoolState() store.PoolState { return p.state }

// TestMetricsPoolState: a driver that reports a pool and a listener has them in the metrics,
// read at scrape time.
func TestMetricsPoolState(t *testing.T) {
	st, err := sqlite.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv := newServer(t, poolStore{st, store.PoolState{AcquiredConns: 2, IdleConns: 3, TotalConns: 5, MaxConns: 8, EmptyAcquires: 7, ListenerUp: true, ListenerReconnects: 4}}, server.Options{})
	defer srv.Close()
	for _, c := range []struct {
		metric string
		labels []string
		want   float64
	}{
		{"sessiond_pg_pool_connections", []string{"state", "acquired"}, 2},
		{"sessiond_pg_pool_connections", []string{"state", "idle"}, 3},
		{"sessiond_pg_pool_max_connections", nil, 8},
		{"sessiond_pg_pool_empty_acquires_total", nil, 7},
		{"sessiond_pg_listener_up", nil, 1},
		{"sessiond_pg_listener_reconnects_total", nil, 4},
		{"sessiond_store_size_bytes", nil, -1}, // the embedded SQLite store's
	} {
		got := metricValue(t, srv.Metrics(), c.metric, c.labels...)
		if c.want < 0 && got <= 0 || c.want >= 0 && got != c.want {
			t.Errorf("%s%v = %v, want %v (-1: some)", c.metric, c.labels, got, c.want)
		}
	}
}
