package store

import (
	"context"
	"time"
)

// The change feed across sessions.
//
// Every driver records a Change for each session-level change in the same transaction as the
// write it records, and numbers the changes with a global sequence (Change.Seq: 1, 2, 3, ...)
// that has no gap and becomes visible in order: a reader that has seen change n and reads
// after n never misses a change numbered later, whichever instance of a shared store committed
// it. The changes of one session are numbered in their commit order. A change is readable once
// numbered: SQLite numbers it in the writing transaction (readable when the write returns);
// PostgreSQL numbers committed changes right after their commit, in a transaction of its own
// (readable milliseconds later; store/postgres/changes.go). SubscribeChanges reports them
// when they are readable.
// The changes recorded, by kind:
//
//   - ChangeSessionCreated: a session was created (CreateSession, ImportSession of a new id).
//   - ChangeSessionStatus: the record's status changed (a PATCH, the stale sweeper, a heartbeat
//     bringing a stale session back to running); Previous is the status before.
//   - ChangeSessionArchived, ChangeSessionRestored: the status became archived, or left it.
//   - ChangeRunQueued: a run became queued (created queued, or queued again).
//   - ChangeRunClaimed: a worker claimed the run (ClaimRun); Token is the new fencing token.
//   - ChangeRunFinished: the run reached a terminal status (stopped, completed, failed).
//
// Restoring an archive imports the session's runs again: their queued and terminal runs are
// reported again then, after the ChangeSessionRestored of the session.
const (
	ChangeSessionCreated  = "session.created"
	ChangeSessionStatus   = "session.status"
	ChangeSessionArchived = "session.archived"
	ChangeSessionRestored = "session.restored"
	ChangeRunQueued       = "run.queued"
	ChangeRunClaimed      = "run.claimed"
	ChangeRunFinished     = "run.finished"
)

// ChangeKinds lists every kind of Change, in the order documented above.
var ChangeKinds = []string{ChangeSessionCreated, ChangeSessionStatus, ChangeSessionArchived, ChangeSessionRestored,
	ChangeRunQueued, ChangeRunClaimed, ChangeRunFinished}

// MaxChangesPage is the most changes one ReadChanges returns (and its default).
const MaxChangesPage = 1000

// Change is one session-level change of the change feed.
type Change struct {
	// Seq is the change's place in the global order, from 1, without gaps.
	Seq int64 `json:"seq"`
	// Kind is one of ChangeKinds.
	Kind      string `json:"kind"`
	SessionID string `json:"sessionId"`
	// Project and AgentID are the session's, as they were when the change was recorded.
	Project string `json:"project"`
	AgentID string `json:"agentId"`
	// RunID names the run of a run.* change ("" otherwise).
	RunID string `json:"runId,omitempty"`
	// Status is the session's status (session.*) or the run's (run.*) after the change.
	Status string `json:"status"`
	// Previous is the status before the change, for a status change ("" when not known or new).
	Previous string `json:"previousStatus,omitempty"`
	// Attempt is the run's attempt number and Token its fencing token (run.* changes).
	Attempt int   `json:"attempt,omitempty"`
	Token   int64 `json:"fencingToken,omitempty"`
	// At is when the change was recorded, by the database's clock, to the millisecond.
	At time.Time `json:"at"`
}

// ChangeFilter selects changes for ReadChanges. Empty fields match everything.
type ChangeFilter struct {
	Project string
	AgentID string
}

// Match reports whether c passes the filter.
func (f ChangeFilter) Match(c *Change) bool {
	return (f.Project == "" || c.Project == f.Project) && (f.AgentID == "" || c.AgentID == f.AgentID)
}

// ChangesLimit returns the page size ReadChanges uses for limit: MaxChangesPage when limit is
// not positive or above it.
func ChangesLimit(limit int) int {
	if limit <= 0 || limit > MaxChangesPage {
		return MaxChangesPage
	}
	return limit
}

// ChangeFeed is the part of Store that serves the change feed (see the comment on the change
// kinds above).
type ChangeFeed interface {
	// ReadChanges returns the changes with Seq > after that match f, in order, at most limit
	// (default and cap MaxChangesPage). The cost is that of the changes it returns (an index
	// per filter field), not of the changes skipped.
	ReadChanges(ctx context.Context, after int64, f ChangeFilter, limit int) ([]Change, error)
	// LastChange returns the Seq of the last committed change, 0 when there is none.
	LastChange(ctx context.Context) (int64, error)
	// SubscribeChanges registers fn to be called after commits that recorded changes, with a
	// Seq up to which every change is committed and readable (on a shared store, also for the
	// commits of other instances). Calls may be merged or repeat a Seq; fn must not block.
	// The returned func unregisters it.
	SubscribeChanges(fn func(seq int64)) (cancel func())
}

// ChangeSubscribers is the registry of SubscribeChanges callbacks a driver keeps. The zero
// value is ready to use and safe for concurrent use; Notify calls the callbacks in registration
// order and never blocks on Add or a cancel.
type ChangeSubscribers struct {
	Registry[int64]
}

// Notify calls every registered callback with seq, in registration order.
func (s *ChangeSubscribers) Notify(seq int64) {
	for _, fn := range s.List() {
		fn(seq)
	}
}
