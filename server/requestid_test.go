package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/server"
)

// TestEveryAnswerCarriesARequestID walks the route table and sends a request to every route
// over a real listener (streams take their connection over there), then the requests net/http
// refuses before routing: every answer carries X-Request-Id, the client's own when it sent a
// fit one. Before, the streams (the session stream, the change feed, the chat and AG-UI
// bridges) and the refusals rewritten by the listener carried none.
func TestEveryAnswerCarriesARequestID(t *testing.T) {
	s := serveReal(t, server.Options{}, false)
	// The chat POST queues a run in S-rid; the AG-UI POST gets a session of its own, where
	// no run is active.
	const sid, aguiSID = "S-rid", "S-rid-agui"
	for _, id := range []string{sid, aguiSID} {
		if r := s.post(t, "/v1/sessions", fmt.Sprintf(bridgeCreate, id)); r.StatusCode != http.StatusCreated {
			t.Fatalf("create: %d", r.StatusCode)
		}
	}
	// Bodies that start a stream; every other route gets {} when it takes a body.
	bodies := map[string]string{
		"POST /v1/sessions/{id}/chat": `{"id":"S-rid","messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"hi"}]}],"trigger":"submit-message"}`,
		"POST /v1/sessions/{id}/agui": `{"threadId":"S-rid-agui","runId":"c1","messages":[{"id":"u1","role":"user","content":"hi"}],"tools":[],"context":[],"state":{},"forwardedProps":{}}`,
	}
	paths := strings.NewReplacer("{id}", sid, "{chatId}", sid, "{runId}", "r1", "{keyId}", "k1", "{$}", "", "{file...}", "app.js")
	streams := 0
	for i, rt := range s.srv.RouteTable() {
		method, path, _ := strings.Cut(rt.Pattern, " ")
		path = paths.Replace(path)
		if rt.Pattern == "POST /v1/sessions/{id}/agui" {
			path = strings.Replace(path, sid, aguiSID, 1)
		}
		body := bodies[rt.Pattern]
		if body == "" && rt.Body != nil {
			body = "{}"
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		req, err := http.NewRequestWithContext(ctx, method, s.url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		want := fmt.Sprintf("rid-%d", i)
		req.Header.Set("X-Request-Id", want)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatalf("%s: %v", rt.Pattern, err)
		}
		if resp.Header.Get("Content-Type") == "text/event-stream" {
			streams++ // the header is all this test reads of a stream
		} else {
			io.Copy(io.Discard, resp.Body)
		}
		resp.Body.Close()
		cancel()
		if got := resp.Header.Values("X-Request-Id"); len(got) != 1 || got[0] != want {
			t.Errorf("%s → %d: X-Request-Id %q, want %q", rt.Pattern, resp.StatusCode, got, want)
		}
	}
	// The session stream, the change feed, the chat POST and its resume, the AG-UI POST.
	if streams < 5 {
		t.Errorf("%d of the answers were streams, want at least 5: the walk no longer reaches them", streams)
	}

	huge := strings.Repeat("a", server.MaxHeaderBytes+4096)
	for name, raw := range map[string]string{
		"bad percent-escape": "GET /v1/sessions/%zz HTTP/1.1\r\nHost: x\r\nX-Request-Id: mine\r\n\r\n",
		"headers too large":  "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + huge + "\r\n\r\n",
		"bad encoding":       "POST /v1/sessions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
	} {
		resp, body := rawResponse(t, s.addr, raw)
		if id := resp.Header.Get("X-Request-Id"); resp.StatusCode < 400 || id == "" || id == "mine" {
			t.Errorf("%s → %d %s: X-Request-Id %q, want a new one", name, resp.StatusCode, body, id)
		}
	}
}
