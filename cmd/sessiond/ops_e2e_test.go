package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestServeLogsAndMetricsEndToEnd runs "sessiond serve --log-format json --log-level debug
// --metrics-addr 127.0.0.1:0 --admin-addr 127.0.0.1:0": every log line is a JSON object; a
// request's X-Request-Id comes back and is on its log line; /metrics answers on the API and
// metrics listeners; pprof on the admin listener only.
func TestServeLogsAndMetricsEndToEnd(t *testing.T) {
	base, _, stderr := startServe(t, "--data", t.TempDir(), "--log-format", "json", "--log-level", "debug", "--metrics-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0")
	req, _ := http.NewRequest("GET", base+"/v1/sessions/S-none", nil)
	req.Header.Set("X-Request-Id", "e2e-req.1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 || resp.Header.Get("X-Request-Id") != "e2e-req.1" {
		t.Fatalf("GET: %d, X-Request-Id %q; want 404 and e2e-req.1 back", resp.StatusCode, resp.Header.Get("X-Request-Id"))
	}
	var metricsURL, adminURL string
	var sawRequest bool
	deadline := time.Now().Add(10 * time.Second)
	for (metricsURL == "" || adminURL == "" || !sawRequest) && time.Now().Before(deadline) {
		sc := bufio.NewScanner(strings.NewReader(stderr.String()))
		for sc.Scan() {
			var line map[string]any
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				t.Fatalf("--log-format json wrote a line that is not JSON: %q", sc.Text())
			}
			switch line["msg"] {
			case "metrics listening":
				metricsURL, _ = line["addr"].(string)
				metricsURL += "/metrics"
			case "admin listening":
				adminURL, _ = line["addr"].(string)
			case "request":
				if line["request_id"] == "e2e-req.1" && line["status"] == float64(404) {
					sawRequest = true
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if metricsURL == "" || adminURL == "" || !sawRequest {
		t.Fatalf("no metrics listener line (%q), admin listener line (%q) or request line with request_id e2e-req.1 (%v) in:\n%s", metricsURL, adminURL, sawRequest, stderr.String())
	}
	// pprof answers on the admin listener only (docs/operations.md, "Profiling").
	for _, c := range []struct {
		url    string
		status int
		body   string
	}{
		{adminURL + "/debug/pprof/goroutine?debug=1", 200, "goroutine profile:"},
		{adminURL + "/debug/pprof/profile?seconds=1", 200, ""},
		{base + "/debug/pprof/", 404, "NOT_FOUND"},
		{strings.TrimSuffix(metricsURL, "/metrics") + "/debug/pprof/", 404, ""},
	} {
		resp, err := http.Get(c.url)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.Contains(string(body), c.body) {
			t.Errorf("GET %s: %d %.200q, want %d with %q", c.url, resp.StatusCode, body, c.status, c.body)
		}
	}
	for _, u := range []string{metricsURL, base + "/metrics"} {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), `sessiond_http_requests_total{code="404",route="GET /v1/sessions/{id}"} 1`) {
			t.Errorf("GET %s: %d\n%.2000s", u, resp.StatusCode, body)
		}
	}
}

// TestServeRefusesUnknownLogFormat: a --log-format that is neither text nor json is refused
// with the two that are.
func TestServeRefusesUnknownLogFormat(t *testing.T) {
	var out, errOut strings.Builder
	code := runServe([]string{"--data", t.TempDir(), "--log-format", "xml"}, nil, &out, &errOut)
	if code != 2 || !strings.Contains(errOut.String(), "--log-format json") {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
}
