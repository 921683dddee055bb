package server_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/client"
	"github.com/sessiond/sessiond/server"
)

// sseEvent is one dispatched SSE block.
type sseEvent struct {
	id    string
	event string
	data  string
}

// sseReader reads raw SSE blocks from a response, so tests see exactly what the server sends.
type sseReader struct {
	t    testing.TB
	resp *http.Response
	r    *bufio.Reader
	// raw: the blocks are not checked against api/openapi.json (the bridges' streams, which
	// it does not describe block by block).
	raw bool
}

func openStream(t testing.TB, b *bundle, path string, header map[string]string) *sseReader {
	t.Helper()
	req, _ := http.NewRequest("GET", b.ts.URL+path, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := b.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("stream %s: status %d", path, resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return &sseReader{t: t, resp: resp, r: bufio.NewReaderSize(resp.Body, 1<<20)}
}

// next returns the next block that carries data or an id (comments and retry lines skipped).
func (s *sseReader) next() (sseEvent, error) {
	var e sseEvent
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return e, err
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if e.id != "" || e.data != "" {
				if msg := checkStreamBlock(s.t, e); msg != "" && !s.raw {
					s.t.Errorf("stream block %+v: %s", e, msg)
				}
				return e, nil
			}
		case strings.HasPrefix(line, "id: "):
			e.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			e.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			e.data = line[6:]
		}
	}
}

// nextEvent skips id-only blocks (the opening cursor) and returns the next event with data.
func (s *sseReader) nextEvent() (sseEvent, error) {
	for {
		e, err := s.next()
		if err != nil || e.data != "" {
			return e, err
		}
	}
}

func (b *bundle) appendN(t testing.TB, sid string, from, n int) {
	t.Helper()
	var sb strings.Builder
	for i := from; i < from+n; i++ {
		sb.WriteString(event(sid, i))
		sb.WriteByte('\n')
	}
	if resp := b.do(t, "POST", "/v1/sessions/"+sid+"/events", "application/x-ndjson", sb.String()); resp.status >= 300 {
		t.Fatalf("append: %d %s", resp.status, resp.body)
	}
}

func TestStreamReplayThenLive(t *testing.T) {
	b := setup(t, server.Options{})
	b.createSession(t, "S-s")
	b.appendN(t, "S-s", 0, 5)
	s := openStream(t, b, "/v1/sessions/S-s/events/stream", nil)
	first, err := s.next()
	if err != nil || first.id != "-1" || first.data != "" {
		t.Fatalf("opening block %+v %v, want the starting cursor -1", first, err)
	}
	for i := 0; i < 5; i++ {
		e, err := s.nextEvent()
		if err != nil {
			t.Fatal(err)
		}
		if e.id != strconv.Itoa(i) || e.event != "ev.message" || !strings.Contains(e.data, fmt.Sprintf(`"sequence":%d`, i)) {
			t.Fatalf("event %d: %+v", i, e)
		}
	}
	b.appendN(t, "S-s", 5, 3)
	for i := 5; i < 8; i++ {
		e, err := s.nextEvent()
		if err != nil || e.id != strconv.Itoa(i) {
			t.Fatalf("live event %d: %+v %v", i, e, err)
		}
	}
}

func TestStreamStartingPoints(t *testing.T) {
	b := setup(t, server.Options{})
	b.createSession(t, "S-sp")
	b.appendN(t, "S-sp", 0, 10)
	tests := []struct {
		name   string
		path   string
		header map[string]string
		first  string
	}{
		{"Last-Event-ID", "/v1/sessions/S-sp/events/stream?after=1", map[string]string{"Last-Event-ID": "6"}, "7"},
		{"after", "/v1/sessions/S-sp/events/stream?after=3", nil, "4"},
		{"tail", "/v1/sessions/S-sp/events/stream?tail=true", nil, "10"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openStream(t, b, tc.path, tc.header)
			if tc.name == "tail" {
				if e, _ := s.next(); e.id != "9" {
					t.Fatalf("tail opening cursor %q, want 9", e.id)
				}
				b.appendN(t, "S-sp", 10, 1)
			}
			e, err := s.nextEvent()
			if err != nil || e.id != tc.first {
				t.Fatalf("first event id %q (%v), want %s", e.id, err, tc.first)
			}
		})
	}
	for _, path := range []string{"/v1/sessions/S-sp/events/stream?after=x", "/v1/sessions/S-none/events/stream"} {
		if resp := b.do(t, "GET", path, "", ""); resp.status < 400 {
			t.Errorf("%s: %d", path, resp.status)
		}
	}
}

// TestStreamNoGapUnderConcurrentWrites follows a session with the Go client while four writers
// append, drops the connection several times, and checks every event arrives once, in order.
func TestStreamNoGapUnderConcurrentWrites(t *testing.T) {
	b := setup(t, server.Options{})
	b.createSession(t, "S-c")
	const writers, perWriter, batch = 4, 150, 5
	total := writers * perWriter
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < perWriter; i += batch {
				b.appendN(t, "S-c", w*perWriter+i, batch)
			}
		}(w)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []int64
	reconnects := 0
	// A transport whose connections the test closes now and then, to force resumes.
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
		return c, err
	}}
	cl := client.New(b.ts.URL, &http.Client{Transport: tr})
	err := cl.Stream(ctx, "S-c", client.StreamOptions{After: -1, MaxBackoff: 10 * time.Millisecond,
		OnReconnect: func(int64, error) { reconnects++ }},
		func(e client.StreamEvent) error {
			got = append(got, e.Sequence)
			if len(got)%97 == 0 {
				mu.Lock()
				conns[len(conns)-1].Close()
				mu.Unlock()
			}
			if len(got) == total {
				return errDone
			}
			return nil
		})
	wg.Wait()
	if !errors.Is(err, errDone) {
		t.Fatalf("stream ended with %v after %d events", err, len(got))
	}
	for i, seq := range got {
		if seq != int64(i) {
			t.Fatalf("event %d has sequence %d: gap or repeat (reconnects %d)", i, seq, reconnects)
		}
	}
	if reconnects == 0 {
		t.Error("the test never forced a reconnect")
	}
}

var errDone = errors.New("done")

func TestStreamCutsOffSlowSubscriber(t *testing.T) {
	b := setup(t, server.Options{MaxLag: 20, RingSize: 8192})
	b.createSession(t, "S-slow")
	s := openStream(t, b, "/v1/sessions/S-slow/events/stream?tail=true", nil)
	if _, err := s.next(); err != nil {
		t.Fatal(err)
	}
	// Bursts far bigger than MaxLag: once the subscriber has been at the head, it is cut off
	// with a final message instead of holding anything up.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 20; i++ {
			time.Sleep(20 * time.Millisecond)
			b.appendN(t, "S-slow", i*1000, 1000)
		}
	}()
	var last int64 = -1
	for {
		e, err := s.nextEvent()
		if err != nil {
			t.Fatalf("stream ended without a final message: %v (last %d)", err, last)
		}
		if e.event == "stream.error" {
			if !strings.Contains(e.data, "SUBSCRIBER_TOO_SLOW") || !strings.Contains(e.data, fmt.Sprintf("Last-Event-ID: %d", last)) {
				t.Fatalf("final message %s does not say how to resume from %d", e.data, last)
			}
			break
		}
		seq, _ := strconv.ParseInt(e.id, 10, 64)
		if seq != last+1 {
			t.Fatalf("gap: %d after %d", seq, last)
		}
		last = seq
	}
	<-done
	if n := metricValue(t, b.srv.Metrics(), "sessiond_sse_stream_ends_total", "reason", "SUBSCRIBER_TOO_SLOW"); n != 1 {
		t.Errorf("sessiond_sse_stream_ends_total{reason=SUBSCRIBER_TOO_SLOW} = %v, want 1", n)
	}
}

func TestStreamEndsOnShutdown(t *testing.T) {
	b := setup(t, server.Options{})
	b.createSession(t, "S-down")
	s := openStream(t, b, "/v1/sessions/S-down/events/stream", nil)
	if _, err := s.next(); err != nil {
		t.Fatal(err)
	}
	b.srv.Close()
	e, err := s.nextEvent()
	if err != nil || e.event != "stream.error" || !strings.Contains(e.data, "SHUTTING_DOWN") {
		t.Fatalf("got %+v %v, want a SHUTTING_DOWN final message", e, err)
	}
	if _, err := s.next(); err == nil {
		t.Error("stream still open after shutdown")
	}
	if resp := b.do(t, "GET", "/v1/sessions", "", ""); resp.status != http.StatusServiceUnavailable {
		t.Errorf("request after Close: %d", resp.status)
	}
}

// TestShutdownDuringReplay: a stream still replaying a long history ends promptly with
// SHUTTING_DOWN when the server closes, without first sending the whole history.
func TestShutdownDuringReplay(t *testing.T) {
	b := setup(t, server.Options{})
	b.createSession(t, "S-long")
	const total = 40000
	for i := 0; i < total; i += 1000 {
		b.appendN(t, "S-long", i, 1000)
	}
	s := openStream(t, b, "/v1/sessions/S-long/events/stream", nil)
	if _, err := s.nextEvent(); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() { b.srv.Close(); close(closed) }()
	n := 1
	for {
		e, err := s.nextEvent()
		if err != nil {
			t.Fatalf("stream ended without a final message after %d events: %v", n, err)
		}
		if e.event == "stream.error" {
			if !strings.Contains(e.data, "SHUTTING_DOWN") {
				t.Fatalf("final message %s", e.data)
			}
			break
		}
		n++
	}
	if n >= total {
		t.Errorf("the whole history (%d events) was sent before the stream ended", n)
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
}
