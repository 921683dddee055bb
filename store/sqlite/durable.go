package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sessiond/sessiond/store"
)

// Durability without stalling the writer.
//
// The writer's connection commits with synchronous=NORMAL: COMMIT writes the transaction's
// frames to the WAL but does not sync it. The syncer goroutine syncs the WAL (fdatasync on its
// own descriptor of the file: a sync covers every write to the file before it, whoever made
// it) and only then answers the group's callers and tells the subscribers. Meanwhile the writer
// runs the next group: the sync of one group overlaps the work of the next, where before the
// writer sat idle through every sync. Several groups committed during one sync share the next.
//
// Durable before visible: other connections can read a commit as soon as COMMIT returns,
// before it is synced. So commits are numbered before COMMIT runs (committing), the syncer
// publishes the number of the last synced one (durable), and every read waits, after reading,
// until durable has reached the committing number it sees then: any commit its snapshot held
// was numbered before that. A read waits for the syncs in flight (usually one), and not at all
// when no commit is in flight. Reads that find nothing wait too (settle): an absence can be the
// work of an unsynced commit.
//
// A failed sync leaves the store unusable (what SQLite shows may not be on disk, and the page
// cache may have dropped the pages that failed): every call after it fails with the error,
// and reopening the store recovers from what the disk holds.

// committed is a commit handed from the writer to the syncer.
type committed struct {
	n     uint64     // the commit's number
	group []*request // the requests to answer once it is synced; nil when COMMIT failed
	// changes is the last change sequence the commit recorded, 0 when it recorded none.
	changes int64
}

// durability is the Store's half of the pipeline.
type durability struct {
	committing atomic.Uint64 // commits numbered so far (the writer numbers them before COMMIT)
	durable    atomic.Uint64 // commits synced (or failed) so far, in order

	mu      sync.Mutex
	advance chan struct{} // closed (and replaced) whenever durable moves

	// The syncer's state, for the writer (commitWait); guarded by mu.
	started   uint64        // the last commit number a sync has started to cover
	syncing   bool          // a sync is in flight
	syncStart time.Time     // when it started
	syncEvent chan struct{} // closed (and replaced) when a sync starts or ends
	syncTook  time.Duration // the average sync's duration

	failed atomic.Pointer[error] // the sync failure that made the store unusable

	walPath string
	wal     *os.File // the syncer's descriptor of the WAL, opened on first use
	walIno  uint64

	beforeSync atomic.Pointer[func() error] // tests: runs before each sync; an error fails it

	// hook, when set (tests only), is called at the points of the pipeline named by hookPoint,
	// on the goroutine that reaches them; it may block to order them against each other.
	hook atomic.Pointer[func(hookPoint)]
}

// hookPoint names a point of the pipeline where tests can step in (durability.hook).
type hookPoint int

const (
	hookTaken      hookPoint = iota // the writer has run a request taken into its group
	hookWriterWait                  // the writer keeps its group open and waits (commitWait)
	hookGroupEnd                    // the writer has committed or aborted its group
	hookSyncEnded                   // the syncer has ended a sync, before it answers the callers
	hookReadWait                    // a read waits for the commits it could have seen (visible)
)

// at calls the test hook, if any, at point p.
func (d *durability) at(p hookPoint) {
	if h := d.hook.Load(); h != nil {
		(*h)(p)
	}
}

func (d *durability) init(dbPath string) {
	d.walPath = dbPath + "-wal"
	d.advance = make(chan struct{})
	d.syncEvent = make(chan struct{})
}

// err returns the sync failure that made the store unusable, or nil.
func (d *durability) err() error {
	if p := d.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// visible waits until every commit a read that has just finished could have seen is durable.
func (s *Store) visible(ctx context.Context) error {
	d := &s.dur
	target := d.committing.Load()
	for {
		if err := d.err(); err != nil {
			return err
		}
		if d.durable.Load() >= target {
			return nil
		}
		d.mu.Lock()
		ch := d.advance
		d.mu.Unlock()
		if d.durable.Load() >= target {
			return nil
		}
		d.at(hookReadWait)
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// settle makes a read's answer wait for the commits it could have seen (see visible). err is
// the read's error: a result, and a "no rows" too (an absence can be the work of a commit not
// yet synced, a compaction say), waits; a database error is returned as it is.
func (s *Store) settle(ctx context.Context, err error) error {
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	if verr := s.visible(ctx); verr != nil {
		return verr
	}
	return err
}

// setDurable publishes that commits up to n are settled.
func (d *durability) setDurable(n uint64) {
	d.mu.Lock()
	d.durable.Store(n)
	close(d.advance)
	d.advance = make(chan struct{})
	d.mu.Unlock()
}

// syncWAL makes every write to the WAL so far durable. It opens the WAL on first use and again
// should the file have been replaced (SQLite removes it only when the last connection closes,
// so this is a safeguard). With no WAL file there is nothing unsynced: SQLite removes it only
// after checkpointing it into the synced database file.
func (d *durability) syncWAL() error {
	if hook := d.beforeSync.Load(); hook != nil {
		if err := (*hook)(); err != nil {
			return fmt.Errorf("sync WAL: %w", err)
		}
	}
	fi, err := os.Stat(d.walPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sync WAL: %w", err)
	}
	if ino := fileID(fi); d.wal == nil || ino != d.walIno {
		if d.wal != nil {
			d.wal.Close()
		}
		if d.wal, err = os.OpenFile(d.walPath, os.O_RDWR, 0); err != nil {
			d.wal = nil
			return fmt.Errorf("sync WAL: %w", err)
		}
		d.walIno = ino
	}
	if err := datasync(d.wal); err != nil {
		return fmt.Errorf("sync WAL %s: %w", d.walPath, err)
	}
	return nil
}

func (d *durability) close() {
	if d.wal != nil {
		d.wal.Close()
		d.wal = nil
	}
}

// syncer syncs what the writer committed, in commit order, and then tells the subscribers and
// answers the callers. It stops when the writer closes syncq.
func (s *Store) syncer() {
	defer close(s.syncDone)
	d := &s.dur
	var batch []committed
	for c := range s.syncq {
		batch = append(batch[:0], c)
	drain:
		for {
			select {
			case c, ok := <-s.syncq:
				if !ok {
					break drain
				}
				batch = append(batch, c)
			default:
				break drain
			}
		}
		err := d.err()
		if err == nil {
			start := time.Now()
			d.startSync(batch[len(batch)-1].n, start)
			err = d.syncWAL()
			if d.endSync(time.Since(start), err) {
				s.log.Error("sqlite store: syncing the WAL failed; the store refuses writes until sessiond restarts", "dir", s.dir, "err", err)
			}
			d.at(hookSyncEnded)
			if f := s.obs.Synced; f != nil && err == nil {
				f(time.Since(start), len(batch))
			}
		}
		subs := s.subs.List()
		for _, c := range batch {
			if err == nil && c.group != nil {
				s.full.Store(nil) // a commit went through: the disk has room again
			}
			for _, r := range c.group {
				if err != nil {
					r.results, r.commit = nil, nil
					if r.err == nil {
						// Committed in SQLite, but maybe not on disk: a retry tells.
						r.err = store.Unavailable(store.CommitUnknown, unusable(err))
					}
					continue
				}
				if r.commit != nil {
					s.noteDurableLast(r.commit.SessionID, r.commit.LastSequence)
					for _, fn := range subs {
						fn(*r.commit)
					}
				}
			}
			for _, r := range c.group {
				close(r.done)
			}
			d.setDurable(c.n)
			if err == nil && c.changes > 0 {
				s.changeSubs.Notify(c.changes)
			}
		}
		clear(batch)
	}
}

// noteDurableLast records that session id's log ends at last, durably (LastSequence). Commits
// reach the syncer in commit order, so a session's value only moves forward; max keeps it so.
func (s *Store) noteDurableLast(id string, last int64) {
	v, ok := s.durableLast.Load(id)
	if !ok {
		v, _ = s.durableLast.LoadOrStore(id, new(atomic.Int64))
	}
	a := v.(*atomic.Int64)
	for cur := a.Load(); last > cur && !a.CompareAndSwap(cur, last); cur = a.Load() {
	}
}

// syncFile syncs the file at path (the database file after Open has migrated it, so that its
// header, WAL mode included, is on disk before anything depends on it).
func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// commitWait tells the writer, whose group's transaction is open and whose queue is empty,
// whether to keep the group open a little longer, and for how long at most: until ch is
// closed (the syncer starts or ends a sync) or until the deadline, when it is not zero. The
// writer commits once per sync, just before the sync in flight is expected to end (the
// average sync's duration less commitTook, what its commits take), so that the next sync
// finds the group committed and the disk does not wait for the commit:
//   - a commit is queued and its sync has not started: wait for that sync to start (the group
//     would only be synced by the sync after it anyway);
//   - a sync is in flight: wait until it is expected to end, less commitTook;
//   - otherwise (nothing is being synced: a lone writer, say), or after a failed sync, commit
//     now.
//
// Every channel it hands out is closed: failed is set under mu in the same step as the
// syncEvent of the failed sync is closed (endSync), so a channel handed out while failed is
// nil is closed by the next startSync or endSync, and one of them always comes: a sync is in
// flight (endSync follows), or a commit is queued (the syncer starts its sync, or skips it
// only once failed is set, which closed the channel already). Reading failed before taking mu
// would let the writer take a channel after the failed sync's close and before failed is
// set, and wait for a sync that never starts.
func (d *durability) commitWait(now time.Time, commitTook time.Duration) (ch <-chan struct{}, deadline time.Time, wait bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failed.Load() != nil {
		return nil, time.Time{}, false // the group fails at its commit (writer.commit)
	}
	if d.committing.Load() > d.started {
		return d.syncEvent, time.Time{}, true
	}
	if !d.syncing {
		return nil, time.Time{}, false
	}
	deadline = d.syncStart.Add(d.syncTook - commitTook)
	if !now.Before(deadline) {
		return nil, time.Time{}, false
	}
	return d.syncEvent, deadline, true
}

// startSync and endSync bracket each sync of the syncer, which covers the commits up to n
// (commitWait). endSync records the sync's failure, err, in the same step as it tells the
// writer that the sync ended, and reports whether err is the failure that made the store
// unusable (the first).
func (d *durability) startSync(n uint64, at time.Time) {
	d.mu.Lock()
	d.started, d.syncing, d.syncStart = n, true, at
	close(d.syncEvent)
	d.syncEvent = make(chan struct{})
	d.mu.Unlock()
}

func (d *durability) endSync(took time.Duration, err error) (first bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		first = d.failed.CompareAndSwap(nil, &err)
	}
	d.syncing = false
	// The average sync's duration, weighted 1/8 to the latest.
	if d.syncTook == 0 {
		d.syncTook = took
	} else {
		d.syncTook += (took - d.syncTook) / 8
	}
	close(d.syncEvent)
	d.syncEvent = make(chan struct{})
	return first
}
