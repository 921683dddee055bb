package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/sessiond/sessiond/wire"
	"os"
	"path/filepath"
	"time"

	"github.com/sessiond/sessiond/archive"
	"github.com/sessiond/sessiond/contract"
	"github.com/sessiond/sessiond/store"
)

// ArchiveOptions configure [Service.Archive].
type ArchiveOptions struct {
	// Dir is the archive directory (created when missing).
	Dir  string
	Note wire.Note
	// Gate is the updated_by_gate of the change (default "owner").
	Gate string
	// Compact removes the session's events from the store once the file is written, synced,
	// read back and verified.
	Compact bool
	// Progress, if set, is told how far the archive has come (phases read, write, compact).
	Progress ProgressFunc
}

// ArchiveResult is the answer of archive.
type ArchiveResult struct {
	wire.ArchiveInfo
	Events    int            `json:"events"`
	Compacted int64          `json:"compacted"`
	Session   *store.Session `json:"-"`
}

// Archive writes the session to a self-contained archive file, then marks it archived
// (status "archived", archive_path set, the lifecycle state's last archive) and, with
// opt.Compact, deletes its events from the store. The file is written to a temporary file in
// the same directory, synced, renamed into place, the directory synced, then read back and
// verified; only then does the session change. A crash at any point leaves either the old
// state (and at most a temporary file, which nothing reads) or a complete, verified archive.
// The session is refused (INVALID_SESSION_STATE) when already archived; when its log moves
// while the file is written, the file is removed and the error is SESSION_MOVED (archive again).
func (s *Service) Archive(ctx context.Context, id string, opt ArchiveOptions) (*ArchiveResult, error) {
	if opt.Dir == "" {
		return nil, errors.New("archive: no archive directory configured")
	}
	if opt.Gate == "" {
		opt.Gate = "owner"
	}
	l := s.lock(id)
	defer s.unlock(id, l)
	sess, err := s.st.GetSession(ctx, id)
	if err != nil {
		return nil, err
	}
	lc, err := s.st.Lifecycle(ctx, id)
	if err != nil {
		return nil, err
	}
	if sess.Record.Status == contract.SessionStatusArchived || lc.CompactedThrough != nil {
		return nil, &RejectError{Code: contract.CodeInvalidState, Message: fmt.Sprintf("session %q is already archived (%s)", id, lc.LastArchiveName),
			Remedy: Remedy{Kind: RestoreArchive, Archive: lc.LastArchiveName, Then: "then archive it again"}}
	}
	last := sess.LastSequence
	total := last + 1
	events, fold, err := s.readForArchive(ctx, id, last, opt.Progress)
	if err != nil {
		return nil, err
	}
	opt.Progress.report(PhaseWrite, 0, total)
	runs, err := s.st.Runs(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("archive: %w", err)
	}
	now := s.now()
	t := fold.Transcript()
	c := &archive.Content{SessionID: id, ArchivedAt: contract.FormatTime(now), Record: sess.Record, Snapshot: sess.Snapshot,
		Lineage: sess.Lineage, ActiveBranch: sess.ActiveBranch, LastSequence: last, Lifecycle: lc, Note: opt.Note,
		Summary: summarize(&t, len(runs)), Runs: runs, Events: events}
	if c.Events == nil {
		c.Events = []json.RawMessage{}
	}
	if p := sess.Record.Project.Get(); p != "" {
		c.Project = &p
	}
	info, err := writeVerified(opt.Dir, c, now)
	if err != nil {
		return nil, err
	}
	updated, err := s.markArchived(ctx, c, info, opt.Gate)
	if err != nil {
		return nil, err
	}
	opt.Progress.report(PhaseWrite, total, total)
	res := &ArchiveResult{ArchiveInfo: info, Events: len(events), Session: updated}
	if opt.Compact && last >= 0 {
		if err := s.compactArchived(ctx, res, last, opt.Progress); err != nil {
			return res, err
		}
	}
	return res, nil
}

// readForArchive reads the session's log through sequence last, in pages, and folds it into
// the summary fold the archive's summary comes from. It reports the read phase's progress and
// fails when the log ends before last.
func (s *Service) readForArchive(ctx context.Context, id string, last int64, progress ProgressFunc) ([]json.RawMessage, *Fold, error) {
	total := last + 1
	progress.report(PhaseRead, 0, total)
	events := make([]json.RawMessage, 0, total)
	fold := newSummaryFold(id)
	for after := int64(-1); after < last; {
		page, err := s.st.ReadEvents(ctx, id, after, 10000)
		if err != nil {
			return nil, nil, fmt.Errorf("archive: read the log: %w", err)
		}
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			if e.Sequence > last {
				break
			}
			events = append(events, json.RawMessage(e.Data))
			if err := fold.Apply(e); err != nil {
				return nil, nil, fmt.Errorf("archive: fold event %d: %w", e.Sequence, err)
			}
			after = e.Sequence
			if n := int64(len(events)); n%progressEvery == 0 {
				progress.report(PhaseRead, n, total)
			}
		}
	}
	if int64(len(events)) != total {
		return nil, nil, fmt.Errorf("archive: read %d events but the log ends at sequence %d", len(events), last)
	}
	progress.report(PhaseRead, total, total)
	return events, fold, nil
}

// writeVerified encodes c and writes it atomically to its file under dir (in its project's
// directory, named after the session and now), then reads the file back and verifies it; a
// file that does not verify is removed. It returns the written archive's description.
func writeVerified(dir string, c *archive.Content, now time.Time) (wire.ArchiveInfo, error) {
	data, err := archive.Encode(c)
	if err != nil {
		return wire.ArchiveInfo{}, err
	}
	pdir := filepath.Join(dir, archive.ProjectDir(c.Project))
	path := filepath.Join(pdir, archive.FileName(c.SessionID, now))
	if err := archive.Within(dir, path); err != nil {
		return wire.ArchiveInfo{}, err
	}
	if err := archive.WriteFileAtomic(dir, pdir, path, data); err != nil {
		return wire.ArchiveInfo{}, fmt.Errorf("archive: %w", err)
	}
	// Read back what the disk holds and verify it before anything depends on it.
	back, err := os.ReadFile(path)
	if err != nil {
		return wire.ArchiveInfo{}, fmt.Errorf("archive: read back %s: %w", path, err)
	}
	got, sum, err := archive.Decode(back)
	err = archiveRefusal(err)
	if err != nil || len(got.Events) != len(c.Events) {
		os.Remove(path)
		return wire.ArchiveInfo{}, fmt.Errorf("archive: %s does not verify after writing (%v); nothing changed", path, err)
	}
	return wire.ArchiveInfo{Name: filepath.Base(path), Path: path, SessionID: c.SessionID, Project: c.Project, ArchivedAt: c.ArchivedAt, Checksum: sum, Bytes: int64(len(data))}, nil
}

// markArchived marks the session archived by the written archive info (status, archive path,
// the lifecycle state's last archive), unless its log moved past c.LastSequence or it was
// archived meanwhile: then the file is removed and the refusal is SESSION_MOVED.
func (s *Service) markArchived(ctx context.Context, c *archive.Content, info wire.ArchiveInfo, gate string) (*store.Session, error) {
	id, last := c.SessionID, c.LastSequence
	var moved *RejectError
	updated, _, err := s.st.UpdateLifecycle(ctx, id, func(cur *store.Session, lc *store.Lifecycle) error {
		if cur.LastSequence != last || cur.Record.Status == contract.SessionStatusArchived {
			moved = reject(contract.CodeSessionMoved, "session %q changed while it was archived (log now ends at %d, archived through %d; status %s); archive it again", id, cur.LastSequence, last, cur.Record.Status)
			return moved
		}
		rec := &cur.Record
		rec.Status = contract.SessionStatusArchived
		rec.ArchivePath = contract.Some(info.Path)
		rec.UpdatedAt = contract.Some(c.ArchivedAt)
		rec.UpdatedByGate = contract.Some(gate)
		lc.LastArchivedAt, lc.LastArchiveName, lc.LastArchiveChecksum = c.ArchivedAt, info.Name, info.Checksum
		return validRecord(rec)
	})
	if moved != nil {
		os.Remove(info.Path)
		return nil, moved
	}
	if err != nil {
		return nil, fmt.Errorf("archive: mark the session archived: %w", err)
	}
	return updated, nil
}

// compactArchived deletes the archived session's events through last from the store and
// refreshes res with the number deleted and the session as it is now, reporting the compact
// phase's progress.
func (s *Service) compactArchived(ctx context.Context, res *ArchiveResult, last int64, progress ProgressFunc) error {
	total := last + 1
	progress.report(PhaseCompact, 0, total)
	n, err := s.st.CompactEvents(ctx, res.SessionID, last)
	if err != nil {
		return fmt.Errorf("archive: the archive %s is complete, but compacting the log failed: %w", res.Path, err)
	}
	res.Compacted = n
	if res.Session, err = s.st.GetSession(ctx, res.SessionID); err != nil {
		return err
	}
	progress.report(PhaseCompact, total, total)
	return nil
}

func validRecord(rec *contract.SessionRecord) error {
	b, err := contract.Marshal(rec)
	if err != nil {
		return err
	}
	return contract.Validate(contract.KindSession, b, contract.Limits{})
}

// summarize derives the archive summary from the folded log.
func summarize(t *wire.Transcript, runs int) archive.Summary {
	s := archive.Summary{Plan: t.Plan, OpenTasks: []contract.TaskPayload{}, PendingApprovals: []contract.ApprovalPayload{},
		Usage: t.Usage, Events: int(t.LastSequence + 1), Runs: runs}
	for _, task := range t.Tasks {
		if task.Status == "pending" || task.Status == "running" {
			s.OpenTasks = append(s.OpenTasks, task)
		}
	}
	for _, a := range t.Approvals {
		if a.Status == "requested" {
			s.PendingApprovals = append(s.PendingApprovals, a)
		}
	}
	// The latest completed summary; the latest of any status when none completed.
	for i := len(t.Summaries) - 1; i >= 0; i-- {
		if sum := t.Summaries[i]; sum.Status == "completed" || (s.LastSummary == nil && i == len(t.Summaries)-1) {
			s.LastSummary = &sum
			if sum.Status == "completed" {
				break
			}
		}
	}
	return s
}

// SaveArchive verifies the archive file at upload (received from another host) as fully as
// restore would before importing it, and stores a copy in dir under the name and project
// directory it would have been written with ([archive.Save]). Verified are the checksum and
// header, the session id (one a session could have: "../../etc" is refused), the record against
// the contract, every event against the contract and in sequence, and the runs against those
// the log folds to. Saving the same file twice is a no-op; another file under the same name, or
// a file that fails verification, is refused with ARCHIVE_INVALID and nothing is stored. upload
// is left in place.
func (s *Service) SaveArchive(dir, upload string) (*wire.ArchiveInfo, error) {
	// Verified as a stream (archive.VerifyFile): each event is checked and dropped, so the
	// upload's memory does not grow with its size.
	var lc *logCheck
	c, sum, err := archive.VerifyFile(upload, func(i int, raw []byte) error {
		if lc == nil {
			lc = &logCheck{runs: map[string]*contract.Run{}}
		}
		_, err := lc.add(i, raw)
		return err
	})
	if err != nil {
		var le *logError
		if errors.As(err, &le) {
			return nil, reject(contract.CodeArchiveInvalid, "%s: %s", filepath.Base(upload), le.msg)
		}
		return nil, archiveRefusal(err)
	}
	if probs := contract.SessionIDProblems(c.SessionID); len(probs) > 0 {
		return nil, reject(contract.CodeArchiveInvalid, "the archive's session id %q is not one a session can have (%s): %s", c.SessionID, probs[0].Rule, contract.SessionIDRule)
	}
	at, err := contract.ParseTime(c.ArchivedAt)
	if err != nil {
		return nil, reject(contract.CodeArchiveInvalid, "archivedAt %q: %v", c.ArchivedAt, err)
	}
	if lc == nil {
		lc = &logCheck{runs: map[string]*contract.Run{}}
	}
	if _, err := s.importFrom(c, lc, sum, archive.FileName(c.SessionID, at)); err != nil {
		return nil, err
	}
	info, err := archive.SaveFile(dir, upload, c, sum)
	return info, archiveRefusal(err)
}

// RestoreRequest selects the archive to restore: Name, or the newest archive of Project
// ("-" for sessions without a project).
type RestoreRequest struct {
	Name    string `json:"name,omitempty"`
	Project string `json:"project,omitempty"`
	// Progress, if set, is told how far the restore has come (phases verify, import). It is
	// not part of the HTTP request.
	Progress ProgressFunc `json:"-"`
}

// RestoreResult is the answer of restore.
type RestoreResult struct {
	Archive wire.ArchiveInfo `json:"archive"`
	Session *store.Session   `json:"-"`
	Events  int              `json:"events"`
	// Replaced is true when the session was in the store, archived with its log compacted,
	// and was brought back over it.
	Replaced bool `json:"replaced"`
	// How says what restore did: RestoredNew, RestoredOverCompacted or RestoredReactivated.
	How string `json:"how"`
}

// Restore verifies an archive of dir and brings its session back into the store, under the
// same id, with its log byte for byte (same events, sequences, ids) and its runs. The restored
// record is paused (closed stays closed), with last_heartbeat_at now, updated_by_gate
// "handoff" and archive_path the file it came from; the lifecycle state keeps the work window
// and records the archive as the last one. An archived session still in the store comes back
// too: over its compacted row when it was archived with --compact, or, when its log is still
// in the store, by reactivating it (the log is kept as stored; see restoreHow). A session
// that is in the store and not archived is refused with RESTORE_CONFLICT (restoring twice is
// a conflict too). A tampered, truncated or inconsistent file is refused with ARCHIVE_INVALID
// and changes nothing.
func (s *Service) Restore(ctx context.Context, dir string, req RestoreRequest) (*RestoreResult, error) {
	var path string
	switch {
	case req.Name != "":
		p, err := archive.Find(dir, req.Name)
		if err != nil {
			return nil, archiveRefusal(err)
		}
		path = p
	case req.Project != "":
		list, err := archive.List(dir, req.Project)
		if err != nil {
			return nil, err
		}
		if len(list) == 0 {
			return nil, reject(contract.CodeArchiveNotFound, "no archive of project %q in %s", req.Project, dir)
		}
		path = list[0].Path
	default:
		return nil, reject(contract.CodeMalformed, "say which archive to restore: a name, or a project for its latest archive")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("restore: read %s: %w", path, err)
	}
	c, sum, err := archive.Decode(data)
	if err != nil {
		err = archiveRefusal(err)
		var rej *RejectError
		if errors.As(err, &rej) {
			rej.Message = filepath.Base(path) + ": " + rej.Message
		}
		return nil, err
	}
	imp, err := s.importOf(c, sum, path, req.Progress)
	if err != nil {
		return nil, err
	}
	l := s.lock(c.SessionID)
	defer s.unlock(c.SessionID, l)
	info := wire.ArchiveInfo{Name: filepath.Base(path), Path: path, SessionID: c.SessionID, Project: c.Project, ArchivedAt: c.ArchivedAt, Checksum: sum, Bytes: int64(len(data))}
	before, err := s.st.GetSession(ctx, c.SessionID)
	if errors.Is(err, store.ErrSessionNotFound) {
		before, err = nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	var lc store.Lifecycle
	if before != nil {
		if lc, err = s.st.Lifecycle(ctx, c.SessionID); err != nil {
			return nil, fmt.Errorf("restore: %w", err)
		}
	}
	how, err := restoreHow(c.SessionID, info.Name, before, lc)
	if err != nil {
		return nil, err
	}
	if how == RestoredReactivated {
		sess, err := s.reactivate(ctx, c, sum, path, before, lc)
		if err != nil {
			return nil, err
		}
		return &RestoreResult{Archive: info, Session: sess, Events: int(sess.LastSequence + 1), How: how}, nil
	}
	total := int64(len(imp.Events))
	req.Progress.report(PhaseImport, 0, total)
	if err := s.importSession(ctx, OriginRestore, imp); err != nil {
		last := int64(-1)
		if before != nil {
			last = before.LastSequence
		}
		return nil, restoreConflict(c.SessionID, info.Name, last, lc, err)
	}
	if store.ClaimableRun(imp.Runs) != nil {
		// The restore queued a claimable run: wake the claims waiting in this process.
		s.queue.kick()
	}
	// The in-process projection may hold the old (compacted) log: rebuild it on next use.
	l.fold = NewFold(c.SessionID)
	sess, err := s.st.GetSession(ctx, c.SessionID)
	if err != nil {
		return nil, err
	}
	req.Progress.report(PhaseImport, total, total)
	return &RestoreResult{Archive: info, Session: sess, Events: len(c.Events), Replaced: before != nil, How: how}, nil
}

// importOf checks an archive's content (every event against the contract and in sequence, the
// runs against those the log folds to) and builds the store import, telling progress how far
// it has come (phase verify).
func (s *Service) importOf(c *archive.Content, sum, path string, progress ProgressFunc) (*store.Import, error) {
	lc := &logCheck{runs: map[string]*contract.Run{}}
	events := make([]store.StoredEvent, len(c.Events))
	total := int64(len(c.Events))
	progress.report(PhaseVerify, 0, total)
	for i, raw := range c.Events {
		if i > 0 && i%progressEvery == 0 {
			progress.report(PhaseVerify, int64(i), total)
		}
		ev, err := lc.add(i, raw)
		if err != nil {
			return nil, reject(contract.CodeArchiveInvalid, "%s: %s", filepath.Base(path), err.(*logError).msg)
		}
		events[i] = ev
	}
	progress.report(PhaseVerify, total, total)
	imp, err := s.importFrom(c, lc, sum, path)
	if err != nil {
		return nil, err
	}
	imp.Events = events
	return imp, nil
}

// logCheck checks an archive's events one by one, as they are read: each against the
// contract, in the session and in sequence, and folds their run status events into the runs.
type logCheck struct {
	sessionID string // the first event's, until the content's is known
	n         int64  // events checked
	runs      map[string]*contract.Run
	order     []string // run ids in the order the log starts them
}

// logError is a problem of an archive's log; its message names the event.
type logError struct{ msg string }

func (e *logError) Error() string { return e.msg }

// add checks event i (raw, which it does not keep) and returns it as the store keeps it (its
// Data is raw).
func (lc *logCheck) add(i int, raw []byte) (store.StoredEvent, error) {
	bad := func(format string, args ...any) (store.StoredEvent, error) {
		return store.StoredEvent{}, &logError{msg: fmt.Sprintf(format, args...)}
	}
	ev, err := contract.CheckEvent(raw, contract.Limits{MaxBytes: store.MaxEventBytes})
	if err != nil {
		return bad("event %d breaks the contract: %v", i, err)
	}
	if i == 0 {
		lc.sessionID = ev.SessionID
	}
	if ev.SessionID != lc.sessionID || ev.Sequence != int64(i) {
		return bad("event %d has session %q and sequence %d; want %q and %d", i, ev.SessionID, ev.Sequence, lc.sessionID, i)
	}
	lc.n++
	if f := ev.RunStatus; f != nil {
		prev := lc.runs[f.RunID]
		run, err := contract.ApplyRunStatus(prev, ev.SessionID, *f)
		if err != nil {
			return bad("event %d: %v", i, err)
		}
		if prev == nil {
			lc.order = append(lc.order, f.RunID)
		}
		lc.runs[f.RunID] = run
	}
	return store.StoredEvent{Sequence: int64(i), EventID: ev.EventID, IdempotencyKey: ev.IdempotencyKey, EventType: ev.EventType, RunID: ev.RunID, Data: raw}, nil
}

// importFrom checks what an archive's content says against its checked log (lc) and returns
// the import of its session, without events.
func (s *Service) importFrom(c *archive.Content, lc *logCheck, sum, path string) (*store.Import, error) {
	bad := func(format string, args ...any) error {
		return reject(contract.CodeArchiveInvalid, "%s: %s", filepath.Base(path), fmt.Sprintf(format, args...))
	}
	if c.LastSequence != lc.n-1 {
		return nil, bad("lastSequence is %d but the archive holds %d events", c.LastSequence, lc.n)
	}
	if lc.n > 0 && lc.sessionID != c.SessionID {
		return nil, bad("event 0 has session %q and sequence 0; want %q and 0", lc.sessionID, c.SessionID)
	}
	if len(lc.order) != len(c.Runs) {
		return nil, bad("the log has %d runs but the archive lists %d", len(lc.order), len(c.Runs))
	}
	for i, id := range lc.order {
		a, _ := json.Marshal(lc.runs[id])
		b, _ := json.Marshal(c.Runs[i])
		if !bytes.Equal(a, b) {
			return nil, bad("run %q does not match the log: the log folds to %s, the archive says %s", id, a, b)
		}
	}
	now := s.stamp()
	rec := c.Record
	if rec.Status != contract.SessionStatusClosed {
		rec.Status = contract.SessionStatusPaused
	}
	rec.LastHeartbeatAt = contract.Some(now)
	rec.UpdatedAt = contract.Some(now)
	rec.UpdatedByGate = contract.Some("handoff")
	rec.ArchivePath = contract.Some(path)
	if err := validRecord(&rec); err != nil {
		return nil, bad("the session record breaks the contract: %v", err)
	}
	lcy := c.Lifecycle
	lcy.LastArchivedAt, lcy.LastArchiveName, lcy.LastArchiveChecksum = c.ArchivedAt, filepath.Base(path), sum
	lcy.CompactedThrough = nil
	lcy.RestoredFrom, lcy.RestoredAt = sum, now
	return &store.Import{
		Session:   &store.Session{Record: rec, Snapshot: c.Snapshot, Lineage: c.Lineage, ActiveBranch: c.ActiveBranch, LastSequence: c.LastSequence},
		Lifecycle: lcy, Runs: c.Runs,
	}, nil
}
