package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/client"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/server"
)

// appendMany appends n events to sid in NDJSON batches of 1,000.
func appendMany(t *testing.T, b *bundle, sid string, n int) {
	t.Helper()
	for i := 0; i < n; i += 1000 {
		var body strings.Builder
		for j := i; j < min(i+1000, n); j++ {
			body.WriteString(event(sid, j))
			body.WriteByte('\n')
		}
		if r := b.do(t, "POST", "/v1/sessions/"+sid+"/events", "application/x-ndjson", body.String()); r.status != http.StatusCreated {
			t.Fatalf("append: %d %s", r.status, r.body)
		}
	}
}

// storedLines returns the log after after as NDJSON: the stored bytes of each event, read
// through the paged read (the reference the export must equal byte for byte).
func storedLines(t *testing.T, b *bundle, sid string, after int64) []byte {
	t.Helper()
	var out []byte
	for {
		page, err := b.cl.ReadEvents(context.Background(), sid, after, 10000)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Events) == 0 {
			return out
		}
		for _, e := range page.Events {
			out = append(append(out, e...), '\n')
		}
		after += int64(len(page.Events))
	}
}

// TestExportEvents: GET /v1/sessions/{id}/events/export answers the log after every starting
// point (the start, inside the first and the later chunks, on a chunk's edge, the last event,
// past the end; Last-Event-ID winning over after) as the stored bytes of each event, one per
// line, with Sessiond-Last-Sequence; client.Export yields the same events with their
// sequences, and stops when the loop breaks.
func TestExportEvents(t *testing.T) {
	b := setup(t, server.Options{})
	const sid, n = "S-export", 4500 // more than two of the server's chunks (2,048 events)
	b.createSession(t, sid)
	b.createSession(t, "S-empty")
	appendMany(t, b, sid, n)
	last := int64(n - 1)
	for _, c := range []struct {
		query, lastEventID string
		after              int64 // the starting point the request means
	}{
		{"", "", -1}, {"?after=-1", "", -1}, {"?after=0", "", 0}, {"?after=2047", "", 2047},
		{"?after=2048", "", 2048}, {"?after=3000", "", 3000}, {"?after=" + strconv.FormatInt(last-1, 10), "", last - 1},
		{"?after=" + strconv.FormatInt(last, 10), "", last}, {"?after=9000", "", 9000},
		{"?after=10", "4000", 4000}, {"", "-1", -1},
	} {
		t.Run(fmt.Sprintf("after=%d", c.after), func(t *testing.T) {
			req, _ := http.NewRequest("GET", b.ts.URL+"/v1/sessions/"+sid+"/events/export"+c.query, nil)
			if c.lastEventID != "" {
				req.Header.Set("Last-Event-ID", c.lastEventID)
			}
			resp, err := b.ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body bytes.Buffer
			if _, err := body.ReadFrom(resp.Body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" || resp.Header.Get(api.LastSequenceHeader) != strconv.FormatInt(last, 10) {
				t.Fatalf("%d %s %s=%s", resp.StatusCode, resp.Header.Get("Content-Type"), api.LastSequenceHeader, resp.Header.Get(api.LastSequenceHeader))
			}
			want := storedLines(t, b, sid, min(c.after, last))
			if !bytes.Equal(body.Bytes(), want) {
				t.Errorf("body: %d bytes, %d lines; want %d bytes, %d lines", body.Len(), bytes.Count(body.Bytes(), []byte{'\n'}), len(want), bytes.Count(want, []byte{'\n'}))
			}
			if c.lastEventID != "" {
				return // the client resumes with after
			}
			seq, got := c.after, []byte(nil)
			for ev, err := range b.cl.Export(context.Background(), sid, c.after) {
				if err != nil {
					t.Fatal(err)
				}
				if seq++; ev.Sequence != seq {
					t.Fatalf("client.Export: sequence %d, want %d", ev.Sequence, seq)
				}
				got = append(append(got, ev.Data...), '\n')
			}
			if !bytes.Equal(got, want) {
				t.Errorf("client.Export: %d bytes, want %d", len(got), len(want))
			}
		})
	}
	r := b.do(t, "GET", "/v1/sessions/S-empty/events/export", "", "")
	if r.status != 200 || r.body != "" || r.header.Get(api.LastSequenceHeader) != "-1" {
		t.Errorf("empty log: %d %q %s=%s", r.status, r.body, api.LastSequenceHeader, r.header.Get(api.LastSequenceHeader))
	}
	read := 0
	for _, err := range b.cl.Export(context.Background(), sid, -1) {
		if err != nil {
			t.Fatal(err)
		}
		if read++; read == 3 {
			break
		}
	}
	if read != 3 {
		t.Errorf("the loop broke after %d events, want 3", read)
	}
}

// TestExportEventsRefusals: the export is strict at the door as the other reads: an unknown or
// repeated parameter, an after or Last-Event-ID that is not a sequence, an unknown session;
// client.Export yields the server's error.
func TestExportEventsRefusals(t *testing.T) {
	b := setup(t, server.Options{})
	b.createSession(t, "S-x")
	for _, c := range []struct {
		path, lastEventID string
		status            int
		code              contract.ErrorCode
		says              string
	}{
		{"/v1/sessions/S-x/events/export?limit=10", "", 400, api.CodeMalformed, `unknown query parameter "limit"`},
		{"/v1/sessions/S-x/events/export?After=1", "", 400, api.CodeMalformed, "did you mean after?"},
		{"/v1/sessions/S-x/events/export?after=1&after=2", "", 400, api.CodeMalformed, "given 2 times"},
		{"/v1/sessions/S-x/events/export?after=-2", "", 400, api.CodeMalformed, `after="-2" must be an integer from -1`},
		{"/v1/sessions/S-x/events/export?after=x", "", 400, api.CodeMalformed, `after="x" must be an integer`},
		{"/v1/sessions/S-x/events/export?after=9007199254740992", "", 400, api.CodeMalformed, "to 9007199254740991"},
		{"/v1/sessions/S-x/events/export", "x", 400, api.CodeMalformed, `Last-Event-ID "x" must be a sequence number`},
		{"/v1/sessions/S-x/events/export", "-2", 400, api.CodeMalformed, "Last-Event-ID"},
		{"/v1/sessions/S-none/events/export", "", 404, api.CodeSessionNotFound, "S-none"},
	} {
		req, _ := http.NewRequest("GET", b.ts.URL+c.path, nil)
		if c.lastEventID != "" {
			req.Header.Set("Last-Event-ID", c.lastEventID)
		}
		resp, err := b.ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body bytes.Buffer
		body.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s (Last-Event-ID %q): %d, want %d: %s", c.path, c.lastEventID, resp.StatusCode, c.status, body.String())
			continue
		}
		if e := errorBody(t, body.String()); e.Code != c.code || !strings.Contains(e.Message, c.says) {
			t.Errorf("%s (Last-Event-ID %q): %s %q; want %s saying %q", c.path, c.lastEventID, e.Code, e.Message, c.code, c.says)
		}
	}
	for _, err := range b.cl.Export(context.Background(), "S-none", -1) {
		var ae *api.Error
		if err == nil || !errors.As(err, &ae) || ae.Code != api.CodeSessionNotFound {
			t.Errorf("client.Export of an unknown session: %v; want SESSION_NOT_FOUND", err)
		}
	}
}

// cutWriter passes the first n bytes of a body through, then ends the connection as a server
// whose store failed part way does (no final chunk).
type cutWriter struct {
	http.ResponseWriter
	left int
}

func (w *cutWriter) Write(p []byte) (int, error) {
	if len(p) > w.left {
		w.ResponseWriter.Write(p[:w.left])
		w.ResponseWriter.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}
	w.left -= len(p)
	return w.ResponseWriter.Write(p)
}

func (w *cutWriter) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

// TestExportEventsResumes: an export cut in the middle of a line (the connection ends without
// the chunked encoding's last chunk) is resumed by client.Export after the last whole event it
// yielded: every event once, in order, no gap.
func TestExportEventsResumes(t *testing.T) {
	b := setup(t, server.Options{})
	const sid, n = "S-cut", 5000
	b.createSession(t, sid)
	appendMany(t, b, sid, n)
	var cuts atomic.Int64
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/events/export") && cuts.Add(1) <= 2 {
			w = &cutWriter{ResponseWriter: w, left: 700_000 + 333} // inside the first chunk, mid-line
		}
		b.srv.ServeHTTP(w, r)
	}))
	defer front.Close()
	cl := client.New(front.URL, front.Client())
	want := storedLines(t, b, sid, -1)
	var got []byte
	seq := int64(-1)
	for ev, err := range cl.Export(context.Background(), sid, -1) {
		if err != nil {
			t.Fatal(err)
		}
		if seq++; ev.Sequence != seq {
			t.Fatalf("sequence %d, want %d", ev.Sequence, seq)
		}
		got = append(append(got, ev.Data...), '\n')
	}
	if cuts.Load() != 3 {
		t.Errorf("%d requests, want 3 (two cut, one whole)", cuts.Load())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%d bytes, %d lines; want %d bytes, %d lines", len(got), bytes.Count(got, []byte{'\n'}), len(want), bytes.Count(want, []byte{'\n'}))
	}
}
