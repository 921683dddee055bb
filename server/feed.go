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
// Publishing and ringing. Each change is its own commit, and a delivery costs about the same
// CPU whether its write carries one change or ten (the write's syscall and the loopback or
// network stack are most of it), so waking every subscriber for every change makes the
// fan-out's CPU grow with the change rate: at 200 changes/s, 1,000 subscribers were 200,000
// writes/s, more than two cores, and latency grew until the machine caught up. So publishing
// a view and waking the subscribers are two steps. The pump publishes each view as soon as it
// has read it: a subscriber that runs later takes everything up to the newest view. It wakes
// the subscribers that wait (rings the bell) once those it woke last have all taken a view and
// wait again (the sweep is over), or feedSweepWait after the first view not rung for: a
// subscriber is woken once per sweep, however many changes came during it, and writes them
// all at once. When changes come further apart than a sweep lasts, every one is rung for at
// once, as before.

// changeEventPrefix goes before a change's kind to name its SSE block ("change.session.created").
// Per-session streams name theirs api.SSEEventPrefix + eventType ("ev.…"): the two never clash.
const changeEventPrefix = "change."

// feedRing is how many recent changes the pump keeps encoded (default).
const feedRing = 4096

// feedSweepWait bounds how long a published view waits to be rung for while the subscribers
// woken last are still taking theirs (a subscriber stuck on a slow client, or gone, does not
// hold the others back longer than this).
const feedSweepWait = 20 * time.Millisecond

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
}

// feedBell is what the subscribers at the feed's head wait on. The pump rings it (closes rung)
// and puts a new one in its place.
type feedBell struct {
	rung chan struct{}
	// sweep is how many subscribers waited on the previous bell when it rang: this ring woke
	// them. parked counts the subscribers that wait on this bell (one woken by a keep-alive
	// counts again). The sweep is over when parked reaches swept().
	sweep  int64
	parked atomic.Int64
}

// swept is the count of waiting subscribers at which the sweep of the ring before this bell
// is over: all those it woke, but for one in 64 (a straggler takes what it missed when it
// runs, as every subscriber takes all up to the newest view).
func (b *feedBell) swept() int64 { return b.sweep - b.sweep/64 }

// head is the last change sequence the view knows.
func (v *feedView) head() int64 { return v.base + int64(len(v.entries)) }

// feed is the pump and its ring.
type feed struct {
	st   store.ChangeFeed
	ring int
	log  interface{ Warn(string, ...any) }
	view atomic.Pointer[feedView]
	bell atomic.Pointer[feedBell]
	kick chan struct{}
	// sweptC is signalled when a sweep is over (feedBell.parked).
	sweptC chan struct{}
	stop   func() // unsubscribes
	done   chan struct{}
	ctx    context.Context
	end    context.CancelFunc
	once   sync.Once
}

func newFeed(st store.ChangeFeed, ring int, log interface{ Warn(string, ...any) }) *feed {
	f := &feed{st: st, ring: ring, log: log, kick: make(chan struct{}, 1), sweptC: make(chan struct{}, 1), done: make(chan struct{})}
	f.view.Store(&feedView{})
	f.bell.Store(&feedBell{rung: make(chan struct{})})
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

// park records that a subscriber waits on bell b; the one that ends the sweep tells the pump.
func (f *feed) park(b *feedBell) {
	if b.parked.Add(1) == b.swept() {
		select {
		case f.sweptC <- struct{}{}:
		default:
		}
	}
}

// ringBell wakes the subscribers waiting on the bell. Only the pump rings.
func (f *feed) ringBell() {
	old := f.bell.Load()
	f.bell.Store(&feedBell{rung: make(chan struct{}), sweep: old.parked.Load()})
	close(old.rung)
}

// close stops the pump and waits for it.
func (f *feed) close() {
	f.once.Do(func() {
		f.stop()
		f.end()
		<-f.done
	})
}

// pump reads and publishes the changes after the ring's head whenever the store reports some,
// and rings for them once the sweep under way is over (see "Publishing and ringing"). A
// failed read is retried on the next report, or after a second.
func (f *feed) pump() {
	defer close(f.done)
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	due := time.NewTimer(time.Hour) // the latest time to ring for what was published
	due.Stop()
	unrung := false // a view was published since the last ring
	armed := false  // due is set
	for {
		force := false
		select {
		case <-f.ctx.Done():
			return
		case <-f.kick:
			unrung = f.read(retry) || unrung
		case <-retry.C:
			unrung = f.read(retry) || unrung
		case <-f.sweptC:
		case <-due.C:
			armed, force = false, true
		}
		if !unrung {
			continue
		}
		if b := f.bell.Load(); force || b.parked.Load() >= b.swept() {
			f.ringBell()
			unrung = false
			if armed {
				due.Stop()
				armed = false
			}
		} else if !armed {
			// A sweep is under way: ring when it is over, or when due.
			due.Reset(feedSweepWait)
			armed = true
		}
	}
}

// read publishes the changes after the ring's head, reporting whether it published a view.
// On failure it logs and arms retry.
func (f *feed) read(retry *time.Timer) bool {
	published, err := f.catchUp()
	if err != nil && f.ctx.Err() == nil {
		f.log.Warn("change feed: reading the store failed; retrying", "err", err)
		retry.Reset(time.Second)
	}
	return published
}

// catchUp reads and publishes every change after the ring's head; published reports whether it
// published a view (also when it then failed).
func (f *feed) catchUp() (published bool, err error) {
	old := f.view.Load()
	if !old.ready {
		last, err := f.st.LastChange(f.ctx)
		if err != nil {
			return false, err
		}
		f.view.Store(&feedView{ready: true, base: last})
		published = true
	}
	for {
		old = f.view.Load()
		cs, err := f.st.ReadChanges(f.ctx, old.head(), store.ChangeFilter{}, store.MaxChangesPage)
		if err != nil {
			return published, err
		}
		if len(cs) == 0 {
			return published, nil
		}
		entries := old.entries
		for i := range cs {
			c := &cs[i]
			if c.Seq != old.head()+int64(len(entries)-len(old.entries))+1 {
				return published, fmt.Errorf("the store returned change %d after %d", c.Seq, old.head()+int64(len(entries)-len(old.entries)))
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
		// Only the pump stores views; the bell wakes the subscribers (pump).
		f.view.Store(nv)
		published = true
		if len(cs) < store.MaxChangesPage {
			return published, nil
		}
	}
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
			return f, api.Errorf(api.CodeMalformed, "query parameter %s is empty; give %s to follow only its sessions, or leave the parameter out to follow every session", p.name, p.what)
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
	last, err := s.feed.st.LastChange(ctx)
	if err != nil {
		writeError(w, storeError(err, ""))
		return
	}
	cursor := last // by default, the changes from now on
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, api.Errorf(api.CodeMalformed, "Last-Event-ID %q must be a change sequence (an integer >= 0; 0 replays the feed from its start)", v))
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
		writeError(w, api.Errorf(api.CodeMalformed, "change %d is after the last change of the feed (%d); resume with a sequence this feed sent, or 0 to replay it from its start", cursor, last))
		return
	}

	sw, ok := s.openSSE(w, r, cursor)
	defer sw.end()
	if !ok {
		return
	}
	keepAlive := time.NewTicker(s.opt.KeepAlive)
	defer keepAlive.Stop()
	filtered := f != store.ChangeFilter{}
	var buf []byte
	for {
		// The bell before the view: a view published after this load is rung for on this bell
		// or a later one (this one is then rung already).
		bell := s.feed.bell.Load()
		v := s.feed.view.Load()
		buf = buf[:0]
		more := false // a full page was read from the store: read on without waiting
		if v.ready && cursor >= v.base {
			// From the ring: the entries after cursor, those the filter matches.
			if cursor < v.head() { // a cursor after the head is a change the pump has yet to read
				for _, e := range v.entries[cursor-v.base:] {
					if !filtered || ((f.Project == "" || e.project == f.Project) && (f.AgentID == "" || e.agent == f.AgentID)) {
						buf = append(buf, e.block...)
					}
				}
			}
			cursor = max(cursor, v.head())
		} else {
			// Older than the ring: from the store, a page at a time. A short page means the
			// store has no more matching change up to a head at least v's (read before).
			cs, err := s.feed.st.ReadChanges(ctx, cursor, f, store.MaxChangesPage)
			if err != nil {
				if ctx.Err() == nil {
					sw.finalMessage(contract.CodeStreamFailed, fmt.Sprintf("reading the change feed failed: %v; reconnect with Last-Event-ID: %d", err, cursor))
				}
				return
			}
			for i := range cs {
				buf = appendChangeSSE(buf, &cs[i])
				cursor = cs[i].Seq
			}
			more = len(cs) == store.MaxChangesPage
			if !more && v.ready {
				cursor = max(cursor, v.head())
			}
		}
		if len(buf) > 0 {
			select {
			case <-s.shutdown:
				sw.finalMessage(contract.CodeShuttingDown, fmt.Sprintf("the server is shutting down; reconnect with Last-Event-ID: %d", cursor))
				return
			case <-sw.gone:
				return
			default:
			}
			if !sw.flush(buf) {
				return
			}
		}
		if more || cursor < s.feed.view.Load().head() {
			continue
		}
		s.feed.park(bell)
		if !s.await(ctx, sw, bell.rung, keepAlive.C, cursor) {
			return
		}
	}
}
