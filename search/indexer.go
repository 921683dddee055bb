package search

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sessiond/sessiond/store"
)

// IndexerOptions configure an [Indexer]. Zero fields take the defaults documented on each.
type IndexerOptions struct {
	// MinInterval is the least time between two passes woken by commits (default 50ms): under
	// a stream of appends the indexer takes them in batches, at most one pass per interval.
	MinInterval time.Duration
	// Rescan is the longest time between two passes (default 2s): what no commit reports
	// (compaction, restore, imports, another instance's appends on a shared store missed) is
	// found by the pass's comparison of every session's log with the index.
	Rescan time.Duration
	// BatchEvents is the most events of one session read at once (default 1000).
	BatchEvents int
	// GroupEvents is about how many events one index transaction takes, across sessions
	// (default 4096): a commit of the index costs about as much for one event as for
	// hundreds, so a pass behind many sessions commits them together.
	GroupEvents int
	// Logger receives the failures of background passes (retried on the next pass).
	Logger *slog.Logger
	// Observe, when set, is called after each session's batch with how long its oldest
	// commit not yet indexed waited (the lag a search could see), for metrics.
	Observe func(lag time.Duration)
}

// Indexer keeps a Backend up to date with a store's logs, asynchronously: one goroutine,
// started by Start and stopped by Stop (its one owner), woken by the store's commits, reads the
// new events of each session behind the index (Backend.Pending) through Store.ReadEvents,
// extracts their documents and commits them with the session's new cursor in one transaction
// (Backend.Apply). The append path is untouched: nothing of an append waits for the index.
// After a crash, indexing resumes from the durable cursors.
type Indexer struct {
	st  store.Store
	b   Backend
	opt IndexerOptions

	kick chan struct{}

	mu      sync.Mutex
	waiting map[string]wait // sessions with commits not yet indexed, from Subscribe
	// queued are the events commits carried (store.Capabilities.CommitCarriesEvents), by
	// session, in order and without a gap, not yet indexed: a pass takes them from here
	// instead of reading them back. At most maxQueued in all; beyond, a session's new events
	// are not kept (and its queue is dropped), and the pass reads them.
	queued  map[string][]store.StoredEvent
	nQueued int
	// behind is the number of events behind the index after the last pass's Pending.
	behind  atomic.Int64
	indexed atomic.Int64 // events indexed since New

	runMu  sync.Mutex // one pass at a time
	state  sync.Mutex // guards cancel, done, unsub
	cancel context.CancelFunc
	done   chan struct{}
	unsub  func()
}

// maxQueued bounds the events commits carried that the indexer keeps (about 10 MB of
// 500-byte events).
const maxQueued = 20000

// takeQueued returns the queued events of the session after sequence after (at most limit),
// when the queue continues the log right there; it drops the events at or before after.
func (ix *Indexer) takeQueued(id string, after int64, limit int) []store.StoredEvent {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	q := ix.queued[id]
	i := 0
	for i < len(q) && q[i].Sequence <= after {
		i++
	}
	if i > 0 {
		ix.nQueued -= i
		q = q[i:]
		if len(q) == 0 {
			delete(ix.queued, id)
		} else {
			ix.queued[id] = q
		}
	}
	if len(q) == 0 || q[0].Sequence != after+1 {
		return nil
	}
	return slices.Clone(q[:min(len(q), limit)])
}

// wait is the oldest commit of a session the index has not taken yet.
type wait struct {
	since time.Time
	last  int64
}

// NewIndexer returns an indexer of st into b; it does nothing until Start (or CatchUp).
func NewIndexer(st store.Store, b Backend, opt IndexerOptions) *Indexer {
	if opt.MinInterval <= 0 {
		opt.MinInterval = 50 * time.Millisecond
	}
	if opt.Rescan <= 0 {
		opt.Rescan = 2 * time.Second
	}
	if opt.BatchEvents <= 0 {
		opt.BatchEvents = 1000
	}
	if opt.GroupEvents <= 0 {
		opt.GroupEvents = 4096
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	return &Indexer{st: st, b: b, opt: opt, kick: make(chan struct{}, 1), waiting: map[string]wait{}, queued: map[string][]store.StoredEvent{}}
}

// Start starts the indexing goroutine. It is a no-op when already started.
func (ix *Indexer) Start() {
	ix.state.Lock()
	defer ix.state.Unlock()
	if ix.done != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	ix.cancel, ix.done = cancel, make(chan struct{})
	ix.unsub = ix.st.Subscribe(ix.committed)
	go ix.loop(ctx, ix.done)
}

// Stop stops the goroutine and waits for it; a pass in progress is abandoned between two
// transactions (what it committed stays). It is a no-op when not started.
func (ix *Indexer) Stop() {
	ix.state.Lock()
	defer ix.state.Unlock()
	if ix.done == nil {
		return
	}
	ix.unsub()
	ix.cancel()
	<-ix.done
	ix.done, ix.cancel, ix.unsub = nil, nil, nil
}

// committed is the store's commit callback: it must not block nor call the store.
func (ix *Indexer) committed(c store.Commit) {
	ix.mu.Lock()
	w, ok := ix.waiting[c.SessionID]
	if !ok {
		w.since = time.Now()
	}
	w.last = max(w.last, c.LastSequence)
	ix.waiting[c.SessionID] = w
	if len(c.Events) > 0 {
		q := ix.queued[c.SessionID]
		switch {
		case ix.nQueued+len(c.Events) > maxQueued || (len(q) > 0 && q[len(q)-1].Sequence+1 != c.Events[0].Sequence):
			ix.nQueued -= len(q)
			delete(ix.queued, c.SessionID)
		default:
			ix.queued[c.SessionID] = append(q, c.Events...)
			ix.nQueued += len(c.Events)
		}
	}
	ix.mu.Unlock()
	select {
	case ix.kick <- struct{}{}:
	default:
	}
}

func (ix *Indexer) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	t := time.NewTimer(0) // a first pass at once: catch up with what was written while stopped
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-ix.kick:
		}
		start := time.Now()
		if _, err := ix.pass(ctx, nil); err != nil && ctx.Err() == nil {
			ix.opt.Logger.Error("search index: pass failed; retrying", "err", err)
		}
		// At most one pass per MinInterval; at least one per Rescan.
		select {
		case <-ctx.Done():
			return
		case <-time.After(ix.opt.MinInterval - time.Since(start)):
		}
		t.Reset(ix.opt.Rescan)
	}
}

// CatchUp indexes everything the store's logs hold now, in passes until the index is level with
// every log, calling progress (when not nil) after each batch with the events indexed so far and
// the number behind at the start. It returns the number of events indexed. It may run beside
// the goroutine Start started (their passes take turns).
func (ix *Indexer) CatchUp(ctx context.Context, progress func(done, total int64)) (int64, error) {
	var n int64
	for range 1000 {
		k, err := ix.pass(ctx, func(done, total int64) {
			if progress != nil {
				progress(n+done, total)
			}
		})
		n += k
		if err != nil {
			return n, err
		}
		if ix.behind.Load() == 0 && k == 0 {
			return n, nil
		}
	}
	return n, fmt.Errorf("search index: still behind after 1000 passes (is something appending faster than it indexes?)")
}

// Lag returns how long the oldest commit not yet indexed has waited (0 when none is
// waiting) and how many events the index was behind at the start of the last pass.
func (ix *Indexer) Lag() (time.Duration, int64) {
	ix.mu.Lock()
	var oldest time.Time
	for _, w := range ix.waiting {
		if oldest.IsZero() || w.since.Before(oldest) {
			oldest = w.since
		}
	}
	ix.mu.Unlock()
	if oldest.IsZero() {
		return 0, ix.behind.Load()
	}
	return time.Since(oldest), ix.behind.Load()
}

// Indexed returns the number of events this indexer has indexed since it was made.
func (ix *Indexer) Indexed() int64 { return ix.indexed.Load() }

// pass compares every log with the index and indexes what is behind, in transactions of about
// GroupEvents events across sessions. It returns the events it indexed.
func (ix *Indexer) pass(ctx context.Context, progress func(done, total int64)) (int64, error) {
	ix.runMu.Lock()
	defer ix.runMu.Unlock()
	asked := time.Now()
	pending, err := ix.b.Pending(ctx)
	if err != nil {
		return 0, fmt.Errorf("search index: find the sessions behind: %w", err)
	}
	var total int64
	for _, p := range pending {
		total += max(p.Last-p.Indexed, 0)
	}
	ix.behind.Store(total)
	ix.level(pending, asked)
	work := make([]*sessionWork, len(pending))
	for i, p := range pending {
		work[i] = newSessionWork(p)
	}
	var n int64
	for len(work) > 0 {
		if ctx.Err() != nil {
			return n, ctx.Err()
		}
		// One group: the next chunk of each session in turn, up to GroupEvents events.
		var (
			group  []*Batch
			owners []*sessionWork
			events int
			next   []*sessionWork
		)
		for i, w := range work {
			if events >= ix.opt.GroupEvents {
				next = append(next, work[i:]...)
				break
			}
			b, more, err := ix.chunk(ctx, w, min(ix.opt.BatchEvents, ix.opt.GroupEvents-events))
			if err != nil {
				return n, err
			}
			if b != nil {
				group, owners = append(group, b), append(owners, w)
				events += len(b.Docs)
			}
			if more {
				next = append(next, w)
			}
		}
		if len(group) > 0 {
			moved, err := ix.b.Apply(ctx, group)
			if err != nil {
				return n, fmt.Errorf("search index: %w", err)
			}
			skip := map[int]bool{}
			for _, i := range moved {
				skip[i] = true
			}
			for i, b := range group {
				w := owners[i]
				if skip[i] {
					w.done = true // another instance has it; the next pass sees where it is
					continue
				}
				w.applied(b)
				n += int64(len(b.Docs))
				ix.behind.Add(-min(int64(len(b.Docs)), ix.behind.Load()))
			}
			if progress != nil {
				progress(n, total)
			}
		}
		work = work[:0]
		for _, w := range next {
			if !w.done {
				work = append(work, w)
			}
		}
		for _, w := range owners {
			if !w.done && !slices.Contains(work, w) && w.caughtUp {
				ix.leveled(w)
			}
		}
	}
	ix.indexed.Add(n)
	return n, nil
}

// sessionWork is a session being brought level in a pass.
type sessionWork struct {
	p        Pending
	cursor   int64 // the index's cursor, as the last applied batch left it
	after    int64 // read the log after this sequence
	first    bool  // the next batch is the session's first of the pass (it resets or drops)
	done     bool  // left for the next pass
	caughtUp bool  // its last read reached the end of the log
}

func newSessionWork(p Pending) *sessionWork {
	w := &sessionWork{p: p, cursor: p.Indexed, after: p.Indexed, first: true}
	if p.Dropped > p.Compacted {
		w.after = -1 // a restore brought back compacted events: index the log again
	}
	return w
}

// chunk reads the session's next events (at most limit) and returns them as a batch (nil when
// there is nothing to write) and whether the session may have more.
func (ix *Indexer) chunk(ctx context.Context, w *sessionWork, limit int) (*Batch, bool, error) {
	p := w.p
	evs := ix.takeQueued(p.SessionID, w.after, limit)
	if evs == nil {
		var err error
		evs, err = ix.st.ReadEvents(ctx, p.SessionID, w.after, limit)
		if errors.Is(err, store.ErrSessionNotFound) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("search index: read session %q after %d: %w", p.SessionID, w.after, err)
		}
	}
	b := &Batch{SessionID: p.SessionID, From: w.cursor, DropThrough: -1}
	if w.first {
		switch {
		case p.Dropped > p.Compacted:
			b.Reset = true
		case p.Compacted > p.Dropped:
			b.DropThrough = p.Compacted
		}
	}
	b.Docs = make([]Doc, 0, len(evs))
	for _, ev := range evs {
		d, err := Extract(ev)
		if err != nil {
			return nil, false, fmt.Errorf("search index: session %q: %w", p.SessionID, err)
		}
		b.Docs = append(b.Docs, d)
	}
	b.Through = max(w.cursor, w.after)
	if len(evs) > 0 {
		b.Through = evs[len(evs)-1].Sequence
	} else if p.Compacted >= p.Last {
		b.Through = max(b.Through, p.Last) // the rest of the log was compacted away
	}
	more := len(evs) == limit
	w.caughtUp = !more
	if b.Through == b.From && !b.Reset && b.DropThrough < 0 {
		return nil, false, nil // nothing readable yet
	}
	w.after = b.Through
	return b, more, nil
}

// applied records that the session's batch b committed.
func (w *sessionWork) applied(b *Batch) {
	w.cursor, w.first = b.Through, false
}

// leveled forgets the session's waiting commit if the index now covers it, and reports its
// delay.
func (ix *Indexer) leveled(w *sessionWork) {
	ix.mu.Lock()
	if wt, ok := ix.waiting[w.p.SessionID]; ok && wt.last <= w.cursor {
		delete(ix.waiting, w.p.SessionID)
		ix.mu.Unlock()
		if ix.opt.Observe != nil {
			ix.opt.Observe(time.Since(wt.since))
		}
		return
	}
	ix.mu.Unlock()
}

// level forgets the waiting commits of the sessions Pending, asked at asked, found level with
// their logs: a commit reported before then was indexed by an earlier pass.
func (ix *Indexer) level(pending []Pending, asked time.Time) {
	behind := make(map[string]bool, len(pending))
	for _, p := range pending {
		behind[p.SessionID] = true
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for id, w := range ix.waiting {
		if !behind[id] && w.since.Before(asked) {
			delete(ix.waiting, id)
		}
	}
}
