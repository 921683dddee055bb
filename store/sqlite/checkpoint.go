package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"time"
)

// Checkpointing. The writer never checkpoints (wal_autocheckpoint is 0 on its connection), so a
// commit never waits for the WAL to be copied into the database file. The checkpointer does it
// on its own connection with PASSIVE checkpoints, which run beside the writer and readers
// without blocking them; SQLite starts the WAL over at the first write after a checkpoint has
// copied it all. Should the WAL still grow past walHardLimit (readers holding old snapshots
// without pause), a TRUNCATE checkpoint waits for them and shrinks it. A checkpoint copies
// the last version of each page in the WAL, so the fewer checkpoints, the fewer copies of the
// pages every commit writes again (the tail's last pages, page 1, interior pages); every 256
// commits costs single-event appends 5-10% less CPU than every 64 did, and keeps the WAL
// within about 16,384 events' worth of frames between checkpoints, and within about 4 MiB of
// events when they are large (without it, 16,384 events of 64 KiB would have let the WAL reach
// 1 GiB, all of which a full disk needs room for before it can take a write again).
const (
	ckptEveryCommits = 256             // the writer kicks the checkpointer after this many commits
	ckptEveryEvents  = 16384           // ... or this many events, whichever comes first
	ckptEveryBytes   = 4 << 20         // ... or this many bytes of events (a full disk needs that much room to recover: readiness.go)
	ckptInterval     = 2 * time.Second // and it checkpoints on its own at least this often
	walHardLimit     = 1 << 18         // frames (1 GiB with 4 KiB pages)
	// ckptEveryWALBytes: the writer also kicks the checkpointer once the WAL file has grown
	// this much since the last kick (it looks every ckptLookBytes of events): large events
	// write more to the WAL than their own bytes, and the checkpoint needs that much room.
	ckptEveryWALBytes = 2 << 20
	ckptLookBytes     = 256 << 10
)

// walSize is the WAL file's size in bytes (0 when it cannot be read). The file is reused
// from its start after a checkpoint, so its size is the most the WAL has held.
func (s *Store) walSize() int64 {
	fi, err := os.Stat(filepath.Join(s.dir, DBFile) + "-wal")
	if err != nil {
		return 0
	}
	return fi.Size()
}

func (s *Store) checkpointer() {
	defer close(s.ckptDone)
	t := time.NewTicker(ckptInterval)
	defer t.Stop()
	for {
		select {
		case <-s.ckptStop:
			return
		case <-s.ckptKick:
		case <-t.C:
		}
		if s.dur.err() != nil {
			// After a failed sync the WAL may hold pages the kernel dropped: copying it
			// into the database file could spread the damage. Reopening recovers.
			continue
		}
		if err := s.checkpoint(context.Background()); err != nil {
			s.log.Warn("sqlite store: checkpoint failed; retrying at the next one", "dir", s.dir, "err", err)
		}
	}
}

func (s *Store) checkpoint(ctx context.Context) error {
	var busy, frames, copied int64
	if err := s.cdb.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied); err != nil {
		return err
	}
	if frames > walHardLimit {
		return s.cdb.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &frames, &copied)
	}
	return nil
}

// kickCheckpointer asks for a checkpoint without waiting.
func (s *Store) kickCheckpointer() {
	select {
	case s.ckptKick <- struct{}{}:
	default:
	}
}
