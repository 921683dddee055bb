package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"

	"github.com/sessiond/sessiond/store"
)

// The tail (migration 0011). events is clustered by session, so an append of a few events
// writes into the last leaf page of its session's range, and with many sessions appending one
// event each every commit rewrote one leaf per session, and split full leaves in the middle of
// the tree by sharing them out with their neighbours: about three 4 KiB pages written per
// ~700-byte event (docs/benchmarks.md). So the events of a small append (less than
// tailBelowBytes of canonical JSON) go to event_tail instead, keyed by insertion order (pos,
// which the writer numbers): a commit's small appends fill the tail's last pages one after the
// other, whatever their sessions. A larger append writes into events directly, as before: its
// events fill pages of their own.
//
// The move. Once the tail holds tail_rows rows (a setting, 1024 by default), a pass starts
// over the rows it holds then (pos up to tail_move.pos): each group (while it waits for the sync
// in flight, else just before it commits) copies the next chunk of them into events in rid
// order (several events to each session's page) and records how far it got (tail_move.rid);
// the group that copies the last ones deletes the pass's rows from the tail, a range of its
// key, and ends the pass. A chunk is an eighth of the tail as it stands (moveChunks), and at
// least an eighth of tail_rows: a pass of tail_rows rows takes eight groups, and when groups
// bring more rows than that the chunks grow with the tail, so that the move keeps up and the
// tail stays within about eight groups' worth of small appends. Copying a whole tail of 1024
// rows in one group cost that group 10–20 ms; an eighth costs each group of the pass about an
// eighth of it.
//
// An event is read from exactly one place: events, or event_tail_live (the view of the tail
// without the rows the pass has copied). The pass's state commits with the rows it copies, so
// a reader sees a copied row in events or in the tail, never in both nor neither. And a
// session's rows in events all come before its live rows in the tail (in sequence): a small
// append's events are the session's newest; a large append moves the session's live rows from
// the tail into events first (flushSession, in its transaction); a pass copies the oldest rows
// of each session it reaches (rows of a later pos have later sequences), in rid order; a
// compaction deletes a prefix of both. So every read of events reads events,
// then the tail (inBothTables), through their keys: a range read in order is the range of
// events followed by that of the tail, with no merge. The tail is a layout of the same rows,
// nothing more: what an append writes, when it is durable, and what readers see are unchanged.

// tailBelowBytes: an append whose new events take fewer bytes of canonical JSON than this
// writes them to event_tail; a larger one fills pages of its own in events.
const tailBelowBytes = 4096

// moveChunks: a group of a pass copies an eighth of the tail's rows, and at least an eighth of
// tail_rows (moveTail).
const moveChunks = 8

// inBothTables returns the SELECT q over events, UNION ALL, q over event_tail_live: q names
// its table %[1]s (a fmt verb) wherever it reads events, and holds no other verb. A range read
// built on it has no ORDER BY: its order is that of the plan SQLite makes, the arms one after
// the other, each in the order of the key it searches. SQLite does not promise that order
// without an ORDER BY, so TestEventQueryPlans pins the plans: a SQLite whose plans differ fails
// it, and that is a correctness problem, not a slower query. A compound SELECT takes its ORDER
// BY and LIMIT after the last arm; its numbered parameters (?1) are shared by the arms.
func inBothTables(q string) string {
	return fmt.Sprintf(q, "events") + "\nUNION ALL\n" + fmt.Sprintf(q, "event_tail_live")
}

// small reports whether an append's new events take fewer than tailBelowBytes.
func small(evs []store.StoredEvent) bool {
	n := 0
	for i := range evs {
		if n += len(evs[i].Data); n >= tailBelowBytes {
			return false
		}
	}
	return true
}

// toTail reports whether the new events evs of session sk go to event_tail: when they are few
// (small). A larger append goes to events, after the session's live rows in the tail, if it
// has any, have been moved there (flushSession), so that its rows in events stay before its
// rows in the tail.
func (w *writer) toTail(sk int64, evs []store.StoredEvent) (bool, error) {
	if small(evs) {
		return true, nil
	}
	return false, w.flushSession(sk)
}

// flushSession moves the live rows of session sk from the tail into events (one index probe
// when there are none), and deletes the session's rows from the tail, the ones a pass has
// copied already included.
func (w *writer) flushSession(sk int64) error {
	res, err := w.st.flushTail.ExecContext(w.ctx, sk)
	if err != nil {
		return fatal("move a session's events out of the tail", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fatal("move a session's events out of the tail", err)
	} else if n == 0 {
		return nil
	}
	if err := w.loadTail(); err != nil {
		return err
	}
	res, err = w.st.dropSessionTail.ExecContext(w.ctx, sk)
	if err != nil {
		return fatal("move a session's events out of the tail", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fatal("move a session's events out of the tail", err)
	}
	w.tail.rows -= int(n)
	w.tail.writes++
	return nil
}

// readTailRows reads the database's tail_rows setting.
func readTailRows(ctx context.Context, q rowQuerier) (int, error) {
	n, err := readSetting(ctx, q, "tail_rows", 1, 1<<20)
	return int(n), err
}

// tailState is what the writer knows of the tail in the group's transaction; loaded (loadTail)
// when it is not known: at the first move, and after a failed group or anything else that may
// have changed the tail behind the writer's back (a session write that wrote to the tail and
// was rolled back, a compaction).
type tailState struct {
	known   bool
	writes  uint64 // the writer's inserts and deletes of tail rows so far (see take)
	rows    int    // rows in event_tail, copied ones included
	nextPos int64  // the pos of the next row inserted
	movePos int64  // the pass in progress moves the rows up to this pos; 0: no pass
	moveRid int64  // ... and has copied those below this rid
}

// Statements of the tail.
const (
	// qFlushTail and qDropSessionTail move session ?1's live rows from the tail into events
	// (flushSession).
	qFlushTail = `INSERT INTO events (` + eventRowCols + `) SELECT ` + eventRowCols + ` FROM event_tail_live
	WHERE rid >= (?1 << 32) AND rid < ((?1 + 1) << 32) ORDER BY rid`
	qDropSessionTail = `DELETE FROM event_tail WHERE rid >= (?1 << 32) AND rid < ((?1 + 1) << 32)`
	qTailState       = `SELECT (SELECT count(*) FROM event_tail), (SELECT coalesce(max(pos), 0) FROM event_tail), pos, rid FROM tail_move`
	qSetTailMove     = `UPDATE tail_move SET pos = ?1, rid = ?2`
	// qTailBound is the rid of the row after the next chunk of the pass (?1: the rid it has
	// reached, ?2: its last pos, ?3: the chunk's size); no row when the chunk is the last.
	qTailBound = `SELECT rid FROM event_tail WHERE rid >= ?1 AND pos <= ?2 ORDER BY rid LIMIT 1 OFFSET ?3`
	qCopyTail  = `INSERT INTO events (` + eventRowCols + `) SELECT ` + eventRowCols + ` FROM event_tail
	WHERE rid >= ?1 AND rid < ?2 AND pos <= ?3 ORDER BY rid`
	qDropTail = `DELETE FROM event_tail WHERE pos <= ?1`
)

// loadTail reads the tail's state when the writer does not know it.
func (w *writer) loadTail() error {
	t := &w.tail
	if t.known {
		return nil
	}
	var maxPos int64
	if err := w.st.tailState.QueryRowContext(w.ctx).Scan(&t.rows, &maxPos, &t.movePos, &t.moveRid); err != nil {
		return fatal("read the tail's state", err)
	}
	// Past every pos a row holds or the pass covers: a new row never takes the pos of a row
	// the pass has copied and deleted, nor one below the pass's last.
	t.nextPos = max(maxPos, t.movePos) + 1
	t.known = true
	return nil
}

// moveTail runs the move's step of the group, in its transaction: it starts a pass when the
// tail holds the tail_rows setting's rows, and copies the pass's next chunk. The writer runs it
// once per group: while the group waits for the sync in flight (runGroup), when that time
// would be idle, else just before it commits. A failure is fatal to the group.
func (w *writer) moveTail() error {
	w.moved = true
	if err := w.loadTail(); err != nil {
		return err
	}
	t := &w.tail
	if t.movePos == 0 {
		if t.rows < w.s.tailRows {
			return nil
		}
		t.movePos, t.moveRid = t.nextPos-1, 0
	}
	bound := int64(math.MaxInt64)
	chunk := max(w.s.tailRows, t.rows) / moveChunks
	err := w.st.tailBound.QueryRowContext(w.ctx, t.moveRid, t.movePos, max(chunk, 1)).Scan(&bound)
	last := errors.Is(err, sql.ErrNoRows)
	if err != nil && !last {
		return fatal("move the tail's events", err)
	}
	if _, err := w.st.copyTail.ExecContext(w.ctx, t.moveRid, bound, t.movePos); err != nil {
		return fatal("move the tail's events", err)
	}
	if last {
		if _, err := w.st.dropTail.ExecContext(w.ctx, t.movePos); err != nil {
			return fatal("move the tail's events", err)
		}
		t.movePos, t.moveRid = 0, 0
		t.known = false // the rows left: counted at the next move
	} else {
		t.moveRid = bound
	}
	if _, err := w.st.setTailMove.ExecContext(w.ctx, t.movePos, t.moveRid); err != nil {
		return fatal("move the tail's events", err)
	}
	return nil
}

// qInsertTail inserts n event rows into event_tail: for each its pos, then the arguments of
// qInsertEvents.
func qInsertTail(n int) string {
	return qInsertRows(`INSERT INTO event_tail (pos, `+eventRowCols+`)`, 11, n)
}
