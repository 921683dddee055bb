package server_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/server"
)

// FuzzAppend throws arbitrary bodies at the append endpoint, in every body form. Whatever comes
// in, the server never answers 5xx and never panics, and a rejected request stores nothing.
func FuzzAppend(f *testing.F) {
	seeds := []string{
		event("S-f", 1),
		"[" + event("S-f", 2) + "," + event("S-f", 3) + "]",
		event("S-f", 4) + "\n" + event("S-f", 5),
		`{"contract":"AgentSessionEvent"}`,
		`[1,2,3]`, `{}`, `[]`, `null`, "\xff", `{"a":1,"a":2}`, strings.Repeat("[", 300),
		strings.Replace(event("S-f", 6), `"sequence":0`, `"sequence":1e400`, 1),
		strings.Replace(event("S-f", 7), `"message"`, `"status"`, 1),
	}
	for i, s := range seeds {
		f.Add([]byte(s), uint8(i%3))
	}
	b := setup(f, server.Options{MaxBodyBytes: 1 << 20})
	b.createSession(f, "S-f")
	ctypes := []string{"application/json", "application/x-ndjson", ""}
	f.Fuzz(func(t *testing.T, body []byte, ct uint8) {
		before := b.lastSequence(t, "S-f")
		req := httptest.NewRequest("POST", "/v1/sessions/S-f/events", strings.NewReader(string(body)))
		if c := ctypes[int(ct)%len(ctypes)]; c != "" {
			req.Header.Set("Content-Type", c)
		}
		rec := httptest.NewRecorder()
		b.srv.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body)
		}
		if rec.Code >= 400 {
			if after := b.lastSequence(t, "S-f"); after != before {
				t.Fatalf("rejected request (%d) changed the log from %d to %d", rec.Code, before, after)
			}
			if !strings.Contains(rec.Body.String(), `"code":"`) {
				t.Fatalf("error without a code: %s", rec.Body)
			}
		}
	})
}

// FuzzCreateSession does the same for session creation.
func FuzzCreateSession(f *testing.F) {
	f.Add([]byte(`{"agent_id":"a","role":"user","snapshot":{"mode":"chat","modelId":"m","capabilities":{}}}`))
	f.Add([]byte(`{"session_id":"S-x","agent_id":"a","role":"user","mode":null,"project":"p","snapshot":{"mode":"work","modelId":"m","capabilities":{"text":false}}}`))
	f.Add([]byte(`{"agent_id":1}`))
	b := setup(f, server.Options{})
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest("POST", "/v1/sessions", strings.NewReader(string(body)))
		rec := httptest.NewRecorder()
		b.srv.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body)
		}
		if rec.Code == http.StatusCreated && !strings.Contains(rec.Body.String(), `"session_id":"S-`) {
			t.Fatalf("created a session without an S- id: %s", rec.Body)
		}
	})
}
