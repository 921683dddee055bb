package sqlite

import (
	"context"
	"errors"
	"fmt"

	"github.com/sessiond/sessiond/store"
)

// A full disk. SQLite fails a write that finds no room with SQLITE_FULL and rolls it back: the
// database stays as it was and the store stays usable (unlike after a failed sync). The writer
// fails the group with store.Full (classify) and notes it here; from then on Ready no longer
// answers from memory: it answers store.Full while the file system has less than readyRoom
// free (a probe of one page could fit where an append of a few events does not), and then
// sends a probe write through the writer (probeWrite), which commits and syncs only when the
// disk has room again. The first commit that goes through, the probe's or any other, clears
// the note (the syncer).
//
// What a full disk needs to recover is room for a checkpoint: the WAL holds the pages
// committed since the last checkpoint, and copying them into the database file grows it by as
// much, so the WAL only starts over (and new commits reuse its space) once the database file
// has room for them. The checkpointer runs every ckptEveryBytes of events as well as every
// ckptEveryCommits commits, so that never exceeds a few MiB, and it keeps trying every
// ckptInterval while writes fail, so freeing that much space lets writes resume without a
// restart.

// readyRoom is the free space a store that found its disk full needs before Ready says it
// takes writes again.
const readyRoom = 1 << 20

// noteFull records err, the failure of a group the disk was too full for, and asks for a
// checkpoint: the WAL must be copied before its space can be reused.
func (s *Store) noteFull(err error) {
	s.full.Store(&err)
	s.kickCheckpointer()
}

// probeWrite writes to the database (a setting rewritten with its own value: a real page in
// the WAL, committed and synced like any write) and returns the write's error, classified.
func (s *Store) probeWrite(ctx context.Context) error {
	s.kickCheckpointer()
	if free := freeSpace(s.dir); free >= 0 && free < readyRoom {
		cause := errors.New("the disk was full")
		if p := s.full.Load(); p != nil {
			cause = *p
		}
		return store.Unavailable(store.Full, fmt.Errorf("the store's file system has %d bytes free, under the %d it needs to take writes again; free space on it (%w)", free, readyRoom, cause))
	}
	r := &request{ctx: ctx, op: func(w *writer) error {
		if _, err := w.conn.ExecContext(w.ctx, `UPDATE settings SET value = value WHERE name = 'generation_bits'`); err != nil {
			return fatal("probe write", err)
		}
		return nil
	}}
	if err := s.submit(ctx, r); err != nil {
		return err
	}
	if r.err != nil {
		return fmt.Errorf("the store refuses writes: %w", r.err)
	}
	return nil
}
