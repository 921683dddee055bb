package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/store/sqlite"
)

// flushOnly hides every optional interface of the ResponseWriter but Flush (no Hijack, no
// Unwrap), as some middleware does: streams must then use the ResponseWriter path.
type flushOnly struct{ w http.ResponseWriter }

func (f flushOnly) Header() http.Header         { return f.w.Header() }
func (f flushOnly) Write(b []byte) (int, error) { return f.w.Write(b) }
func (f flushOnly) WriteHeader(code int)        { f.w.WriteHeader(code) }
func (f flushOnly) Flush()                      { f.w.(http.Flusher).Flush() }

// TestStreamWithoutHijack checks replay, live tail and the final message when the
// connection cannot be taken over.
func TestStreamWithoutHijack(t *testing.T) {
	st, err := sqlite.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, st, server.Options{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		srv.ServeHTTP(flushOnly{w}, r)
	}))
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
		st.Close()
	})
	b := &bundle{st: st, srv: srv, ts: ts}
	b.createSession(t, "S-fb")
	b.appendN(t, "S-fb", 0, 3)
	s := openStream(t, b, "/v1/sessions/S-fb/events/stream", nil)
	if s.resp.Close {
		t.Fatal("the connection was taken over (Connection: close) through a writer without Hijack")
	}
	for want := 0; want < 6; want++ {
		if want == 3 {
			b.appendN(t, "S-fb", 3, 3)
		}
		e, err := s.nextEvent()
		if err != nil || e.id != strconv.Itoa(want) || e.event != "ev.message" {
			t.Fatalf("event %d: got %+v %v", want, e, err)
		}
	}
	srv.Close()
	e, err := s.nextEvent()
	if err != nil || e.event != "stream.error" || !strings.Contains(e.data, "SHUTTING_DOWN") {
		t.Fatalf("got %+v %v, want a SHUTTING_DOWN final message", e, err)
	}
}
