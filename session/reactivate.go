package session

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/sessiond/sessiond/archive"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// How Restore brought a session back (RestoreResult.How).
const (
	// RestoredNew: the session was not in the store; the archive was imported.
	RestoredNew = "imported"
	// RestoredOverCompacted: the session was archived with --compact; the archive's log was
	// imported over the kept row.
	RestoredOverCompacted = "over-compacted"
	// RestoredReactivated: the session was archived without --compact; its log was still in
	// the store and was kept as it is, only its status changed.
	RestoredReactivated = "reactivated"
)

// restoreHow decides what restoring an archive of session id means for this store, given the
// session as stored (nil when absent) and its lifecycle state. It is the one rule of
// docs/lifecycle.md "restore": an absent session is imported; an archived session is brought
// back (over its compacted copy, or by reactivating the log still in the store); a session in
// any other status is live, so there is nothing to restore and the answer is RESTORE_CONFLICT
// with the ways on.
func restoreHow(id, name string, cur *store.Session, lc store.Lifecycle) (string, error) {
	switch {
	case cur == nil:
		return RestoredNew, nil
	case cur.Record.Status != contract.SessionStatusArchived:
		return "", reject(contract.CodeRestoreConflict, "session %q is %s in this store: it is not archived, so there is nothing to restore (it was restored already, or never archived). "+
			"Work on it as it is; to get a second copy from %s, restore it into another data directory (sessiond serve --data OTHER --archive-dir THIS-ARCHIVE-DIR)", id, cur.Record.Status, name)
	case lc.CompactedThrough != nil:
		return RestoredOverCompacted, nil
	default:
		return RestoredReactivated, nil
	}
}

// reactivate brings back an archived session whose log is still in the store (archived without
// --compact): the log stays as stored, which holds at least everything the archive holds, and
// the record becomes what restore makes it (paused, or closed when it was closed; heartbeat
// now; updated_by_gate handoff; archive_path the file), with the lifecycle state's restoredFrom
// and restoredAt. The archive must be a copy of this store's session: its last event must be
// the stored event at the same sequence. Otherwise the answer is RESTORE_CONFLICT naming the
// archive that is.
func (s *Service) reactivate(ctx context.Context, c *archive.Content, sum, path string, cur *store.Session, lc store.Lifecycle) (*store.Session, error) {
	id := c.SessionID
	other := func(why string) error {
		return reject(contract.CodeRestoreConflict, "session %q is archived in this store, but %s is not a copy of it (%s). "+
			"Restore its latest archive %s to bring it back, or restore %s into another data directory",
			id, filepath.Base(path), why, lc.LastArchiveName, filepath.Base(path))
	}
	if c.LastSequence > cur.LastSequence {
		return nil, other(fmt.Sprintf("the archive's log ends at %d, the store's at %d", c.LastSequence, cur.LastSequence))
	}
	if c.LastSequence >= 0 {
		got, err := s.st.ReadEvents(ctx, id, c.LastSequence-1, 1)
		if err != nil {
			return nil, fmt.Errorf("restore: read event %d: %w", c.LastSequence, err)
		}
		if len(got) == 0 {
			// The event is gone: another instance compacted the log since restore looked.
			if now, err := s.st.Lifecycle(ctx, id); err == nil && now.CompactedThrough != nil {
				return nil, reject(contract.CodeSessionMoved, "session %q changed while it was restored (its log was compacted meanwhile); restore it again", id)
			}
		}
		if len(got) != 1 || got[0].Sequence != c.LastSequence || !bytes.Equal(got[0].Data, c.Events[c.LastSequence]) {
			return nil, other(fmt.Sprintf("its event %d is not the stored one", c.LastSequence))
		}
	}
	var moved error
	now := s.stamp()
	sess, _, err := s.st.UpdateLifecycle(ctx, id, func(cur *store.Session, lc *store.Lifecycle) error {
		if cur.Record.Status != contract.SessionStatusArchived || lc.CompactedThrough != nil {
			moved = reject(contract.CodeSessionMoved, "session %q changed while it was restored (status %s); restore it again", id, cur.Record.Status)
			return moved
		}
		rec := &cur.Record
		rec.Status = contract.SessionStatusPaused
		if c.Record.Status == contract.SessionStatusClosed {
			rec.Status = contract.SessionStatusClosed
		}
		rec.LastHeartbeatAt = contract.Some(now)
		rec.UpdatedAt = contract.Some(now)
		rec.UpdatedByGate = contract.Some("handoff")
		rec.ArchivePath = contract.Some(path)
		lc.RestoredFrom, lc.RestoredAt = sum, now
		return validRecord(rec)
	})
	if moved != nil {
		return nil, moved
	}
	if err != nil {
		return nil, fmt.Errorf("restore: reactivate: %w", err)
	}
	return sess, nil
}

// restoreConflict explains an ImportSession refusal over an archived, compacted session whose
// log ends at last: either the archive is not the one the log was compacted against (the way
// on is that one), or events were appended after the compaction, which restore cannot join to
// the archived part in place (the way on is another data directory).
func restoreConflict(id, name string, last int64, lc store.Lifecycle, err error) error {
	if !errors.Is(err, store.ErrSessionExists) {
		return fmt.Errorf("restore: %w", err)
	}
	through := derefOr(lc.CompactedThrough, -1)
	if last > through {
		return reject(contract.CodeRestoreConflict, "session %q is archived in this store with its log compacted through %d, and events %d to %d were appended after that: "+
			"restore cannot join them to the archived part in place. Restore %s into another data directory to read the archived part (sessiond serve --data OTHER --archive-dir THIS-ARCHIVE-DIR); "+
			"the later events stay readable here", id, through, through+1, last, name)
	}
	return reject(contract.CodeRestoreConflict, "session %q is archived in this store with its log compacted through %d, and %s does not hold exactly that log (%v). "+
		"Restore its latest archive %s, or restore %s into another data directory", id, through, name, err, lc.LastArchiveName, name)
}

func derefOr(p *int64, def int64) int64 {
	if p == nil {
		return def
	}
	return *p
}
