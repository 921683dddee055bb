package fsck

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sessiond/sessiond/store"
)

// The checks a [Finding] belongs to (Finding.Check), stable names for programs.
const (
	// CheckDatabase: the database's own integrity check failed, a session's rows could not
	// be read, or (SQLite) the write-ahead log holds commits SQLite ignores, after a frame
	// whose checksum fails.
	CheckDatabase = "database"
	// CheckRecord: the session record, snapshot, lineage or active branch breaks the contract
	// or disagrees with the columns kept beside it.
	CheckRecord = "record"
	// CheckSequence: the log has a gap, does not end at the session's last acknowledged
	// sequence, holds a sequence twice, or holds events at or before its compaction point.
	CheckSequence = "sequence"
	// CheckChain: the log's hash chain does not hold (store/chain.go): a stored event's hash is
	// not SHA-256 of its predecessor's hash and its stored bytes (the event, or its hash, or
	// its predecessor was rewritten), or the session's head records another hash than its
	// last event's, or none.
	CheckChain = "chain"
	// CheckDuplicate: an eventId or idempotencyKey is used by two events of one log.
	CheckDuplicate = "duplicate"
	// CheckEvent: a stored event breaks the contract, is not in canonical form, or disagrees
	// with the columns stored beside it (sequence, eventId, idempotencyKey, type, runId,
	// sessionId).
	CheckEvent = "event"
	// CheckRuns: the run projection is not what the log folds to.
	CheckRuns = "runs"
	// CheckCommandResult: a stored command result breaks the contract, is filed under another
	// key or session, or names events the log does not hold.
	CheckCommandResult = "command-result"
	// CheckLifecycle: the lifecycle state does not decode or contradicts the record (archived
	// without an archive, compacted past the log's end, compacted without an archive).
	CheckLifecycle = "lifecycle"
	// CheckArchive: an archive file fails verification (truncated, altered: its checksum does
	// not hold), is not the one the session recorded, or is missing while it is the only
	// copy of a compacted log.
	CheckArchive = "archive"
	// CheckUsage: the usage rollup of a session whose log is whole (never compacted) is not
	// what its log counts (store/usage.go); sessiond usage-rebuild repairs it.
	CheckUsage = "usage"
)

// Finding is one inconsistency. SessionID and Sequence say where, when it is about a session
// or one of its events; Archive names the archive file concerned.
type Finding struct {
	Check     string `json:"check"`
	SessionID string `json:"sessionId,omitempty"`
	Sequence  *int64 `json:"sequence,omitempty"`
	Archive   string `json:"archive,omitempty"`
	Message   string `json:"message"`
}

// String is the finding as one line: "session S sequence 12: event: message".
func (f Finding) String() string {
	where := ""
	switch {
	case f.SessionID != "" && f.Sequence != nil:
		where = fmt.Sprintf("session %s sequence %d: ", f.SessionID, *f.Sequence)
	case f.SessionID != "":
		where = fmt.Sprintf("session %s: ", f.SessionID)
	case f.Archive != "":
		where = fmt.Sprintf("archive %s: ", f.Archive)
	}
	return where + f.Check + ": " + f.Message
}

// Progress is how far a check has come.
type Progress struct {
	Sessions int   `json:"sessions"`
	Events   int64 `json:"events"`
	Archives int   `json:"archives"`
}

// Options configure [Check].
type Options struct {
	// ArchiveDir is the archive directory. Empty: archives are not checked, and the run
	// projection of a compacted session is not compared (its first events are only there).
	ArchiveDir string
	// Workers is how many sessions are checked at once (default GOMAXPROCS).
	Workers int
	// Progress, when set, is called about every ProgressEvery with the progress so far, and
	// once at the end, from one goroutine at a time.
	Progress func(Progress)
	// ProgressEvery is the interval of the Progress calls (default 200ms).
	ProgressEvery time.Duration
	// MaxFindingsPerSession bounds the findings kept per session (default 100); one more
	// finding then says how many were left out.
	MaxFindingsPerSession int
}

// Report is the result of a check.
type Report struct {
	Progress
	// ArchivesChecked is false when no archive directory was given.
	ArchivesChecked bool `json:"archivesChecked"`
	// Findings are ordered by session, then sequence; those about no session come first.
	Findings []Finding `json:"findings"`
}

// Clean reports whether the check found nothing.
func (r *Report) Clean() bool { return len(r.Findings) == 0 }

// Check checks every session of the store in, and the archives of opt.ArchiveDir, and
// returns what it found. It returns an error, and no report, only when it could not check:
// the sessions cannot be listed, the archive directory cannot be read, ctx ends. A session
// whose rows cannot be read is a finding (CheckDatabase), and the check goes on.
func Check(ctx context.Context, in store.Inspector, opt Options) (*Report, error) {
	if opt.Workers <= 0 {
		opt.Workers = runtime.GOMAXPROCS(0)
	}
	if opt.ProgressEvery <= 0 {
		opt.ProgressEvery = 200 * time.Millisecond
	}
	if opt.MaxFindingsPerSession <= 0 {
		opt.MaxFindingsPerSession = 100
	}
	rep := &Report{ArchivesChecked: opt.ArchiveDir != "", Findings: []Finding{}}
	var (
		mu       sync.Mutex
		sessions atomic.Int64
		events   atomic.Int64
		narchive atomic.Int64
	)
	add := func(fs ...Finding) {
		mu.Lock()
		rep.Findings = append(rep.Findings, fs...)
		mu.Unlock()
	}
	progress := func() Progress {
		return Progress{Sessions: int(sessions.Load()), Events: events.Load(), Archives: int(narchive.Load())}
	}
	if opt.Progress != nil {
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			t := time.NewTicker(opt.ProgressEvery)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					opt.Progress(progress())
				}
			}
		}()
		defer func() {
			close(stop)
			<-done
			opt.Progress(progress())
		}()
	}

	// The database's own check reads every page; it runs beside the sessions' checks, on
	// a connection of its own.
	var problems []string
	dbChecked := make(chan struct{})
	go func() {
		defer close(dbChecked)
		var err error
		if problems, err = in.InspectDatabase(ctx); err != nil {
			problems = append(problems, err.Error())
		}
		for _, p := range problems {
			add(Finding{Check: CheckDatabase, Message: p})
		}
	}()

	var arch *archives
	if opt.ArchiveDir != "" {
		a, fs, err := scanArchives(ctx, opt.ArchiveDir, func() { narchive.Add(1) })
		if err != nil {
			<-dbChecked
			return nil, err
		}
		arch = a
		add(fs...)
	}

	ids := make(chan string, 256)
	var wg sync.WaitGroup
	for range opt.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range ids {
				c := &sessionCheck{id: id, archives: arch, max: opt.MaxFindingsPerSession, events: &events}
				err := in.InspectSession(ctx, id, c.run)
				switch {
				case errors.Is(err, store.ErrSessionNotFound):
					continue // gone since it was listed
				case err != nil && ctx.Err() == nil:
					c.find(CheckDatabase, nil, "could not read the session's rows: %v", err)
				}
				sessions.Add(1)
				add(c.result()...)
			}
		}()
	}
	var listErr error
	for after := ""; ; {
		page, err := in.InspectSessionIDs(ctx, after, 1000)
		if err != nil {
			listErr = err
			break
		}
		for _, id := range page {
			select {
			case ids <- id:
			case <-ctx.Done():
			}
		}
		if len(page) < 1000 || ctx.Err() != nil {
			break
		}
		after = page[len(page)-1]
	}
	close(ids)
	wg.Wait()
	<-dbChecked
	if listErr != nil && ctx.Err() == nil && len(problems) > 0 {
		// The database's own check failed already: listing failing too is part of that.
		add(Finding{Check: CheckDatabase, Message: "could not list the sessions: " + listErr.Error()})
		listErr = nil
	}
	if listErr != nil {
		return nil, fmt.Errorf("fsck: %w", listErr)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("fsck: %w", err)
	}
	rep.Progress = progress()
	sortFindings(rep.Findings)
	return rep, nil
}

// sortFindings orders findings by session (none first), then sequence (none first), check,
// archive and message, so that a report reads the same every time.
func sortFindings(fs []Finding) {
	seq := func(f Finding) int64 {
		if f.Sequence == nil {
			return -2
		}
		return *f.Sequence
	}
	sort.SliceStable(fs, func(i, j int) bool {
		a, b := fs[i], fs[j]
		if a.SessionID != b.SessionID {
			return a.SessionID < b.SessionID
		}
		if seq(a) != seq(b) {
			return seq(a) < seq(b)
		}
		if a.Check != b.Check {
			return a.Check < b.Check
		}
		if a.Archive != b.Archive {
			return a.Archive < b.Archive
		}
		return a.Message < b.Message
	})
}
