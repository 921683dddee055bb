package search

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	// BatchEvents is the most events one index transaction takes (default 1000).
	BatchEvents int
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
	// behind is the number of events behind the index after the last pass's Pending.
	behind  atomic.Int64
	indexed atomic.Int64 // events indexed since New

	runMu  sync.Mutex // one pass at a time
	state  sync.Mutex // guards cancel, done, unsub
	cancel context.CancelFunc
	done   chan struct{}
	unsub  func()
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
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	return &Indexer{st: st, b: b, opt: opt, kick: make(chan struct{}, 1), waiting: map[string]wait{}}
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

// pass compares every log with the index and indexes what is behind. It returns the events it
// indexed.
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
	var n int64
	var errs []error
	for _, p := range pending {
		if ctx.Err() != nil {
			return n, ctx.Err()
		}
		k, err := ix.session(ctx, p, func(k int64) {
			if progress != nil {
				progress(n+k, total)
			}
		})
		n += k
		if err != nil && !errors.Is(err, ErrCursorMoved) {
			errs = append(errs, err)
		}
	}
	ix.indexed.Add(n)
	return n, errors.Join(errs...)
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

// session brings the index of one session level with its log.
func (ix *Indexer) session(ctx context.Context, p Pending, progress func(int64)) (int64, error) {
	cursor := p.Indexed
	b := Batch{SessionID: p.SessionID, From: p.Indexed, DropThrough: -1}
	after := p.Indexed
	switch {
	case p.Dropped > p.Compacted:
		// A restore brought back the events a compaction removed: index the log again.
		b.Reset, after = true, -1
	case p.Compacted > p.Dropped:
		b.DropThrough = p.Compacted
	}
	var n int64
	for {
		evs, err := ix.st.ReadEvents(ctx, p.SessionID, after, ix.opt.BatchEvents)
		if errors.Is(err, store.ErrSessionNotFound) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("search index: read session %q after %d: %w", p.SessionID, after, err)
		}
		b.Docs = b.Docs[:0]
		for _, ev := range evs {
			d, err := Extract(ev)
			if err != nil {
				return n, fmt.Errorf("search index: session %q: %w", p.SessionID, err)
			}
			b.Docs = append(b.Docs, d)
		}
		b.Through = max(cursor, after)
		if len(evs) > 0 {
			b.Through = evs[len(evs)-1].Sequence
		} else if p.Compacted >= p.Last {
			b.Through = max(b.Through, p.Last) // the rest of the log was compacted away
		}
		if b.Through == b.From && !b.Reset && b.DropThrough < 0 {
			break // nothing readable yet
		}
		if err := ix.b.Apply(ctx, &b); err != nil {
			return n, err
		}
		n += int64(len(evs))
		ix.behind.Add(-min(int64(len(evs)), ix.behind.Load()))
		progress(n)
		after, cursor = b.Through, b.Through
		b = Batch{SessionID: p.SessionID, From: cursor, DropThrough: -1}
		if len(evs) < ix.opt.BatchEvents {
			break
		}
	}
	ix.mu.Lock()
	if w, ok := ix.waiting[p.SessionID]; ok && w.last <= cursor {
		delete(ix.waiting, p.SessionID)
		ix.mu.Unlock()
		if ix.opt.Observe != nil {
			ix.opt.Observe(time.Since(w.since))
		}
	} else {
		ix.mu.Unlock()
	}
	return n, nil
}
