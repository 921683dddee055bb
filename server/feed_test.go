package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/server"
	"github.com/sessiond/sessiond/store"
	"github.com/sessiond/sessiond/store/sqlite"
	"github.com/sessiond/sessiond/store/storetest"
)

const createInProject = `{"session_id":%q,"agent_id":%q,"project":%q,"role":"implementer","snapshot":{"mode":"work","modelId":"model-x","capabilities":{"tools":true}}}`

// createIn creates session id of agent in project.
func (b *bundle) createIn(t testing.TB, id, agent, project string) {
	t.Helper()
	if resp := b.do(t, "POST", "/v1/sessions", "application/json", fmt.Sprintf(createInProject, id, agent, project)); resp.status != http.StatusCreated {
		t.Fatalf("create session %s: %d %s", id, resp.status, resp.body)
	}
}

// nextChange reads the next change block within 10 s and checks its name against its data.
func nextChange(t testing.TB, s *sseReader) (int64, store.Change) {
	t.Helper()
	type res struct {
		e   sseEvent
		err error
	}
	ch := make(chan res, 1)
	go func() { e, err := s.nextEvent(); ch <- res{e, err} }()
	var r res
	select {
	case r = <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("no change within 10 s")
	}
	if r.err != nil {
		t.Fatalf("read the change feed: %v", r.err)
	}
	var c store.Change
	if err := json.Unmarshal([]byte(r.e.data), &c); err != nil {
		t.Fatalf("change data %s: %v", r.e.data, err)
	}
	id, err := strconv.ParseInt(r.e.id, 10, 64)
	if err != nil || id != c.Seq || r.e.event != "change."+c.Kind {
		t.Fatalf("block id %q event %q for change %+v: want id = seq and event change.<kind>", r.e.id, r.e.event, c)
	}
	return id, c
}

// expectChanges reads len(want) changes and compares "kind session status".
func expectChanges(t testing.TB, s *sseReader, want ...string) int64 {
	t.Helper()
	var last int64
	for i, w := range want {
		seq, c := nextChange(t, s)
		if got := c.Kind + " " + c.SessionID + " " + c.Status; got != w {
			t.Fatalf("change %d (seq %d) = %q, want %q", i, seq, got, w)
		}
		last = seq
	}
	return last
}

func TestChangeFeedLiveAndFilters(t *testing.T) {
	b := setup(t, server.Options{})
	b.createIn(t, "S-old", "agent-1", "p1") // before the streams open: not in a live feed
	all := openStream(t, b, "/v1/events/stream", nil)
	p1 := openStream(t, b, "/v1/events/stream?project=p1", nil)
	a2 := openStream(t, b, "/v1/events/stream?agent=agent-2", nil)
	both := openStream(t, b, "/v1/events/stream?project=p2&agent=agent-2", nil)
	b.createIn(t, "S-1", "agent-1", "p1")
	b.createIn(t, "S-2", "agent-2", "p2")
	b.createIn(t, "S-3", "agent-2", "p1")
	if resp := b.do(t, "PATCH", "/v1/sessions/S-2", "application/json", `{"status":"paused","updated_by_gate":"owner"}`); resp.status != 200 {
		t.Fatalf("patch: %d %s", resp.status, resp.body)
	}
	expectChanges(t, all, "session.created S-1 running", "session.created S-2 running", "session.created S-3 running", "session.status S-2 paused")
	expectChanges(t, p1, "session.created S-1 running", "session.created S-3 running")
	expectChanges(t, a2, "session.created S-2 running", "session.created S-3 running", "session.status S-2 paused")
	expectChanges(t, both, "session.created S-2 running", "session.status S-2 paused")

	// A replay from the start (Last-Event-ID: 0) reads the store, then goes on live.
	replay := openStream(t, b, "/v1/events/stream?project=p1", map[string]string{"Last-Event-ID": "0"})
	expectChanges(t, replay, "session.created S-old running", "session.created S-1 running", "session.created S-3 running")
	b.createIn(t, "S-4", "agent-9", "p1")
	expectChanges(t, replay, "session.created S-4 running")
}

func TestChangeFeedResumesAfterRestart(t *testing.T) {
	dir := t.TempDir()
	open := func() *bundle {
		st, err := sqlite.Open(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		srv := newServer(t, st, server.Options{})
		b := &bundle{st: st, srv: srv}
		b.ts = httptest.NewServer(srv)
		return b
	}
	b := open()
	for i := range 5 {
		b.createIn(t, fmt.Sprintf("S-%d", i), "agent-1", "p")
	}
	b.srv.Close()
	b.ts.Close()
	b.st.Close()

	b = open()
	t.Cleanup(func() { b.srv.Close(); b.ts.Close(); b.st.Close() })
	s := openStream(t, b, "/v1/events/stream", map[string]string{"Last-Event-ID": "2"})
	expectChanges(t, s, "session.created S-2 running", "session.created S-3 running", "session.created S-4 running")
	b.createIn(t, "S-new", "agent-1", "p")
	if seq := expectChanges(t, s, "session.created S-new running"); seq != 6 {
		t.Errorf("the first change after the restart has seq %d, want 6 (no gap, no reuse)", seq)
	}
}

func TestChangeFeedRejections(t *testing.T) {
	b := setup(t, server.Options{})
	b.createSession(t, "S-1")
	for _, tc := range []struct {
		name, path, lastEventID, want string
		// fix is the request that follows the error's hint; it must open a stream.
		fixPath, fixLastEventID string
	}{
		{"Last-Event-ID not a number", "/v1/events/stream", "abc", "must be a change sequence", "/v1/events/stream", "0"},
		{"Last-Event-ID negative", "/v1/events/stream", "-1", "must be a change sequence", "/v1/events/stream", "0"},
		{"Last-Event-ID after the end", "/v1/events/stream", "99", "after the last change of the feed (1)", "/v1/events/stream", "0"},
		{"after after the end", "/v1/events/stream?after=7", "", "after the last change", "/v1/events/stream?after=1", ""},
		{"empty project", "/v1/events/stream?project=", "", "query parameter project is empty", "/v1/events/stream", ""},
		{"empty agent", "/v1/events/stream?agent=", "", "query parameter agent is empty", "/v1/events/stream", ""},
		{"misspelt parameter", "/v1/events/stream?Project=p", "", "did you mean project?", "/v1/events/stream?project=p", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", b.ts.URL+tc.path, nil)
			if tc.lastEventID != "" {
				req.Header.Set("Last-Event-ID", tc.lastEventID)
			}
			resp, err := b.ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var body strings.Builder
			buf := make([]byte, 4096)
			n, _ := resp.Body.Read(buf)
			body.Write(buf[:n])
			resp.Body.Close()
			if resp.StatusCode != 400 {
				t.Fatalf("status %d, want 400: %s", resp.StatusCode, body.String())
			}
			if e := errorBody(t, body.String()); e.Code != api.CodeMalformed || !strings.Contains(e.Message, tc.want) {
				t.Errorf("error %+v, want MALFORMED_REQUEST saying %q", e, tc.want)
			}
			h := map[string]string{}
			if tc.fixLastEventID != "" {
				h["Last-Event-ID"] = tc.fixLastEventID
			}
			s := openStream(t, b, tc.fixPath, h)
			if tc.fixLastEventID == "0" {
				expectChanges(t, s, "session.created S-1 running")
			}
		})
	}
}

// TestChangeFeedBurst: changes committed faster than the subscribers take them (four writers
// at once, no pause) reach every subscriber in order, without a gap or a repeat, whether one
// wake-up carries one change or many.
func TestChangeFeedBurst(t *testing.T) {
	b := setup(t, server.Options{})
	const subs, sessions = 48, 240
	streams := make([]*sseReader, subs)
	for i := range streams {
		path := "/v1/events/stream"
		if i%2 == 1 {
			path += "?project=p1"
		}
		streams[i] = openStream(t, b, path, nil)
	}
	ctx := context.Background()
	errs := make(chan error, 4)
	for w := range 4 {
		go func() {
			for i := w; i < sessions; i += 4 {
				spec := storetest.SessionSpec{Project: fmt.Sprintf("p%d", i%2)}
				if err := b.st.CreateSession(ctx, storetest.NewSession(fmt.Sprintf("S-%d", i), spec)); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// Read each stream in turn: the others' blocks wait in their connections meanwhile.
	for i, s := range streams {
		want := sessions
		if i%2 == 1 {
			want = sessions / 2
		}
		last := int64(0)
		for range want {
			seq, c := nextChange(t, s)
			switch {
			case i%2 == 0 && seq != last+1:
				t.Fatalf("subscriber %d: change %d after %d, want %d", i, seq, last, last+1)
			case seq <= last:
				t.Fatalf("subscriber %d: change %d after %d", i, seq, last)
			case i%2 == 1 && c.Project != "p1":
				t.Fatalf("subscriber %d (project p1): change %+v", i, c)
			}
			last = seq
		}
	}
}

// TestChangeFeedAfterPause: the pump reads nothing while nobody follows the feed (feed.go).
// A subscriber that comes after such a pause gets every change after its cursor, in order and
// without a gap, across the changes made while nobody followed and the live ones after them;
// one without a cursor gets only the changes made after it connected.
func TestChangeFeedAfterPause(t *testing.T) {
	b := setup(t, server.Options{})
	for i := range 6 {
		b.createIn(t, fmt.Sprintf("S-%d", i), "agent-1", "p") // changes 1–6, nobody following
	}
	s := openStream(t, b, "/v1/events/stream", map[string]string{"Last-Event-ID": "3"})
	expectChanges(t, s, "session.created S-3 running", "session.created S-4 running", "session.created S-5 running")
	b.createIn(t, "S-6", "agent-1", "p")
	if seq := expectChanges(t, s, "session.created S-6 running"); seq != 7 {
		t.Fatalf("the live change after the paused ones has seq %d, want 7", seq)
	}
	s.resp.Body.Close()

	for i := 7; i < 12; i++ {
		b.createIn(t, fmt.Sprintf("S-%d", i), "agent-1", "p") // a second pause, once the stream has gone
	}
	now := openStream(t, b, "/v1/events/stream", nil)
	from := openStream(t, b, "/v1/events/stream", map[string]string{"Last-Event-ID": "7"})
	b.createIn(t, "S-12", "agent-1", "p")
	if seq := expectChanges(t, now, "session.created S-12 running"); seq != 13 {
		t.Fatalf("a subscriber without a cursor got change %d first, want 13 (made after it connected)", seq)
	}
	want := make([]string, 0, 6)
	for i := 7; i <= 12; i++ {
		want = append(want, fmt.Sprintf("session.created S-%d running", i))
	}
	if seq := expectChanges(t, from, want...); seq != 13 {
		t.Fatalf("resumed after 7: last change %d, want 13", seq)
	}
}

// TestChangeFeedSubscribersComeAndGo: while sessions are created without a stop, subscribers
// connect one after another (so that the pump pauses between them and starts a new ring for
// each), each resuming from the last change the one before it read minus a few, and each
// must read a gap-free run of changes from its cursor: no change lost or repeated at the seam
// between the store and the ring, whenever the pause and the reset fall.
func TestChangeFeedSubscribersComeAndGo(t *testing.T) {
	b := setup(t, server.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			if ctx.Err() != nil {
				done <- nil
				return
			}
			if err := b.st.CreateSession(context.Background(), storetest.NewSession(fmt.Sprintf("S-%d", i), storetest.SessionSpec{})); err != nil {
				done <- err
				return
			}
			time.Sleep(200 * time.Microsecond) // a steady stream of changes, not a busy core
		}
	}()
	cursor := int64(0)
	for round := range 30 {
		s := openStream(t, b, "/v1/events/stream", map[string]string{"Last-Event-ID": strconv.FormatInt(cursor, 10)})
		last := cursor
		for range 20 + round%7 {
			seq, _ := nextChange(t, s)
			if seq != last+1 {
				t.Fatalf("round %d, resumed after %d: change %d after %d, want %d", round, cursor, seq, last, last+1)
			}
			last = seq
		}
		s.resp.Body.Close()
		cursor = max(last-int64(round%5), 0)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// readCounting is a SQLite store that counts the reads of its change feed.
type readCounting struct {
	*sqlite.Store
	reads atomic.Int64
}

func (s *readCounting) ReadChanges(ctx context.Context, after int64, f store.ChangeFilter, limit int) ([]store.Change, error) {
	s.reads.Add(1)
	return s.Store.ReadChanges(ctx, after, f, limit)
}

// TestChangeFeedPumpPauses: with nobody following the feed the pump reads nothing, however
// many changes are made; and a subscriber that resumes after such a pause, with no change made
// after it connects, gets the changes made during the pause (its connecting wakes the pump,
// which replaces the ring it had stopped keeping up: nothing else would).
func TestChangeFeedPumpPauses(t *testing.T) {
	st, err := sqlite.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rc := &readCounting{Store: st}
	srv := newServer(t, rc, server.Options{})
	b := &bundle{st: st, srv: srv, ts: httptest.NewServer(srv)}
	t.Cleanup(func() { srv.Close(); b.ts.Close(); st.Close() })

	s := openStream(t, b, "/v1/events/stream", nil)
	b.createIn(t, "S-first", "agent-1", "p")
	expectChanges(t, s, "session.created S-first running")
	s.resp.Body.Close()
	// Once the server has seen the stream go, a change no longer makes the pump read.
	for i := 0; ; i++ {
		n := rc.reads.Load()
		b.createIn(t, fmt.Sprintf("S-probe-%d", i), "agent-1", "p")
		time.Sleep(50 * time.Millisecond)
		if rc.reads.Load() == n {
			break
		}
		if i == 100 {
			t.Fatal("the pump still reads the store 5 s after the only stream has gone")
		}
	}
	from, err := st.LastChange(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := rc.reads.Load()
	want := make([]string, 0, 20)
	for i := range 20 {
		b.createIn(t, fmt.Sprintf("S-%d", i), "agent-1", "p")
		want = append(want, fmt.Sprintf("session.created S-%d running", i))
	}
	time.Sleep(100 * time.Millisecond)
	if got := rc.reads.Load() - n; got != 0 {
		t.Fatalf("with nobody following, 20 changes made the pump read the store %d times, want 0", got)
	}
	s = openStream(t, b, "/v1/events/stream", map[string]string{"Last-Event-ID": strconv.FormatInt(from, 10)})
	if last := expectChanges(t, s, want...); last != from+20 {
		t.Fatalf("resumed after %d: last change %d, want %d", from, last, from+20)
	}
}
