package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// The change feed across sessions: GET /v1/events/stream (docs/api.md, "The change feed").
//
// The store records every session-level change with a global, gap-free sequence in the
// transaction of the write (store/changes.go) and reports new ones through SubscribeChanges
// (on PostgreSQL, those of every instance). One pump goroutine per server reads the new changes
// once, encodes each as an SSE block and publishes an immutable ring of the recent ones; each
// subscriber keeps a cursor (the last change sequence it has passed) and takes the blocks after
// it from the ring, skipping those its filter does not match, or reads from the store when its
// cursor is older than the ring (a resume, a slow reader). The cursor only moves over changes
// that were sent or skipped by the filter, and every change in the ring was read from the store
// in order after the one before it, so there is neither gap nor repeat at the seam.
//
// The feed reads the store directly rather than through the session service, as the stream hub
// does: it is transport for changes already committed.
//
// The pump reads only while someone follows the feed (reading and encoding every change, for a
// ring nobody read, was 8.5% of the server's CPU in an import). A pass of the pump that finds
// nobody counted reads nothing and leaves the ring as it is: paused. The next pass that finds
// someone counted starts a new, empty ring at the store's last change (reset), then reads on
// as usual. A subscriber counts itself and wakes the pump (follow) before it first waits for
// a view to change, so it is never left waiting on a ring the pump no longer keeps up: the
// pass its wake-up causes resets, and a reset always publishes a new view. Whatever view a
// subscriber holds, its entries are changes in order, so serving from a ring that is about to
// be replaced is still right; and a cursor below the new ring's base (the changes made during
// the pause) is served from the store, as any subscriber behind the ring always was. The store
// read of such a cursor ends at a head at least the new base (see handleChangeStream), so
// there is no gap between the two.

// changeEventPrefix goes before a change's kind to name its SSE block ("change.session.created").
// Per-session streams name theirs api.SSEEventPrefix + eventType ("ev.…"): the two never clash.
const changeEventPrefix = "change."

// feedRing is how many recent changes the pump keeps encoded (default).
const feedRing = 4096

// feedEntry is one change of the ring, encoded.
type feedEntry struct {
	seq            int64
	project, agent string
	block          []byte
}

// feedView is one published state of the ring. It never changes after it is stored.
type feedView struct {
	ready   bool        // the pump knows the store's position; until then readers use the store
	base    int64       // the sequence before entries[0]
	entries []feedEntry // base+1, base+2, ...
	// changed is closed when a newer view replaces this one.
	changed chan struct{}
}

// head is the last change sequence the view knows.
func (v *feedView) head() int64 { return v.base + int64(len(v.entries)) }

// feed is the pump and its ring.
type feed struct {
	st   store.ChangeFeed
	ring int
	log  interface{ Warn(string, ...any) }
	view atomic.Pointer[feedView]
	kick chan struct{}
	stop func() // unsubscribes
	done chan struct{}
	ctx  context.Context
	end  context.CancelFunc
	once sync.Once

	// subscribers counts the requests for the feed from follow to unfollow: the streams being
	// served, and for a moment a request that is then refused (a bad cursor).
	subscribers atomic.Int64
	// paused is the pump's own: a pass found nobody counted and read nothing, so the ring has
	// not been kept up since (reset). It starts true: the first ring is made by reset.
	paused bool
}

func newFeed(st store.ChangeFeed, ring int, log interface{ Warn(string, ...any) }) *feed {
	f := &feed{st: st, ring: ring, log: log, kick: make(chan struct{}, 1), done: make(chan struct{}), paused: true}
	f.view.Store(&feedView{changed: make(chan struct{})})
	f.ctx, f.end = context.WithCancel(context.Background())
	f.stop = st.SubscribeChanges(func(int64) { f.wake() })
	f.wake()
	go f.pump()
	return f
}

// wake asks the pump to read; it never blocks.
func (f *feed) wake() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// close stops the pump and waits for it.
func (f *feed) close() {
	f.once.Do(func() {
		f.stop()
		f.end()
		<-f.done
	})
}

// pump, on each report of new changes and each wake-up (follow), reads the changes after the
// ring's head and publishes them, while someone follows the feed; with nobody counted it
// reads nothing and pauses (reset). A failed read is retried on the next report, or after a
// second.
func (f *feed) pump() {
	defer close(f.done)
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	for {
		select {
		case <-f.ctx.Done():
			return
		case <-f.kick:
		case <-retry.C:
		}
		if f.subscribers.Load() == 0 {
			f.paused = true
			continue
		}
		err := f.reset()
		if err == nil {
			err = f.catchUp()
		}
		if err != nil {
			if f.ctx.Err() != nil {
				return
			}
			f.log.Warn("change feed: reading the store failed; retrying", "err", err)
			retry.Reset(time.Second)
		}
	}
}

// follow counts a subscriber of the feed until the returned function is called, and wakes
// the pump, which may have paused while nobody followed. A subscriber must call it before it
// first waits for a view to change (feedView.changed): the pass of the pump it causes then
// publishes a new view.
func (f *feed) follow() (unfollow func()) {
	f.subscribers.Add(1)
	f.wake()
	return func() { f.subscribers.Add(-1) }
}

// reset, after a pause (and to make the first ring), publishes a new, empty ring whose base is
// the store's last change: the changes the pump did not read while nobody followed are left to
// the store, from which a subscriber whose cursor is older than the ring reads them.
func (f *feed) reset() error {
	if !f.paused {
		return nil
	}
	last, err := f.st.LastChange(f.ctx)
	if err != nil {
		return err
	}
	f.publish(f.view.Load(), &feedView{ready: true, base: last})
	f.paused = false
	return nil
}

// catchUp reads and publishes every change after the ring's head.
func (f *feed) catchUp() error {
	for {
		old := f.view.Load()
		cs, err := f.st.ReadChanges(f.ctx, old.head(), store.ChangeFilter{}, store.MaxChangesPage)
		if err != nil {
			return err
		}
		if len(cs) == 0 {
			return nil
		}
		entries := old.entries
		for i := range cs {
			c := &cs[i]
			if c.Seq != old.head()+int64(len(entries)-len(old.entries))+1 {
				return fmt.Errorf("the store returned change %d after %d", c.Seq, old.head()+int64(len(entries)-len(old.entries)))
			}
			entries = append(entries, feedEntry{seq: c.Seq, project: c.Project, agent: c.AgentID, block: appendChangeSSE(nil, c)})
		}
		nv := &feedView{ready: true, base: old.base, entries: entries}
		if over := len(entries) - f.ring; over > 0 {
			// Drop the oldest quarter at once (amortised), into a new array: older views
			// still point into the current one.
			drop := min(over+f.ring/4, len(entries))
			nv.entries = append(make([]feedEntry, 0, f.ring), entries[drop:]...)
			nv.base += int64(drop)
		}
		f.publish(old, nv)
		if len(cs) < store.MaxChangesPage {
			return nil
		}
	}
}

// publish replaces old by nv and wakes the subscribers. Only the pump publishes.
func (f *feed) publish(old, nv *feedView) {
	nv.changed = make(chan struct{})
	f.view.Store(nv)
	close(old.changed)
}

// appendChangeSSE appends the SSE block of a change.
func appendChangeSSE(buf []byte, c *store.Change) []byte {
	data, err := json.Marshal(c)
	if err != nil {
		panic(fmt.Sprintf("encode change %d: %v", c.Seq, err)) // a Change always encodes
	}
	buf = append(buf, "id: "...)
	buf = strconv.AppendInt(buf, c.Seq, 10)
	buf = append(buf, "\nevent: "+changeEventPrefix...)
	buf = append(buf, c.Kind...)
	buf = append(buf, "\ndata: "...)
	buf = append(buf, data...)
	return append(buf, "\n\n"...)
}

// feedFilter reads the project and agent query parameters.
func feedFilter(r *http.Request) (store.ChangeFilter, *api.Error) {
	q := r.URL.Query()
	f := store.ChangeFilter{Project: q.Get("project"), AgentID: q.Get("agent")}
	for _, p := range []struct{ name, val, what string }{{"project", f.Project, "a project"}, {"agent", f.AgentID, "an agent id"}} {
		if q.Has(p.name) && p.val == "" {
			return f, api.Errorf(contract.CodeMalformed, "query parameter %s is empty; give %s to follow only its sessions, or leave the parameter out to follow every session", p.name, p.what)
		}
	}
	var aerr *api.Error
	f.Project, aerr = projectFilter(r, f.Project)
	return f, aerr
}

// handleChangeStream serves GET /v1/events/stream: the change feed as Server-Sent Events.
func (s *Server) handleChangeStream(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	f, aerr := feedFilter(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	defer s.feed.follow()() // before the stream first waits for the view to change (feed.follow)
	last, err := s.feed.st.LastChange(ctx)
	if err != nil {
		writeError(w, apiError(err, ""))
		return
	}
	cursor := last // by default, the changes from now on
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, api.Errorf(contract.CodeMalformed, "Last-Event-ID %s must be a change sequence (an integer >= 0; 0 replays the feed from its start)", quote(v)))
			return
		}
		cursor = n
	} else if r.URL.Query().Has("after") {
		n, aerr := queryInt(r, "after", 0, 0, contract.MaxSafeInteger)
		if aerr != nil {
			writeError(w, aerr)
			return
		}
		cursor = n
	}
	if cursor > last {
		writeError(w, api.Errorf(contract.CodeMalformed, "change %d is after the last change of the feed (%d); resume with a sequence this feed sent, or 0 to replay it from its start", cursor, last))
		return
	}

	sw, ok := s.openSSE(w, r, cursor)
	defer sw.end()
	if !ok {
		return
	}
	s.follow(ctx, sw, &feedTail{f: s.feed, filter: f, cursor: cursor})
}

// feedTail is the source of GET /v1/events/stream: the changes after a cursor that a filter
// matches, as SSE blocks.
type feedTail struct {
	f      *feed
	filter store.ChangeFilter
	cursor int64
	buf    []byte
}

func (t *feedTail) position() int64 { return t.cursor }

func (t *feedTail) next(ctx context.Context) (tailStep, error) {
	f := t.filter
	filtered := f != store.ChangeFilter{}
	v := t.f.view.Load()
	t.buf = t.buf[:0]
	more := false // a full page was read from the store: read on without waiting
	if v.ready && t.cursor >= v.base {
		// From the ring: the entries after cursor, those the filter matches.
		if t.cursor < v.head() { // a cursor after the head is a change the pump has yet to read
			for _, e := range v.entries[t.cursor-v.base:] {
				if !filtered || ((f.Project == "" || e.project == f.Project) && (f.AgentID == "" || e.agent == f.AgentID)) {
					t.buf = append(t.buf, e.block...)
				}
			}
		}
		t.cursor = max(t.cursor, v.head())
	} else {
		// Older than the ring: from the store, a page at a time. A short page means the
		// store has no more matching change up to a head at least v's (read before).
		cs, err := t.f.st.ReadChanges(ctx, t.cursor, f, store.MaxChangesPage)
		if err != nil {
			return tailStep{}, fmt.Errorf("reading the change feed failed: %v; reconnect with Last-Event-ID: %d", err, t.cursor)
		}
		for i := range cs {
			t.buf = appendChangeSSE(t.buf, &cs[i])
			t.cursor = cs[i].Seq
		}
		more = len(cs) == store.MaxChangesPage
		if !more && v.ready {
			t.cursor = max(t.cursor, v.head())
		}
	}
	return tailStep{out: t.buf, more: more || t.cursor < t.f.view.Load().head(), changed: v.changed}, nil
}
