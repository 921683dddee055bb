package server_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/sessiond/sessiond/server"
)

// lockedBuffer is a bytes.Buffer safe for the server's goroutines and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines(t *testing.T) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.b.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// TestRequestID: a fit X-Request-Id comes back as it was sent and is on the request's log
// line; any other value (or none) is replaced by a new id, different for every request.
func TestRequestID(t *testing.T) {
	var logs lockedBuffer
	b := setup(t, server.Options{Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	seen := map[string]bool{}
	cases := []struct {
		name, sent string
		kept       bool
	}{
		{"fit", "req-1.a:b_c", true},
		{"128 characters", strings.Repeat("a", 128), true},
		{"none", "", false},
		{"129 characters", strings.Repeat("a", 129), false},
		{"a space", "req 1", false},
		{"a quote", `req"1`, false},
		{"not ASCII", "réq", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", b.ts.URL+"/healthz", nil)
			if c.sent != "" {
				req.Header.Set("X-Request-Id", c.sent)
			}
			resp, err := b.ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			got := resp.Header.Get("X-Request-Id")
			if c.kept && got != c.sent || !c.kept && (got == c.sent || got == "") {
				t.Fatalf("sent %q, got back %q; kept=%v", c.sent, got, c.kept)
			}
			if seen[got] {
				t.Fatalf("request id %q was given twice", got)
			}
			seen[got] = true
			found := false
			for _, l := range logs.lines(t) {
				if l["msg"] == "request" && l["request_id"] == got && l["route"] == "GET /healthz" && l["status"] == float64(200) {
					found = true
				}
			}
			if !found {
				t.Fatalf("no request log line with request_id %q", got)
			}
		})
	}
}
