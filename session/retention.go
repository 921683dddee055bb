package session

import (
	"context"
	"errors"
	"fmt"
	"github.com/sessiond/sessiond/wire"
	"os"
	"sort"
	"time"

	"github.com/sessiond/sessiond/archive"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// RetentionPolicy says what retention archives and deletes (docs/operations.md, "Retention").
// A zero field turns its rule off; the zero policy does nothing.
type RetentionPolicy struct {
	// ArchiveClosedAfter: sessions closed for longer (closed_at, else updated_at; a closed
	// session restored from an archive counts from its restore) are archived and their log
	// compacted out of the store: the archive is then the log's only copy.
	ArchiveClosedAfter time.Duration
	// DeleteArchivesAfter: archive files older than this (their archivedAt) are deleted,
	// unless one is the last copy of a session's log (see [Deletable]).
	DeleteArchivesAfter time.Duration
	// MaxArchiveBytes caps the archive directory's total size: while it is over, the oldest
	// archives that are not a last copy are deleted.
	MaxArchiveBytes int64
}

// Enabled reports whether any rule is on.
func (p RetentionPolicy) Enabled() bool {
	return p.ArchiveClosedAfter > 0 || p.DeleteArchivesAfter > 0 || p.MaxArchiveBytes > 0
}

// Why an archive goes (RetentionArchive.Reason) or stays (RetentionPlan.Kept).
const (
	ReasonAge      = "age"       // older than DeleteArchivesAfter
	ReasonSize     = "size"      // deleted to bring the directory under MaxArchiveBytes
	ReasonLastCopy = "last-copy" // would go, but it is the last copy of its session's log
)

// RetentionSession is a session retention archives.
type RetentionSession struct {
	SessionID string `json:"sessionId"`
	ClosedAt  string `json:"closedAt"`
}

// RetentionArchive is an archive file retention deletes or keeps, and why.
type RetentionArchive struct {
	wire.ArchiveInfo
	Reason string `json:"reason"`
	// Detail says, for a kept archive, why it is the last copy.
	Detail string `json:"detail,omitempty"`
}

// RetentionPlan is what a retention pass does, or (dry run) would do.
type RetentionPlan struct {
	// Archive are the sessions archived (with compaction).
	Archive []RetentionSession `json:"archive"`
	// Delete are the archive files deleted.
	Delete []RetentionArchive `json:"delete"`
	// Kept are the archive files a rule selected but that stay: last copies.
	Kept []RetentionArchive `json:"kept"`
	// ArchiveBytes is the archive directory's size before the deletions, and
	// ArchiveBytesAfter after them (not counting the archives the pass writes).
	ArchiveBytes      int64 `json:"archiveBytes"`
	ArchiveBytesAfter int64 `json:"archiveBytesAfter"`
	// Errors are the actions that failed (the pass goes on with the next).
	Errors []string `json:"errors"`
}

// RetentionReader is what planning retention reads; a store.Store has it.
type RetentionReader interface {
	ListSessions(ctx context.Context, f store.ListFilter) ([]*store.Session, string, error)
	GetSession(ctx context.Context, id string) (*store.Session, error)
	Lifecycle(ctx context.Context, id string) (store.Lifecycle, error)
}

// closedAt is when a closed session closed: closed_at, else updated_at, else started_at.
func closedAt(r *contract.SessionRecord) (time.Time, string, bool) {
	for _, s := range []string{r.ClosedAt.Get(), r.UpdatedAt.Get(), r.StartedAt} {
		if s == "" {
			continue
		}
		t, err := contract.ParseTime(s)
		return t, s, err == nil
	}
	return time.Time{}, "", false
}

// PlanRetention works out what the policy selects at now in the store r reads and the archive
// directory dir: closed sessions to archive, archive files to delete. It changes nothing; it
// is the dry run, and the first half of [Service.ApplyRetention]. Closed sessions are found
// by the store's status index (ListSessions with Status closed).
func PlanRetention(ctx context.Context, r RetentionReader, dir string, p RetentionPolicy, now time.Time) (*RetentionPlan, error) {
	plan := &RetentionPlan{Archive: []RetentionSession{}, Delete: []RetentionArchive{}, Kept: []RetentionArchive{}, Errors: []string{}}
	if p.ArchiveClosedAfter > 0 {
		cutoff := now.Add(-p.ArchiveClosedAfter)
		for after := ""; ; {
			page, next, err := r.ListSessions(ctx, store.ListFilter{Status: contract.SessionStatusClosed, After: after, Limit: 1000})
			if err != nil {
				return nil, fmt.Errorf("retention: list closed sessions: %w", err)
			}
			for _, s := range page {
				t, at, ok := closedAt(&s.Record)
				if !ok || !t.Before(cutoff) {
					continue
				}
				// A closed session restored from its archive stays closed: it counts from its
				// restore, so that it is not archived again before anyone could read it.
				lc, err := r.Lifecycle(ctx, s.Record.SessionID)
				if err != nil {
					return nil, fmt.Errorf("retention: session %s: %w", s.Record.SessionID, err)
				}
				if rt, err := contract.ParseTime(lc.RestoredAt); err == nil && !rt.Before(cutoff) {
					continue
				}
				plan.Archive = append(plan.Archive, RetentionSession{SessionID: s.Record.SessionID, ClosedAt: at})
			}
			if next == "" {
				break
			}
			after = next
		}
	}
	if p.DeleteArchivesAfter <= 0 && p.MaxArchiveBytes <= 0 {
		return plan, nil
	}
	list, err := archive.List(dir, "")
	if err != nil {
		return nil, fmt.Errorf("retention: %w", err)
	}
	for _, a := range list {
		plan.ArchiveBytes += a.Bytes
	}
	plan.ArchiveBytesAfter = plan.ArchiveBytes
	// Oldest first: age deletes a prefix, the cap deletes from the oldest on.
	sort.SliceStable(list, func(i, j int) bool { return list[i].ArchivedAt < list[j].ArchivedAt })
	names := make(map[string]bool, len(list))
	for _, a := range list {
		names[a.Name] = true
	}
	ageCutoff := now.Add(-p.DeleteArchivesAfter)
	for _, a := range list {
		reason := ""
		if at, err := contract.ParseTime(a.ArchivedAt); err == nil && p.DeleteArchivesAfter > 0 && at.Before(ageCutoff) {
			reason = ReasonAge
		} else if p.MaxArchiveBytes > 0 && plan.ArchiveBytesAfter > p.MaxArchiveBytes {
			reason = ReasonSize
		}
		if reason == "" {
			continue
		}
		ok, why, err := Deletable(ctx, r, dir, a, names)
		if err != nil {
			return nil, fmt.Errorf("retention: %w", err)
		}
		if !ok {
			plan.Kept = append(plan.Kept, RetentionArchive{ArchiveInfo: a, Reason: ReasonLastCopy, Detail: why})
			continue
		}
		plan.Delete = append(plan.Delete, RetentionArchive{ArchiveInfo: a, Reason: reason})
		plan.ArchiveBytesAfter -= a.Bytes
	}
	return plan, nil
}

// Deletable reports whether deleting the archive a leaves its session's log somewhere else,
// and when it does not, why. An archive is the last copy, and stays, when its session is not
// in the store (the archive came from elsewhere, or the store lost it), or when it is the
// archive the session's lifecycle state names while the session is archived or its log
// compacted. An older archive of a compacted session goes only if the session's latest archive
// is in dir (names) and verifies: it holds the whole log. An archive of a session whose whole
// log is in the store (never compacted, or restored since) is a spare copy.
func Deletable(ctx context.Context, r RetentionReader, dir string, a wire.ArchiveInfo, names map[string]bool) (bool, string, error) {
	sess, err := r.GetSession(ctx, a.SessionID)
	if errors.Is(err, store.ErrSessionNotFound) {
		return false, fmt.Sprintf("session %s is not in the store: this archive is its only copy", a.SessionID), nil
	}
	if err != nil {
		return false, "", fmt.Errorf("session %s: %w", a.SessionID, err)
	}
	lc, err := r.Lifecycle(ctx, a.SessionID)
	if err != nil {
		return false, "", fmt.Errorf("session %s: %w", a.SessionID, err)
	}
	archived := sess.Record.Status == contract.SessionStatusArchived
	if a.Name == lc.LastArchiveName && (archived || lc.CompactedThrough != nil) {
		return false, fmt.Sprintf("it is session %s's latest archive and the session is archived", a.SessionID), nil
	}
	if lc.CompactedThrough == nil {
		return true, "", nil
	}
	if !names[lc.LastArchiveName] {
		return false, fmt.Sprintf("session %s's log is compacted and its latest archive %s is missing: this may be the only copy", a.SessionID, lc.LastArchiveName), nil
	}
	path, err := archive.Find(dir, lc.LastArchiveName)
	if err == nil {
		var data []byte
		if data, err = os.ReadFile(path); err == nil {
			_, _, err = archive.Decode(data)
		}
	}
	if err != nil {
		return false, fmt.Sprintf("session %s's log is compacted and its latest archive %s does not verify (%v): this may be the only copy", a.SessionID, lc.LastArchiveName, err), nil
	}
	return true, "", nil
}

// ApplyRetention runs one retention pass: it archives (with compaction) the closed sessions
// the policy selects, into dir, then deletes the archive files it selects, each only after
// checking again, under the session's lock, that it is not the last copy of the session's
// log. An action that fails is listed in the plan's Errors and the pass goes on.
func (s *Service) ApplyRetention(ctx context.Context, dir string, p RetentionPolicy) (*RetentionPlan, error) {
	plan, err := PlanRetention(ctx, s.st, dir, RetentionPolicy{ArchiveClosedAfter: p.ArchiveClosedAfter}, s.now())
	if err != nil {
		return nil, err
	}
	done := plan.Archive[:0]
	for _, a := range plan.Archive {
		_, err := s.Archive(ctx, a.SessionID, ArchiveOptions{Dir: dir, Compact: true})
		var rej *RejectError
		switch {
		case errors.As(err, &rej):
			continue // it moved or was archived meanwhile: the next pass sees it as it is
		case err != nil:
			plan.Errors = append(plan.Errors, fmt.Sprintf("archive session %s: %v", a.SessionID, err))
			continue
		}
		done = append(done, a)
	}
	plan.Archive = done
	if p.DeleteArchivesAfter <= 0 && p.MaxArchiveBytes <= 0 {
		return plan, nil
	}
	del, err := PlanRetention(ctx, s.st, dir, RetentionPolicy{DeleteArchivesAfter: p.DeleteArchivesAfter, MaxArchiveBytes: p.MaxArchiveBytes}, s.now())
	if err != nil {
		return nil, err
	}
	plan.ArchiveBytes, plan.ArchiveBytesAfter, plan.Kept = del.ArchiveBytes, del.ArchiveBytes, del.Kept
	names := map[string]bool{}
	if list, err := archive.List(dir, ""); err == nil {
		for _, a := range list {
			names[a.Name] = true
		}
	}
	for _, a := range del.Delete {
		l := s.lock(a.SessionID)
		ok, why, err := Deletable(ctx, s.st, dir, a.ArchiveInfo, names)
		if err == nil && ok {
			err = os.Remove(a.Path)
		}
		s.unlock(a.SessionID, l)
		switch {
		case err != nil && !errors.Is(err, os.ErrNotExist):
			plan.Errors = append(plan.Errors, fmt.Sprintf("delete archive %s: %v", a.Name, err))
		case err != nil: // gone already
		case !ok:
			plan.Kept = append(plan.Kept, RetentionArchive{ArchiveInfo: a.ArchiveInfo, Reason: ReasonLastCopy, Detail: why})
		default:
			delete(names, a.Name)
			plan.Delete = append(plan.Delete, a)
			plan.ArchiveBytesAfter -= a.Bytes
		}
	}
	return plan, nil
}
